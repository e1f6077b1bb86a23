"""Every command answers --help in a fresh process started outside the checkout (an import cycle once broke one); a
mistyped command is named the closest one."""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from crc.cli.main import COMMANDS, main


@pytest.mark.parametrize("command", [[], *([name] for name in COMMANDS)])
def test_help_in_a_fresh_process(command, tmp_path):
    done = subprocess.run([sys.executable, "-m", "crc", *command, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: ")
    assert "Traceback" not in done.stderr


def test_a_bad_thread_count_is_one_line_before_any_work(tmp_path):
    env = {**os.environ, "CRC_THREADS": "many"}
    done = subprocess.run([sys.executable, "-m", "crc", "datasets"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == "Error: CRC_THREADS must be a whole number from 1 to 256, got 'many'"


@pytest.mark.parametrize("typed, message", [
    ("simulte", "No such command 'simulte'. (Did you mean 'simulate'?)"),
    ("lanch", "No such command 'lanch'. (Did you mean 'launch'?)"),
    ("xyzzy", "No such command 'xyzzy'."),
])
def test_a_mistyped_command_names_the_closest_one(typed, message):
    result = CliRunner().invoke(main, [typed])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == f"Error: {message}"


def test_the_experiment_help_opens_with_every_study_left_out_of_all():
    from crc.experiments import TABLES

    opening = " ".join(CliRunner().invoke(main, ["experiment", "--help"]).output.split("\n\n")[1].split())
    studies = [name for name, table in TABLES.items() if not table.in_all]
    assert studies and all(name in opening for name in studies), opening
