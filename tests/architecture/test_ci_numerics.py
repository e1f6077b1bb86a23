""".ci/simd_below.py: the exports under which CI's second suite runs a second CPU's numerics."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "simd_below.py"
NATIVE = {name: value for name, value in os.environ.items() if name not in ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE")}
"""This environment without the exports (CI's second suite runs under them): the CPU's own numerics."""


def _exports() -> dict:
    printed = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=True,
                             env=NATIVE).stdout
    if not printed.strip():
        return {}
    words = shlex.split(printed)
    assert words[0] == "export", printed
    return dict(word.split("=", 1) for word in words[1:])


def test_the_exports_turn_off_only_features_this_cpu_has_and_numpy_still_imports():
    exports = _exports()
    if not exports:
        pytest.skip("this CPU or numpy has no SIMD level the script knows: CI runs native numerics in both suites")
    assert set(exports) == {"NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE"}
    disabled = exports["NPY_DISABLE_CPU_FEATURES"].split()
    check = ("from numpy._core._multiarray_umath import __cpu_features__ as f; import sys; "
             f"sys.exit(any(f[name] for name in {disabled!r}))")
    env = {**NATIVE, **exports}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
