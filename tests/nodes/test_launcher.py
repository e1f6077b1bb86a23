"""How the launcher starts and reaps its peers: forked by one pre-imported spawner, still one process per peer with
its own signals and exit status, reaped even when the spawner is gone. Every wait is bounded; every process reaped."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from crc.nodes import launcher
from crc.nodes.checkpoint import completed_round
from crc.nodes.launcher import free_ports, launch, node_command
from crc.nodes.spawner import SINGLE_THREADED, Spawner, supported
from crc.protocol import SimulationConfig
from crc.protocol.repeat import ess_for
from support.network import scenario

pytestmark = pytest.mark.skipif(not supported(), reason="the spawner needs fork, pidfds (Linux 5.3+) and descriptor passing")

WAIT_S = 30.0


def parent_of(pid: int) -> int:
    """The parent pid of a live (or not yet reaped) process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def environment_of(pid: int) -> dict[str, str]:
    """The environment a process was started with."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in entries if entry)


def wait_for(condition, what: str, limit: float = WAIT_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {limit} s"
        time.sleep(0.02)


def test_launch_forks_every_peer_from_one_single_threaded_spawner(tmp_path, monkeypatch):
    started = []

    class Recording(Spawner):
        def start(self, argv, **streams):
            child = super().start(argv, **streams)
            started.append((self, argv, child.pid, parent_of(child.pid)))  # the child cannot have been reaped yet
            return child

    monkeypatch.setattr(launcher, "Spawner", Recording)
    config = SimulationConfig(data="twonorm", nodes=4, local_size=30, rounds=6, test_size=500)
    began = time.time()
    results = launch(config, tmp_path)
    assert results["network"]["finished"] == 4 and results["nodes"][0]["exit_code"] == 0
    spawners = {id(spawner): spawner for spawner, *_ in started}
    assert len(spawners) == 1 and len(started) == 4  # one spawner per launch, one child per peer
    spawner = next(iter(spawners.values()))
    assert all(parent == spawner.pid != os.getpid() for *_, parent in started)
    assert len({pid for _, _, pid, _ in started}) == 4
    # Each child runs the peer's command line, the one node_command gives (a `python -I -m crc node ...` process).
    assert all(argv[:5] == [sys.executable, "-I", "-m", "crc", "node"] for _, argv, _, _ in started)
    # ... and all are told the same start time, within the launch (so that their rounds begin together).
    starts = {float(argv[argv.index("--start-at") + 1]) for _, argv, _, _ in started}
    assert len(starts) == 1 and began < starts.pop() < time.time()
    assert spawner.threads == 1  # no BLAS thread pool, no ZeroMQ context when it forks
    assert spawner.process.returncode == 0  # closed by the launcher
    for index in range(4):
        assert (tmp_path / f"model-{index}.json").exists()


def _peer_waiting_in_round_1(tmp_path, spawner: Spawner, *, index: int = 0, nodes: int = 2, log_level: str = "info"):
    """Peer ``index`` of a fresh deployment whose neighbours never start: it waits in its first round."""
    config, graph, _ = scenario(tmp_path, nodes=nodes, rounds=50)
    addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(nodes)]
    command = node_command(index, addresses, sorted(graph.neighbors(index)), config, workdir=tmp_path, ess=ess_for(config),
                           timeout=WAIT_S, first_round_timeout=WAIT_S, log_level=log_level, plaintext=True)
    log_path = tmp_path / f"node-{index}.log"
    with open(log_path, "ab") as log, open(os.devnull, "r+b") as devnull:
        child = spawner.start(command, stdin=devnull, stdout=devnull, stderr=log)
    wait_for(lambda: "listening on" in log_path.read_text() or child.poll() is not None, "the peer listening")
    assert child.poll() is None, log_path.read_text()
    return child, log_path


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_spawned_peer_stops_on_a_signal_with_its_checkpoint_and_exit_status(tmp_path, signum):
    with Spawner() as spawner:
        child, log_path = _peer_waiting_in_round_1(tmp_path, spawner)
        assert parent_of(child.pid) == spawner.pid
        assert all(environment_of(spawner.pid).get(name) == value for name, value in SINGLE_THREADED.items())
        child.send_signal(signum)
        assert child.wait(timeout=10) == 128 + signum  # 143 after SIGTERM, 130 after SIGINT (the spawner ignores it)
        assert completed_round(tmp_path / "checkpoint-0") == 0
        assert "stopped at round 0" in log_path.read_text()


def test_peers_are_reaped_with_sigterm_then_sigkill_when_the_spawner_is_gone(tmp_path):
    spawner = Spawner()
    children = []
    try:
        polite, _ = _peer_waiting_in_round_1(tmp_path / "a", spawner)
        stuck, _ = _peer_waiting_in_round_1(tmp_path / "b", spawner)
        children = [polite, stuck]
        stuck.send_signal(signal.SIGSTOP)  # it will not act on SIGTERM: only SIGKILL ends it
        spawner.process.kill()
        spawner.process.wait(timeout=10)
        spawner.pump(0.5)
        assert not spawner.alive and not polite.exited and not stuck.exited  # the peers outlive their parent
        begun = time.monotonic()
        launcher.reap(children)
        assert polite.exited and stuck.exited
        assert time.monotonic() - begun < launcher.REAP_GRACE_S + 5
        assert polite.returncode is None and stuck.returncode is None  # their exit codes died with the spawner
        assert completed_round(tmp_path / "a" / "checkpoint-0") == 0  # the SIGTERM reached the polite one
    finally:
        launcher.reap(children)
        spawner.close()


def test_leaving_the_peer_processes_on_an_error_reaps_every_peer_and_closes_the_spawner(tmp_path):
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    begun = time.monotonic()
    with (pytest.raises(RuntimeError, match="the launch failed"), open(tmp_path / "log", "wb") as log,
          launcher.PeerProcesses(ready_timeout=WAIT_S) as peers):
        assert peers.wait_ready()
        children = [peers.start(sleeper, log) for _ in range(2)]
        peers.pause(0.1)
        assert peers.started == children and not any(child.exited for child in children)
        raise RuntimeError("the launch failed")
    assert all(child.exited for child in children) and not peers.spawner.alive
    assert peers.spawner.process.returncode == 0
    assert time.monotonic() - begun < launcher.REAP_GRACE_S + 5


def test_the_spawner_stops_its_peers_when_the_launcher_lets_go(tmp_path):
    spawner = Spawner()
    try:
        child, log_path = _peer_waiting_in_round_1(tmp_path, spawner)
    finally:
        spawner.close()  # without reaping: the spawner stops its children itself
    assert spawner.process.returncode == 0
    assert "stopped at round 0" in log_path.read_text()
    assert completed_round(tmp_path / "checkpoint-0") == 0


def test_a_spawned_command_exits_as_it_would_in_a_fresh_interpreter(tmp_path):
    log_path = tmp_path / "out.log"
    with Spawner() as spawner, open(log_path, "ab") as log, open(os.devnull, "r+b") as devnull:
        # The crc command line, in the pre-imported spawner: a usage error is one line and exit status 1 or 2.
        missing = spawner.start([sys.executable, "-I", "-m", "crc", "node", "--bind", "tcp://127.0.0.1:1", "--data",
                                 str(tmp_path / "absent.csv"), "--schema", str(tmp_path / "absent.json"), "--out",
                                 str(tmp_path / "model.json")], stdin=devnull, stdout=devnull, stderr=log)
        assert missing.wait(timeout=WAIT_S) in (1, 2)
        # Anything else is executed as it is.
        other = spawner.start(["/bin/sh", "-c", "echo elsewhere >&2; exit 7"], stdin=devnull, stdout=devnull, stderr=log)
        assert other.wait(timeout=WAIT_S) == 7
    text = log_path.read_text()
    assert "Error" in text and "Traceback" not in text and "elsewhere" in text
