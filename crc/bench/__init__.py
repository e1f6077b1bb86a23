"""Benchmarks of the CRC engine (against a per-node loop, at scale) and of real peers, as JSON-ready dicts.

Layer: on top, beside ``crc.cli`` (which calls it for ``crc bench``); it may use
every package but the command line, and nothing imports it but ``crc.cli``.
"""

from __future__ import annotations

import resource
import tempfile
import time
import tracemalloc

import numpy as np

from crc.bench.per_node_loop import per_node_crc
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.nodes.launcher import launch
from crc.protocol import SimulationConfig, simulate
from crc.protocol.repeat import load_for, make_split
from crc.topologies import averaging_matrix, network_factory, random_tree_graph


def _prepared(config: SimulationConfig):
    dataset = load_for(config)
    split = make_split(dataset, config, np.random.SeedSequence(config.seed))
    graph = random_tree_graph(config.nodes, seed=config.seed)
    return split, graph, default_ess(config.train_size, config.nodes, config.lr)


REPEATS = 3


def _best_of(repeats: int, run):
    """Shortest wall time of ``repeats`` calls of ``run`` and the last result."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def engine_versus_loop(config: SimulationConfig) -> dict:
    """Node-rounds per second of the engine and of the per-node loop on the same run."""
    split, graph, ess = _prepared(config)
    local = LocalData.from_parts(split.phi_train, split.y_train, split.parts)
    node_rounds = config.nodes * config.rounds

    mixing = averaging_matrix(graph)
    engine_seconds, fast = _best_of(REPEATS, lambda: CRCEngine(split.model, local, mixing, ess=ess,
                                                                iterations=config.iters).run(config.rounds))
    local_phi = [split.phi_train[p] for p in split.parts]
    local_y = [split.y_train[p] for p in split.parts]
    neighbours = [list(graph.neighbors(v)) for v in range(config.nodes)]
    loop_seconds, slow = _best_of(REPEATS, lambda: per_node_crc(split.model, local_phi, local_y, neighbours, ess=ess,
                                                                rounds=config.rounds, iterations=config.iters))
    return {
        "timing": f"best of {REPEATS} runs each, same process",
        "data": config.data, "model": config.model, "nodes": config.nodes, "local_size": config.local_size, "rounds": config.rounds,
        "engine_seconds": engine_seconds, "loop_seconds": loop_seconds,
        "engine_node_rounds_per_s": node_rounds / engine_seconds,
        "loop_node_rounds_per_s": node_rounds / loop_seconds,
        "ratio": loop_seconds / engine_seconds,
        "max_relative_difference": float(np.max(np.abs(fast - slow)) / np.max(np.abs(slow))),
    }


def scale_run(config: SimulationConfig) -> dict:
    """Wall time and peak traced memory of the CRC rounds alone on a large network."""
    split, graph, ess = _prepared(config)
    local = LocalData.from_parts(split.phi_train, split.y_train, split.parts)
    mixing = averaging_matrix(graph)
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    CRCEngine(split.model, local, mixing, ess=ess, iterations=config.iters).run(config.rounds)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "data": config.data, "model": config.model, "nodes": config.nodes, "local_size": config.local_size, "rounds": config.rounds,
        "seconds": seconds, "node_rounds_per_s": config.nodes * config.rounds / seconds,
        "peak_traced_bytes_rounds": peak,
        "max_rss_bytes_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "local_data_bytes": int(local.phi.nbytes + local.y.nbytes + local.mask.nbytes),
    }


def peers_run(config: SimulationConfig) -> dict:
    """Real peers on loopback (``crc launch``) against the simulator on the same run."""
    with tempfile.TemporaryDirectory(prefix="crc-bench-") as workdir:
        results = launch(config, workdir)
    start = time.perf_counter()
    simulated = simulate(config, network_factory(config.topology))
    simulate_seconds = time.perf_counter() - start
    net = results["network"]
    return {
        "data": config.data, "model": config.model, "nodes": config.nodes, "topology": config.topology,
        "local_size": config.local_size, "rounds": config.rounds,
        "launch_wall_seconds": net["wall_s"], "simulate_wall_seconds": simulate_seconds,
        "round_ms_p50": net["round_ms_p50"], "round_ms_p99": net["round_ms_p99"],
        "round_ms_p99_after_first": net["round_ms_p99_after_first"], "rounds_seconds": net["rounds_seconds"],
        "messages": net["messages"], "messages_per_s": net["messages"] / net["rounds_seconds"],
        "bytes_per_message": net["bytes_per_message"], "payload_bytes": net["payload_bytes"],
        "overhead_bytes_per_message": net["bytes_per_message"] - net["payload_bytes"],
        "same_test_error_as_simulate": abs(results["crc"]["test_error"] - simulated["crc"]["test_error"]) < 1e-12,
    }
