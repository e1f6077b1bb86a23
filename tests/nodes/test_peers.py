"""Real peer processes and sockets on 127.0.0.1: every wait bounded, every process reaped.

Only what takes real processes is here (kills, pauses, start order, signals and exit codes, equality with
the simulator through the launcher); the round logic itself is tested in-process in test_round_logic.py.
"""

import contextlib
import signal
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from crc.core.acceleration import MOMENTUM_PRESET
from crc.core.model_file import load_model
from crc.core.models import make_model
from crc.core.schema import Schema
from crc.nodes.launcher import launch
from crc.nodes.settings import PeerSettings
from crc.nodes.wire import encode
from crc.protocol import SimulationConfig
from crc.protocol.repeat import ess_for
from crc.tables.reader import read_csv
from support.liveness import kill_run
from support.network import LISTENING, Network, scenario


def neighbour_of(graph, index):
    return sorted(graph.neighbors(index))[0]


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    """``launched(config)``: the results of real peers launched with ``config`` and their directory, launched once
    for this module (the tests only read them; two tests here launch the default configuration)."""
    done = []

    def launched(config: SimulationConfig) -> tuple[dict, Path]:
        for known, found in done:
            if known == config:
                return found
        directory = tmp_path_factory.mktemp("run")
        done.append((config, (launch(config, directory), directory)))
        return done[-1][1]

    return launched


@pytest.mark.parametrize("algorithm", [None, "paper"], ids=["default", "paper"])
def test_launch_equals_simulate_and_predict_matches_its_evaluation(tmp_path, algorithm, launches):
    config = SimulationConfig(data="twonorm", nodes=5, local_size=30, rounds=10, test_size=500, algorithm=algorithm,
                              rc_converged=False)
    assert config.algorithm == (algorithm or "accelerated")
    results, run = launches(config)  # the peers' default timeouts
    assert results["config"]["algorithm"] == config.algorithm
    _, _, expected = scenario(tmp_path / "sim", nodes=5, rounds=10, algorithm=algorithm)
    stats = np.array([load_model(run / f"model-{i}.json").stats for i in range(5)])
    np.testing.assert_allclose(stats, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert results["network"]["finished"] == 5 and results["network"]["rejected"] == 0
    assert results["network"]["messages"] == 2 * 4 * (10 - 1) + 2 * 4  # tree: 4 edges, both ways, rounds 0..8 sent
    test = read_csv(run / "test.csv")
    errors = [np.mean(load_model(run / f"model-{i}.json").predict(test) != np.array(test["class"].cells())) for i in range(5)]
    assert np.mean(errors) == pytest.approx(results["crc"]["test_error"], abs=1e-12)


@pytest.mark.parametrize("settings", [
    {"algorithm": "accelerated"},
    {"start": "local", "loss": 0.3},
    {**MOMENTUM_PRESET, "loss": 0.3},
    {"data": "chess", "loss": 0.3},  # naive Bayes' categorical start: a lost message is replaced by the last heard
])
def test_accelerated_launch_with_injected_loss_equals_simulate(tmp_path, settings, launches):
    config = SimulationConfig.from_settings(**{"data": "twonorm", **settings}, nodes=5, local_size=30, rounds=10,
                                            test_size=500, rc_converged=False)
    assert config.exact_diffusion == ("momentum" not in settings) and config.acceleration.keeps_memory
    results, run = launches(config)
    _, _, expected = scenario(tmp_path / "sim", nodes=5, rounds=10, **settings)
    _, _, paper = scenario(tmp_path / "paper", nodes=5, rounds=10, data=config.data, algorithm="paper")
    stats = np.array([load_model(run / f"model-{i}.json").stats for i in range(5)])
    np.testing.assert_allclose(stats, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert np.max(np.abs(expected - paper)) > 1e-3 * np.abs(paper).max()  # the setting changed the run
    assert results["network"]["messages"] == 2 * 4 * (10 - 1) + 2 * 4  # no extra message
    assert (results["network"]["missing"] > 0) == (settings.get("loss", 0) > 0)


def test_launch_releasing_every_third_round_equals_simulate(tmp_path):
    """``--release-every 3`` with momentum: real peers average only in the rounds between their local steps, their
    memory kept across them, as the simulator does (no noise: the contract is bit-for-bit up to 1e-9)."""
    settings = {"algorithm": "paper", "momentum": 0.5, "classifier": "aggregate", "release_every": 3}
    config = SimulationConfig.from_settings(data="twonorm", nodes=5, local_size=30, rounds=10, test_size=500,
                                            rc_converged=False, **settings)
    results = launch(config, tmp_path / "run")
    _, _, expected = scenario(tmp_path / "sim", nodes=5, rounds=10, **settings)
    _, _, every_round = scenario(tmp_path / "every", nodes=5, rounds=10, **{**settings, "release_every": 1})
    stats = np.array([load_model(tmp_path / "run" / f"model-{i}.json").stats for i in range(5)])
    np.testing.assert_allclose(stats, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert np.max(np.abs(expected - every_round)) > 1e-3 * np.abs(every_round).max()
    assert results["config"]["release_every"] == 3 and results["network"]["messages"] == 2 * 4 * (10 - 1) + 2 * 4


def hub_and_leaf(graph):
    """The best-connected peer and a leaf. Holding the leaf back paces every round at the timeout,
    so the tests can act at a chosen round however fast rounds are."""
    hub = max(graph, key=graph.degree)
    return hub, next(v for v in graph if graph.degree(v) == 1 and v != hub)


@pytest.mark.parametrize("structure", [
    {"structure": "mixture", "components": 3, "structure_seed": 4},
    {"structure": "region-graph", "depth": 2, "repetitions": 2, "sums": 2, "structure_seed": 4},
])
def test_circuit_peers_equal_the_simulator(tmp_path, structure):
    config = SimulationConfig(data="mushroom", model="pc", model_options=structure, nodes=4, local_size=40, rounds=6, test_size=500)
    launch(config, tmp_path / "run")
    _, _, expected = scenario(tmp_path / "sim", nodes=4, rounds=6, data="mushroom", local_size=40, model="pc", **structure)
    stats = np.array([load_model(tmp_path / "run" / f"model-{i}.json").stats for i in range(4)])
    np.testing.assert_allclose(stats, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert load_model(tmp_path / "run" / "model-0.json").model.options == config.model_options


def kill_at_round(net: Network, victim: int, late: int, round_: int) -> int:
    """Start every peer but ``late``, SIGKILL ``victim`` once it has done ``round_`` rounds; its last checkpointed round."""
    net.start_all(order=[i for i in range(net.config.nodes) if i != late])
    net.wait_for_round(victim, round_)
    net.signal(victim, signal.SIGKILL)
    net.processes[victim].wait(timeout=10)
    return net.checkpoint_round(victim)


def test_a_killed_peer_does_not_stop_the_others(tmp_path):
    config, graph, _ = scenario(tmp_path, nodes=4, rounds=10)
    victim, late = hub_and_leaf(graph)
    with Network(tmp_path, graph, config, timeout=0.5) as net:
        # round 2: the held-back leaf still paces the victim (after --down-after missed rounds it would race ahead
        # and might finish before the kill lands)
        killed_at = kill_at_round(net, victim, late, 2)
        net.start(late)
        others = [i for i in range(4) if i != victim]
        codes = net.wait(others)
        # a leaf whose only neighbour is the victim never hears from anyone: exit 3, model file still written
        alone = set(graph.neighbors(late)) == {victim}
        assert codes == {i: 3 if (i == late and alone) else 0 for i in others}
        test = read_csv(tmp_path / "test.csv")
        for i in others:
            model = load_model(net.model_path(i))
            assert model.metrics["rounds_done"] == 10
            assert np.mean(model.predict(test) == np.array(test["class"].cells())) > 0.8
        for i in graph.neighbors(victim):
            missing = load_model(net.model_path(i)).metrics["missing"][net.addresses[victim]]
            if i == late:  # started after the kill: it never heard from the victim
                assert missing == 10
            else:  # every round after the kill lacks the victim (the last one or two it sent may still count)
                assert missing >= 10 - killed_at - 2
            assert "no statistics from " + net.addresses[victim] in net.log_path(i).read_text()


def test_a_peer_killed_mid_run_costs_the_survivors_k_timeouts_and_costs_nothing_between_them(tmp_path):
    """kill -9 of the middle of a chain of 5 at round 5 of 20 (1 s timeout): the survivors' rounds take at most
    --down-after timeouts (+ 2 s) longer than a clean run's, no living peer is ever marked down, nothing between them
    is lost."""
    timeout, rounds, k = 1.0, 20, PeerSettings.down_after
    clean = kill_run(tmp_path / "clean", topology="chain", rounds=rounds, kill_at=None, timeout=timeout)
    killed = kill_run(tmp_path / "killed", topology="chain", rounds=rounds, kill_at=5, timeout=timeout)
    victim = killed["victim"]
    assert victim == 2 and 5 <= killed["killed_at"] <= rounds - 2 * k, killed["killed_at"]
    assert set(clean["codes"].values()) == set(killed["codes"].values()) == {0}
    assert killed["rounds_s"] <= clean["rounds_s"] + k * timeout + 2.0, (killed["rounds_s"], clean["rounds_s"])
    for i, metrics in killed["metrics"].items():
        assert metrics["rounds_done"] == rounds and sum(metrics["rejected"].values()) == 0, (i, metrics["rejected"])
        for u in metrics["missing"]:
            if u == victim:  # its neighbours go on without it: marked down after k silent rounds
                # killed_at is its last checkpoint; a peer sends a round's statistics before it checkpoints the round,
                # so its neighbours may have had round killed_at + 1's too
                assert metrics["down_rounds"][u] >= rounds - (killed["killed_at"] + 1) - k - 1
            else:
                assert (metrics["missing"][u], metrics["down_rounds"][u], metrics["downtime_s"][u]) == (0, 0, 0.0), (i, u)


def test_a_killed_peer_restarted_from_its_checkpoint_rejoins_and_finishes(tmp_path):
    config, graph, _ = scenario(tmp_path, nodes=4, rounds=10)
    victim, late = hub_and_leaf(graph)
    with Network(tmp_path, graph, config, timeout=2.0) as net:
        killed_at = kill_at_round(net, victim, late, 2)
        net.start(victim)
        net.start(late)
        codes = net.wait()
        assert codes == {i: 0 for i in range(4)}
        log = net.log_path(victim).read_text()
        assert f"resumed from checkpoint at round {killed_at}" in log
        model = load_model(net.model_path(victim))
        assert model.metrics["rounds_done"] == 10 and len(model.metrics["soft_loss"]) == 10
        # It rejoined: after the restart it heard from its neighbours again (their rounds buffered within its window).
        # They had marked it down and gone on without waiting, so its own frames reach them late (stale).
        assert sum(model.metrics["missing"].values()) < graph.degree(victim) * (10 - killed_at), model.metrics["missing"]


@pytest.mark.parametrize("privacy", [{}, {"secure_aggregation": True}], ids=["plain", "secure-aggregation"])
def test_a_restarted_peer_gets_again_what_its_neighbours_sent_its_dead_process(tmp_path, privacy):
    """A peer paused (its neighbours' statistics of its round pile up unread in its sockets), then killed and restarted
    from its checkpoint: those statistics died with it. It tells its neighbours the round it resumed at and they send
    them again, so its first round after the restart takes far less than its --timeout (20 s) instead of all of it.
    Under secure aggregation they send the same masked words again, and take the notice as its decline of their
    unmasking of that round (their requests died with it too)."""
    timeout = 20.0
    config, graph, _ = scenario(tmp_path, nodes=3, rounds=60, topology="ring", **privacy)
    victim, others = 0, [1, 2]
    with Network(tmp_path, graph, config, timeout=timeout) as net:
        net.start_all()
        net.wait_for_round(victim, 3)
        net.signal(victim, signal.SIGSTOP)
        time.sleep(0.5)  # the neighbours send it what they can, then wait for it
        net.signal(victim, signal.SIGKILL)
        net.processes[victim].wait(timeout=10)
        resumed_at = net.checkpoint_round(victim)
        net.start(victim)
        net.wait_for_log(victim, f"resumed from checkpoint at round {resumed_at}")
        started = time.monotonic()
        net.wait_for_round(victim, resumed_at + 1, limit=timeout / 2)
        first_round_s = time.monotonic() - started
        assert net.wait() == {i: 0 for i in range(3)}
    metrics = {i: load_model(net.model_path(i)).metrics for i in range(3)}
    assert first_round_s < timeout / 2, first_round_s
    assert sum(metrics[i]["frames_resent"] for i in others) >= 1 and metrics[victim]["frames_resent"] == 0
    assert metrics[victim]["rejected"]["duplicate"] == 0, metrics[victim]["rejected"]
    assert "resumed at round" in net.log_path(others[0]).read_text()


def test_a_paused_peer_does_not_hang_the_others(tmp_path):
    config, graph, _ = scenario(tmp_path, nodes=4, rounds=12)
    paused, late = hub_and_leaf(graph)
    with Network(tmp_path, graph, config, timeout=0.5) as net:
        net.start_all(order=[i for i in range(4) if i != late])
        net.wait_for_round(paused, 2)
        net.signal(paused, signal.SIGSTOP)
        others = [i for i in range(4) if i not in (paused, late)]
        before = {i: net.checkpoint_round(i) for i in others}
        deadline = time.monotonic() + 3.0
        # the others stalled behind a paused peer if one of them does not do 3 rounds in 3 s; 3, not 2: the paused
        # peer may have sent its statistics of the first of them before it stopped (it can be a round ahead of a
        # neighbour), and the check below wants 2 rounds without them
        for i in others:
            net.wait_for_round(i, before[i] + 3, limit=deadline - time.monotonic())
        net.signal(paused, signal.SIGCONT)
        net.start(late)
        assert net.wait(limit=40) == {i: 0 for i in range(4)}
        for i in set(graph.neighbors(paused)) - {late}:
            assert load_model(net.model_path(i)).metrics["missing"][net.addresses[paused]] >= 2


def test_start_order_does_not_matter(tmp_path):
    config, graph, expected = scenario(tmp_path, nodes=4, rounds=6)
    with Network(tmp_path, graph, config, timeout=20.0) as net:
        net.start_all(order=[3, 2, 1, 0], one_by_one=True)  # each already waiting for the others when the next starts
        assert net.wait() == {i: 0 for i in range(4)}
        np.testing.assert_allclose(net.stats(), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_sigterm_stops_a_peer_quickly_with_its_checkpoint(tmp_path):
    config, graph, _ = scenario(tmp_path, nodes=2, rounds=50)
    with Network(tmp_path, graph, config, timeout=30.0) as net:
        net.start(0)  # its neighbour never starts: it waits in round 1
        net.wait_for_log(0, LISTENING)
        started = time.monotonic()
        net.signal(0, signal.SIGTERM)
        assert net.wait([0], limit=5) == {0: 128 + signal.SIGTERM}
        assert time.monotonic() - started < 1.0
        assert (tmp_path / "checkpoint-0" / "checkpoint.0.bin").exists()


def test_hostile_frames_over_a_real_socket_are_rejected_and_harmless(tmp_path):
    """Frames queued before the peer binds and sent while it runs reach its decoder through ZeroMQ and are
    all rejected (the causes themselves: test_round_logic.py); the peer still equals the simulator. The peers run
    --insecure, so that the frames reach the decoder (with keys they never do: test_curve.py)."""
    config, graph, expected = scenario(tmp_path, nodes=3, rounds=8)
    target, other = [v for v in graph if graph.degree(v) == 1]  # the ends of the 3-node path
    friend = neighbour_of(graph, target)
    with Network(tmp_path, graph, config, timeout=20.0, plaintext=True) as net:
        schema_id, size = _schema_id_and_size(tmp_path, config)
        good = dict(run="crc", sender=net.addresses[friend], round_=0, schema_id=schema_id, ess=ess_for(config))
        hostile = [
            b"random bytes \x00\xff",
            b"\xc6\xff\xff\xff\xf0" + b"x" * 32,                             # bin 32 claiming ~4 GB
            encode(**{**good, "ess": good["ess"] * 2}, stats=np.zeros(size)),
            encode(**{**good, "sender": "tcp://127.0.0.1:1"}, stats=np.zeros(size)),
            msgpack.packb({"v": 1}),
        ]
        oversized = b"\x00" * (16 * size + 4096)  # ZeroMQ drops it (MAXMSGSIZE) and its connection: sent on its own
        context = zmq.Context()
        attacker = context.socket(zmq.PUSH)
        attacker.setsockopt(zmq.LINGER, 0)
        attacker.connect(net.addresses[target])
        big = context.socket(zmq.PUSH)
        big.setsockopt(zmq.LINGER, 0)
        big.connect(net.addresses[target])
        try:
            for frame in hostile:  # queued by ZeroMQ until the target binds
                attacker.send(frame)
            big.send(oversized)
            net.start(target)
            net.start(friend)
            # The friend waits for the peer not yet started, so the target waits in round 2 for the friend.
            net.wait_for_round(target, 1)
            attacker.send(encode(**good, stats=np.full(size, 1e6)))  # statistics without the ESS (and stale)
            for frame in hostile:
                attacker.send(frame)
            with contextlib.suppress(zmq.Again):  # its last connection may be dropped and not yet remade
                big.send(oversized, flags=zmq.NOBLOCK)
            time.sleep(0.5)
            net.start(other)
            assert net.wait() == {i: 0 for i in range(3)}
        finally:
            context.destroy(linger=0)
        rejected = load_model(net.model_path(target)).metrics["rejected"]
        assert sum(rejected.values()) == 2 * len(hostile) + 1 and rejected["stats-ess"] == 1, rejected
        assert rejected["oversized"] == 0, rejected
        np.testing.assert_allclose(net.stats(), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def _schema_id_and_size(directory, config):
    model = make_model(config.model, Schema.load(directory / "schema.json"))
    return model.schema_id, model.size
