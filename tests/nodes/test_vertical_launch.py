"""A vertical group of real `crc node --partition vertical:K` processes on 127.0.0.1: equal to the simulator through the
launcher; a dead member stops the group with exit status 3, a restarted one resumes. Every wait bounded, every process
reaped. The group's logic itself is tested in-process in test_vertical_peers.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from crc.core.model_file import load_model
from crc.core.models.circuit import EM_ITERATIONS
from crc.nodes.checkpoint import completed_round
from crc.nodes.deployment import write_vertical_deployment
from crc.nodes.group_settings import group_graph, neighbourhoods, write_group_keys
from crc.nodes.launcher import free_ports
from crc.nodes.spawner import SINGLE_THREADED
from crc.nodes.vertical_launcher import launch_groups, vertical_node_command
from crc.protocol import SimulationConfig
from crc.protocol.simulator import simulate
from crc.tables.datasets import load_dataset
from crc.topologies import network_factory
from support.network import kill_and_reap, shared_spawner
from support.vertical import hybrid_reference, reference

WAIT_S = 60.0
ROUNDS = 8


def assert_same_statistics(actual, desired):
    np.testing.assert_allclose(actual, desired, rtol=1e-9, atol=1e-9 * np.abs(desired).max())


@pytest.mark.parametrize("model", ["nb", "pc"])
def test_launch_of_a_vertical_group_equals_simulate(tmp_path, model):
    """The mixture of block products (pc) runs its EM passes first, counted with the set-up."""
    config = SimulationConfig.from_settings(data="wdbc", model=model, partition="vertical:3", rounds=ROUNDS,
                                            rc_converged=False)
    results = launch_groups(config, tmp_path, log_level="info")
    expected = simulate(config, network_factory(config.topology))
    ref = reference("wdbc", model, 3, rounds=ROUNDS)
    em = EM_ITERATIONS if model == "pc" else 0
    joined = ref.model.join([load_model(tmp_path / f"model-{b}.json").stats for b in range(3)])
    assert_same_statistics(joined, ref.best)
    chosen = load_model(tmp_path / "model-0.json").metrics["best_iterate"]  # counted in rounds, EM passes apart
    assert 0 <= chosen <= ROUNDS and not list(tmp_path.glob("neighbourhoods-*.json"))
    assert (f"done after round {ROUNDS} of {ROUNDS} and the last pass, which only scores: best iterate {chosen},"
            in (tmp_path / "node-1.log").read_text())
    for section in ("crc", "rc", "ml"):
        for key, value in expected[section].items():
            assert results[section][key] == pytest.approx(value, rel=1e-9, abs=1e-12), (section, key)
    assert results["config"]["block_features"] == expected["config"]["block_features"]
    network = results["network"]
    assert network["finished"] == 3 and network["rejected"] == 0 and network["missing"] == 0
    assert network["instances"] == 427 and network["encrypted"]
    assert [entry["rounds_done"] for entry in results["nodes"]] == [ROUNDS] * 3  # rounds, not the group's passes
    holder, *members = network["peers"]
    assert holder["role"] == "label holder" and holder["messages_per_round"] == 2.0  # weights to both members
    assert all(m["role"] == "member" and m["messages_per_round"] == 1.0 for m in members)  # scores to the holder
    assert members[0]["bytes_per_round"] > 8 * 427 * 2  # a row of two scores per instance, and the envelope
    assert network["messages"] == 2 * (1 + 1 + 1 + em + ROUNDS + 1) + 2 * (1 + em + ROUNDS + 1)
    assert load_model(tmp_path / "model-1.json").model.kind == model


def test_launch_with_secure_aggregation_of_the_scores_follows_simulate(tmp_path):
    config = SimulationConfig.from_settings(data="wdbc", model="qda", partition="vertical:3", rounds=ROUNDS,
                                            secure_aggregation=True, rc_converged=False)
    results = launch_groups(config, tmp_path)
    ref = reference("wdbc", "qda", 3, rounds=ROUNDS)
    joined = ref.model.join([load_model(tmp_path / f"model-{b}.json").stats for b in range(3)])
    np.testing.assert_allclose(joined, ref.best, rtol=1e-6, atol=1e-6 * np.abs(ref.best).max())  # the fixed point
    assert all(load_model(tmp_path / f"model-{b}.json").metrics["secure_aggregation"] for b in range(3))
    assert results["secure_aggregation"] == {"scores": "the members' sum", "members": 2}
    assert results["network"]["rejected"] == 0


def test_launch_of_hybrid_groups_equals_simulate(tmp_path):
    """More rounds than the window of early statistics (8): groups run up to a round apart."""
    rounds = 12
    config = SimulationConfig.from_settings(data="wdbc", model="qda", partition="hybrid:3x2", topology="tree",
                                            rounds=rounds, rc_converged=False)
    results = launch_groups(config, tmp_path, log_level="info")
    expected = simulate(config, network_factory(config.topology))
    ref = hybrid_reference("wdbc", "qda", 3, 2, rounds=rounds, topology="tree")
    for g in range(3):
        joined = ref.model.join([load_model(tmp_path / f"model-{2 * g + b}.json").stats for b in range(2)])
        assert_same_statistics(joined, ref.best[g])
    assert "best_iterate" not in load_model(tmp_path / "model-0.json").metrics  # a hybrid group keeps none
    log = (tmp_path / "node-0.log").read_text()
    assert f"done after round {rounds} of {rounds}: the last statistics (a hybrid group keeps no best iterate)" in log
    assert "best iterate" not in log.replace("keeps no best iterate", "")
    for section in ("crc", "rc", "ml"):
        for key, value in expected[section].items():
            assert results[section][key] == pytest.approx(value, rel=1e-9, abs=1e-12), (section, key)
    network = results["network"]
    assert network["finished"] == 6 and network["rejected"] == 0 and network["missing"] == 0
    assert network["instances"] == 427 and results["evaluation"]["nodes"] == 3
    assert [entry["rounds_done"] for entry in results["nodes"]] == [rounds] * 6


class Group:
    """``crc node`` processes of a vertical:3 group on wdbc (or of the groups of ``ref``'s hybrid partition), watched and
    always reaped."""

    def __init__(self, directory, *, rounds: int = ROUNDS, timeout: float = 1.0, first_round_timeout: float = 10.0,
                 ref=None):
        self.ref = ref or reference("wdbc", "nb", 3, rounds=rounds)
        self.directory, self.timeout, self.first_round_timeout = directory, timeout, first_round_timeout
        write_vertical_deployment(load_dataset("wdbc"), self.ref.rep.split, directory, seed=0)
        config = self.ref.config
        self.around = neighbourhoods(config, group_graph(config, self.ref.rep.graph_seed))
        self.addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(len(self.around))]
        write_group_keys(directory, self.addresses, self.around)
        self.processes: dict[int, subprocess.Popen] = {}
        self.spawner = shared_spawner()

    def start(self, peer: int, *extra: str) -> None:
        members, block_peers = self.around[peer]
        command = vertical_node_command(peer, self.addresses, self.ref.config, members=members, block_peers=block_peers,
                                        workdir=self.directory, ess=self.ref.ess, timeout=self.timeout,
                                        first_round_timeout=self.first_round_timeout, log_level="info")
        command = [*command, "--down-after", "2", *extra]
        with open(self.directory / f"node-{peer}.log", "ab") as log, open(os.devnull, "r+b") as devnull:
            if self.spawner is not None:  # forked from a process that imported what a peer needs: a fast start
                self.processes[peer] = self.spawner.start(command, stdin=devnull, stdout=devnull, stderr=log)
            else:
                self.processes[peer] = subprocess.Popen(command, stdin=devnull, stdout=devnull, stderr=log,
                                                        env={**os.environ, **SINGLE_THREADED})

    def log(self, block: int) -> str:
        return (self.directory / f"node-{block}.log").read_text()

    def passes(self, block: int) -> int:
        """The passes peer ``block``'s checkpoint records."""
        return completed_round(self.directory / f"checkpoint-{block}") or 0

    def wait_for_pass(self, block: int, done: int, limit: float = WAIT_S) -> None:
        deadline = time.monotonic() + limit
        while self.passes(block) < done:
            assert time.monotonic() < deadline and self.processes[block].poll() is None, self.log(block)
            time.sleep(0.01)

    def wait_for_log(self, block: int, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while text not in self.log(block):
            assert time.monotonic() < deadline and self.processes[block].poll() is None, self.log(block)
            time.sleep(0.01)

    def wait(self, peers=None) -> dict[int, int]:
        """The exit status of ``peers`` (None: every peer started), each waited for at most ``WAIT_S``."""
        return {peer: self.processes[peer].wait(timeout=WAIT_S) for peer in (peers or sorted(self.processes))}

    def assert_equals_the_simulator(self) -> None:
        """Every group's join of its peers' block statistics is the simulator's."""
        blocks = len(self.ref.model.parts)
        for g, best in enumerate(np.atleast_2d(self.ref.best)):
            models = [load_model(self.directory / f"model-{g * blocks + b}.json").stats for b in range(blocks)]
            assert_same_statistics(self.ref.model.join(models), best)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        kill_and_reap(self.processes.values())


def test_a_killed_member_restarted_resumes_and_the_group_equals_the_simulator(tmp_path):
    with Group(tmp_path, rounds=200, timeout=2.0) as group:
        for block in range(3):
            group.start(block)
        group.wait_for_pass(2, 3)
        group.processes[2].send_signal(signal.SIGKILL)
        group.processes[2].wait(timeout=10)
        group.start(2)
        assert group.wait() == {0: 0, 1: 0, 2: 0}, group.log(2)
        assert "resumed from checkpoint" in group.log(2)
        group.assert_equals_the_simulator()


@pytest.mark.parametrize("partition, peer", [("vertical", 0), ("vertical", 2), ("hybrid", 0), ("hybrid", 1)],
                         ids=["vertical-label-holder", "vertical-member", "hybrid-label-holder", "hybrid-member"])
def test_a_restarted_peer_gets_again_what_its_group_and_block_neighbours_sent_its_dead_process(tmp_path, partition,
                                                                                               peer):
    """A peer paused (what the others send it piles up unread in its sockets), then killed and restarted from its
    checkpoint: what its group (and in a hybrid partition its block neighbours) had sent it died with it. Its first two
    passes after the restart (a block neighbour's lost statistics may be of either) take far less than the --timeout
    (20 s) that the others would otherwise wait before they send again, and every group still ends with the
    simulator's statistics: no wait ran out."""
    timeout, rounds = 20.0, 60
    ref = hybrid_reference("wdbc", "nb", 2, 2, rounds=rounds, topology="ring") if partition == "hybrid" else None
    with Group(tmp_path, rounds=rounds, timeout=timeout, ref=ref) as group:
        for each in range(len(group.around)):
            group.start(each)
        group.wait_for_pass(peer, 3)
        group.processes[peer].send_signal(signal.SIGSTOP)
        time.sleep(0.5)  # the others send it what they can, then wait for it
        group.processes[peer].send_signal(signal.SIGKILL)
        group.processes[peer].wait(timeout=10)
        resumed_after = group.passes(peer)
        group.start(peer)
        group.wait_for_log(peer, "resumed from checkpoint")
        started = time.monotonic()
        group.wait_for_pass(peer, resumed_after + 2, limit=timeout)
        first_passes_s = time.monotonic() - started
        assert set(group.wait().values()) == {0}, group.log(peer)
    assert first_passes_s < timeout / 2, first_passes_s
    assert not any("within" in group.log(each) for each in range(len(group.around))), group.log(peer)
    group.assert_equals_the_simulator()


def test_a_stopped_member_stops_the_group_with_exit_status_3(tmp_path):
    with Group(tmp_path, rounds=1000, timeout=1.0, first_round_timeout=3.0) as group:
        for block in range(3):
            group.start(block)
        group.wait_for_pass(1, 2)
        group.processes[1].send_signal(signal.SIGTERM)
        began = time.monotonic()
        assert group.wait((1,)) == {1: 128 + signal.SIGTERM}  # stopped, after its checkpoint
        assert completed_round(tmp_path / "checkpoint-1") >= 2
        codes = group.wait((0, 2))
        assert codes == {0: 3, 2: 3}
        assert time.monotonic() - began < 3.0 + 2 * 1.0 + 3.0  # the start-up allowance at most, then two waits of 1 s
        assert group.addresses[1] in group.log(0) and "the group stops" in group.log(0)
        assert not (tmp_path / "model-0.json").exists()
