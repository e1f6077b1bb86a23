"""``crc launch`` as a user meets it: its summary and JSON, its figures, its progress, and Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from crc.cli.launch import _RoundsDone
from crc.cli.main import main
from crc.nodes import checkpoint

SMALL = ["--data", "twonorm", "--nodes", "3", "--local-size", "20", "--rounds", "3", "--test-size", "300"]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_work_directory_that_cannot_be_made_is_one_line_naming_it(tmp_path):
    """It was the operating system's own words: '[Errno 20] Not a directory: ...'."""
    (tmp_path / "file").write_text("")
    result = run("launch", *SMALL, "--workdir", tmp_path / "file" / "work")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == f"Error: --workdir {tmp_path / 'file' / 'work'}: cannot create it (Not a directory)"


def test_launch_json_does_not_name_a_removed_work_directory_and_draws_the_peers(tmp_path):
    result = run("launch", *SMALL, "--json", "--out", tmp_path / "run.json", "--plots", tmp_path / "figs")
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert "workdir" not in results["network"] and results["network"]["finished"] == 3
    assert json.loads((tmp_path / "run.json").read_text()) == results
    for name in ("launch-peers.png", "launch-peers.pdf"):
        assert (tmp_path / "figs" / name).stat().st_size > 0
    kept = run("launch", *SMALL, "--workdir", tmp_path / "work")
    assert kept.exit_code == 0, kept.output
    lines = kept.stdout.splitlines()
    assert lines[0].startswith("twonorm: nb on a tree of 3 real peers on 127.0.0.1")
    assert lines[1] == "algorithm accelerated: exact diffusion, categorical start, averaged category counts, 3 local steps per round"
    assert lines[2].startswith("3 of 3 peers finished in") and lines[-1].startswith("network: ")
    assert (tmp_path / "work" / "model-0.json").exists()


def test_progress_counts_the_rounds_in_the_peers_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setattr("crc.cli.launch.CHECKPOINT_POLL_S", 0.0)
    rounds_done = _RoundsDone(tmp_path, 3, 8)
    assert rounds_done() == 0
    for index, round_ in ((0, 5), (2, 7)):
        checkpoint.save(tmp_path / f"checkpoint-{index}", identity={}, round_=round_, stats=[0.0], metrics={"rounds_done": round_})
    assert rounds_done() == 12
    (tmp_path / "checkpoint-2" / checkpoint.file_name(7)).write_text("{broken")  # unreadable for a moment: keep 7
    assert rounds_done() == 12


@pytest.mark.parametrize("em, passes, rounds", [(0, (3, 9), 3 + 8), (50, (30, 59), 0 + 8)])
def test_progress_of_a_vertical_group_counts_its_rounds_not_its_passes(tmp_path, monkeypatch, em, passes, rounds):
    """A vertical group of 8 rounds checkpoints a mixture's EM passes first, then 8 rounds and a pass that only
    scores: at most 8 rounds a peer, 16 for two."""
    monkeypatch.setattr("crc.cli.launch.CHECKPOINT_POLL_S", 0.0)
    rounds_done = _RoundsDone(tmp_path, 2, 8, em)
    for index, pass_ in enumerate(passes):
        checkpoint.save(tmp_path / f"checkpoint-{index}", identity={}, round_=pass_, stats=[0.0], metrics={"rounds_done": pass_})
    assert rounds_done() == rounds
    checkpoint.save(tmp_path / "checkpoint-0", identity={}, round_=em + 8 + 1, stats=[0.0], metrics={"rounds_done": em + 8 + 1})
    assert rounds_done() == 16


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, read from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_launch_reaps_every_peer_and_exits_128_plus_the_signal(tmp_path, signum, status):
    work = tmp_path / "work"
    command = [sys.executable, "-m", "crc", "launch", "--data", "twonorm", "--nodes", "3", "--local-size", "20",
               "--rounds", "100000", "--test-size", "300", "--workdir", str(work)]
    with subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as launch:
        peers = set()
        try:
            deadline = time.monotonic() + 60
            while not all((checkpoint.completed_round(work / f"checkpoint-{i}") or 0) >= 2 for i in range(3)):
                assert time.monotonic() < deadline and launch.poll() is None, launch.stderr.read() if launch.poll() else ""
                time.sleep(0.05)
            peers = descendants(launch.pid)
            assert len(peers) >= 3
            launch.send_signal(signum)  # to the launcher alone, not to its peers: it must stop them itself
            out, err = launch.communicate(timeout=30)
        finally:
            if launch.poll() is None:
                launch.kill()
        assert launch.returncode == status, err
        assert "Interrupted: every peer was stopped." in err and "Traceback" not in err
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in peers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in peers if alive(pid)]
    assert os.path.isdir(work)  # a --workdir is the user's: kept


def test_a_failed_launch_keeps_the_temporary_directory_its_error_names(monkeypatch):
    from crc.core.errors import CRCError

    seen = {}

    def no_peer_finished(config, directory, **kwargs):
        seen["directory"] = Path(directory)
        (Path(directory) / "node-0.log").write_text("peer 0 crashed\n")
        raise CRCError(f"no peer finished; see the logs in {directory}")

    monkeypatch.setattr("crc.cli.launch.run_launch", no_peer_finished)
    result = run("launch", *SMALL)
    assert result.exit_code == 1 and f"see the logs in {seen['directory']}" in result.output
    assert (seen["directory"] / "node-0.log").exists()
    (seen["directory"] / "node-0.log").unlink()
    seen["directory"].rmdir()


def test_a_graph_too_sparse_for_the_colluders_is_one_line_before_any_peer_starts(tmp_path):
    """It was 'no peer finished; see the logs in ...', each peer's log holding the reason."""
    result = run("launch", *SMALL, "--topology", "chain", "--secure-aggregation", "--colluders", "1",
                 "--workdir", tmp_path / "work")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == ("Error: --colluders 1: a peer with 2 neighbours can never have their sum "
                                              "unmasked, which needs at least 3 (two honest members in every sum); use "
                                              "a denser --topology or fewer --colluders")
    assert not list((tmp_path / "work").glob("node-*.log"))
