"""Real `crc node` processes on 127.0.0.1 for the tests: started as the launcher starts them, watched and always reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from crc.core.data import Dataset
from crc.core.model_file import load_model
from crc.nodes.checkpoint import completed_round
from crc.nodes.deployment import write_deployment
from crc.nodes.keys import write_peer_keys
from crc.nodes.launcher import free_ports, node_command
from crc.nodes.spawner import SINGLE_THREADED, Child, Spawner, supported
from crc.protocol import SimulationConfig
from crc.protocol.repeat import ess_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.tables.datasets import load_bundled
from crc.topologies import Schedule, network_factory

WAIT_S = 60.0
LISTENING = "listening on "
"""What a peer logs once it has bound its socket and is about to send its first statistics."""


_SPAWNERS: list[Spawner] = []
"""The spawner the tests' peers are forked from (at most one), started on first use."""


def shared_spawner() -> Spawner | None:
    """A spawner whose helper has imported what a peer needs, shared by every network of peers the tests start (a fresh
    one if the last one's helper has gone); None where spawners are not supported (peers then start as processes of
    their own). ``close_shared_spawner`` ends it: the test session does, at its end."""
    if not supported():
        return None
    if _SPAWNERS and not (_SPAWNERS[0].alive and _SPAWNERS[0].process.poll() is None):
        close_shared_spawner()
    if not _SPAWNERS:
        _SPAWNERS.append(Spawner(ready_timeout=WAIT_S))
    return _SPAWNERS[0]


def close_shared_spawner() -> None:
    """End the shared spawner's helper, if one was started (it stops any peer still running)."""
    while _SPAWNERS:
        _SPAWNERS.pop().close()


def kill_and_reap(processes) -> None:
    """Kill every one of ``processes`` still running (continued first: it may be paused) and wait for each (a bounded
    wait)."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
        process.wait(timeout=10)


def scenario(tmp_path: Path, *, nodes: int = 4, rounds: int = 10, data: str = "twonorm", local_size: int = 30,
             topology: str = "tree", **model):
    """A deployment directory, its graph and the simulator's final statistics (n, size) for it."""
    config = SimulationConfig.from_settings(data=data, nodes=nodes, local_size=local_size, rounds=rounds, test_size=500,
                                            topology=topology, **model)
    dataset: Dataset = load_bundled(data)
    rep = prepare_repeat(dataset, config, 0)
    write_deployment(dataset, rep.split, tmp_path)
    graph = Schedule(topology, nodes, seed=rep.graph_seed).graph(1)
    engine, _ = make_engine(rep, config, network_factory(topology))
    return config, graph, engine.run(rounds)


class Network:
    """``crc node`` processes for a deployment in ``directory``; use as a context manager (reaps on exit).

    The peers are forked by the tests' shared spawner, as ``crc launch`` starts them (fresh processes where it is not
    supported).
    """

    def __init__(self, directory: Path, graph, config: SimulationConfig, *, timeout: float, plaintext: bool = False,
                 first_round_timeout: float | None = None):
        """``timeout``: the peers' wait per round in seconds, the first round's too unless ``first_round_timeout``
        is given (the tests start, or hold back, every peer themselves: no start-up allowance). The peers encrypt
        with CURVE keys written into ``directory``, or run in plaintext without keys with ``plaintext``."""
        self.directory, self.graph, self.config, self.timeout, self.plaintext = directory, graph, config, timeout, plaintext
        self.first_round_timeout = timeout if first_round_timeout is None else first_round_timeout
        self.addresses = [f"tcp://127.0.0.1:{p}" for p in free_ports(config.nodes)]
        if not plaintext:
            write_peer_keys(directory, self.addresses, [sorted(graph.neighbors(i)) for i in range(config.nodes)],
                            force=True)
        self.processes: dict[int, Child | subprocess.Popen] = {}
        self.spawner = shared_spawner()

    def command(self, index: int) -> list[str]:
        return node_command(index, self.addresses, sorted(self.graph.neighbors(index)), self.config, workdir=self.directory,
                            ess=ess_for(self.config), timeout=self.timeout,
                            first_round_timeout=self.first_round_timeout, log_level="info", plaintext=self.plaintext)

    def model_path(self, index: int) -> Path:
        return self.directory / f"model-{index}.json"

    def log_path(self, index: int) -> Path:
        return self.directory / f"node-{index}.log"

    def start(self, index: int) -> None:
        with open(self.log_path(index), "ab") as log, open(os.devnull, "r+b") as devnull:
            if self.spawner is not None:
                self.processes[index] = self.spawner.start(self.command(index), stdin=devnull, stdout=devnull, stderr=log)
            else:
                self.processes[index] = subprocess.Popen(self.command(index), stdin=devnull, stdout=devnull, stderr=log,
                                                         env={**os.environ, **SINGLE_THREADED})

    def start_all(self, order=None, *, one_by_one: bool = False) -> None:
        """Start the peers in ``order`` (all, by index, by default); ``one_by_one``: each once the one before listens."""
        for index in order if order is not None else range(self.config.nodes):
            self.start(index)
            if one_by_one:
                self.wait_for_log(index, LISTENING)

    def checkpoint_round(self, index: int) -> int:
        return completed_round(self.directory / f"checkpoint-{index}") or 0

    def wait_for_round(self, index: int, round_: int, limit: float = WAIT_S) -> None:
        deadline = time.monotonic() + limit
        while self.checkpoint_round(index) < round_:
            assert time.monotonic() < deadline, f"peer {index} did not reach round {round_} in {limit} s"
            assert self.processes[index].poll() is None, f"peer {index} exited early: {self.log_path(index).read_text()}"
            time.sleep(0.02)

    def wait_for_log(self, index: int, text: str, limit: float = WAIT_S) -> None:
        """Wait until peer ``index``'s log holds ``text``."""
        deadline = time.monotonic() + limit
        while text not in self.log_path(index).read_text():
            assert time.monotonic() < deadline, f"peer {index} did not log {text!r} in {limit} s"
            assert self.processes[index].poll() is None, f"peer {index} exited early: {self.log_path(index).read_text()}"
            time.sleep(0.02)

    def signal(self, index: int, signum: int) -> None:
        self.processes[index].send_signal(signum)

    def wait(self, indices=None, limit: float = WAIT_S) -> dict[int, int]:
        """Exit codes of the given peers (all by default), waiting at most ``limit`` seconds in all."""
        deadline = time.monotonic() + limit
        codes = {}
        for index in indices if indices is not None else list(self.processes):
            codes[index] = self.processes[index].wait(timeout=max(0.1, deadline - time.monotonic()))
        return codes

    def stats(self, indices=None) -> np.ndarray:
        return np.array([load_model(self.model_path(i)).stats for i in (indices if indices is not None else range(self.config.nodes))])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        kill_and_reap(self.processes.values())
