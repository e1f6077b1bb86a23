"""Every command answers --help in a fresh process started outside the checkout (an import cycle once broke one)."""

import subprocess
import sys

import pytest

from crc.cli.main import COMMANDS


@pytest.mark.parametrize("command", [[], *([name] for name in COMMANDS)])
def test_help_in_a_fresh_process(command, tmp_path):
    done = subprocess.run([sys.executable, "-m", "crc", *command, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: ")
    assert "Traceback" not in done.stderr
