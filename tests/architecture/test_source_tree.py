"""Python run from the checkout's root finds the folder ``crc/`` first; the mapped packages must still import."""

import subprocess
import sys
from pathlib import Path

import pytest

from crc.source_tree import MAPPED_FOLDERS
from support.toml import tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_the_mapped_folders_are_those_of_pyproject():
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapped = {name: folder for name, folder in package_dir.items() if name != "crc"}
    assert mapped == MAPPED_FOLDERS


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="needs the checkout")
def test_python_in_the_checkout_root_imports_every_package_and_runs_the_command():
    code = ("import crc, crc.topologies, crc.nodes, crc.cli.main; "
            "print(crc.__file__); print(crc.topologies.__file__); print(crc.cli.__file__)")
    imported = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    package, topologies, cli = imported.stdout.split()
    assert Path(package) == ROOT / "crc" / "__init__.py"  # the checkout's folder, as the shadowing would have it
    assert Path(topologies) == ROOT / "topologies" / "__init__.py" and Path(cli) == ROOT / "cli" / "__init__.py"
    command = subprocess.run([sys.executable, "-m", "crc", "datasets"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    assert command.returncode == 0, command.stderr
    assert "letter" in command.stdout
