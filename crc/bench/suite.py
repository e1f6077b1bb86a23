"""The benchmarks of ``crc bench`` but the network part's (``crc.bench.network``): the CRC engine against a per-node
loop and the machine's matrix-product floor, at scale, the slower models against naive Bayes, and real peers, as
JSON-ready dicts (the package ``crc.bench`` names them, and says how they are timed)."""

from __future__ import annotations

import functools
import resource
import tempfile
import time
import tracemalloc

import numpy as np

from crc.bench import REPEATS, VERTICAL_BLOCKS, VERTICAL_DATASETS
from crc.bench.per_node_loop import per_node_crc
from crc.bench.wire_bytes import wire_bytes
from crc.core import metrics
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.models.base import LinearFamilyModel
from crc.core.threads import blas_threads, single_threaded_blas, threads
from crc.nodes.launcher import launch
from crc.protocol import SimulationConfig, simulate
from crc.protocol.repeat import evaluation_sample, load_for, make_split
from crc.topologies import averaging_matrix, network_factory, random_tree_graph

FLOOR_SIZE = 2000
"""The floor is one (FLOOR_SIZE x FLOOR_SIZE) @ (FLOOR_SIZE x FLOOR_SIZE) float64 product."""


def _prepared(config: SimulationConfig):
    dataset = load_for(config)
    split = make_split(dataset, config, np.random.SeedSequence(config.seed))
    graph = random_tree_graph(config.nodes, seed=config.seed)
    return split, graph, default_ess(config.train_size, config.nodes, config.lr)


def _timed(run):
    """(wall seconds, CPU seconds of every thread of the process, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - wall, time.process_time() - cpu, result


BLAS_PARK_SECONDS = 0.3
"""Pause after a multi-threaded product: OpenBLAS's idle threads spin for a while (about 2^28 cycles) before they
sleep, and on a 2-core machine they would take the core the next timed run needs."""


def _interleaved(repeats: int, runs: dict) -> dict:
    """Best wall and CPU time of each of ``runs`` (name -> callable), called in turn ``repeats`` times, and its last
    result. Each round of calls ends with a pause of BLAS_PARK_SECONDS."""
    best = {name: [float("inf"), float("inf"), None] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            wall, cpu, result = _timed(run)
            entry = best[name]
            entry[0], entry[1], entry[2] = min(entry[0], wall), min(entry[1], cpu), result
        time.sleep(BLAS_PARK_SECONDS)
    return best


def _floor_runs(size: int) -> dict:
    """One large float64 product, single-threaded and with the default BLAS threads (``size``^3 multiply-adds)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((size, size)), rng.standard_normal((size, size))

    def single():
        with single_threaded_blas():
            return a @ b

    return {"floor_1_thread": single, "floor_default_threads": lambda: a @ b}


def run_flop(model, local: LocalData, mixing, rounds: int, iterations: int) -> int | None:
    """FLOP of ``rounds`` engine rounds from the shapes, for a linear-family model (None otherwise).

    Per node, round and LRC step: the scores (r x k)(k x m) and the residual
    (r x m)(m x k) products, 2 r k m FLOP each, on the padded local size m;
    per round, the mixing product 2 nnz(W) size. The element-wise work (theta,
    softmax) is not counted.
    """
    if not isinstance(model, LinearFamilyModel):
        return None
    n, m, k = local.phi.shape
    products = 2 * 2 * n * model.layout.n_classes * k * m
    nnz = mixing.nnz if hasattr(mixing, "nnz") else int(np.count_nonzero(mixing))
    return rounds * (iterations * products + 2 * nnz * model.size)


def _figures(seconds: float, cpu: float, node_rounds: int, flop: int | None) -> dict:
    return {"seconds": seconds, "cpu_seconds": cpu, "node_rounds_per_s": node_rounds / seconds,
            "gflop_per_s": None if flop is None else flop / seconds / 1e9}


def engine_versus_loop(config: SimulationConfig, repeats: int = REPEATS) -> dict:
    """The engine beside the per-node loop and beside the machine's matrix-product floor, all measured in one run."""
    split, graph, ess = _prepared(config)
    local = LocalData.from_parts(split.phi_train, split.y_train, split.parts)
    node_rounds = config.nodes * config.rounds
    mixing = averaging_matrix(graph)
    local_phi = [split.phi_train[p] for p in split.parts]
    local_y = [split.y_train[p] for p in split.parts]
    neighbours = [list(graph.neighbors(v)) for v in range(config.nodes)]
    runs = {  # the floor last, so that BLAS threads park before the next engine run
        "engine": lambda: CRCEngine(split.model, local, mixing, ess=ess, iterations=config.iters).run(config.rounds),
        "loop": lambda: per_node_crc(split.model, local_phi, local_y, neighbours, ess=ess, rounds=config.rounds,
                                     iterations=config.iters),
        **_floor_runs(FLOOR_SIZE),
    }
    best = _interleaved(repeats, runs)
    flop = run_flop(split.model, local, mixing, config.rounds, config.iters)
    floor_flop = 2 * FLOOR_SIZE**3
    floor_1, floor_default = (floor_flop / best[name][0] / 1e9 for name in ("floor_1_thread", "floor_default_threads"))
    engine = _figures(best["engine"][0], best["engine"][1], node_rounds, flop)
    loop = _figures(best["loop"][0], best["loop"][1], node_rounds, flop)
    fast, slow = best["engine"][2], best["loop"][2]
    gflops = engine["gflop_per_s"]
    return {
        "timing": f"best of {repeats}, interleaved in one process (engine, loop, floor on 1 thread, floor on the default "
                  f"threads, a {BLAS_PARK_SECONDS} s pause); the engine's rounds run with BLAS on one thread",
        "data": config.data, "model": config.model, "nodes": config.nodes, "local_size": config.local_size,
        "rounds": config.rounds, "iterations": config.iters,
        "flop_per_run": flop,
        "flop_counted": "per node, round and LRC step 2 r k m for the scores and 2 r k m for the residual product, "
                        "plus 2 nnz(W) size for the mixing; element-wise work not counted",
        "engine": engine,
        "loop": loop,
        "floor": {"product": f"({FLOOR_SIZE} x {FLOOR_SIZE}) @ ({FLOOR_SIZE} x {FLOOR_SIZE}) float64",
                  "gflop_per_s_1_thread": floor_1, "gflop_per_s_default_threads": floor_default,
                  "default_threads": blas_threads()},
        "engine_over_loop": loop["seconds"] / engine["seconds"],
        "engine_fraction_of_floor_1_thread": None if gflops is None else gflops / floor_1,
        "targets": {"engine_at_least_floor_1_thread_over_3": None if gflops is None else gflops >= floor_1 / 3,
                    "engine_at_least_8x_loop": loop["seconds"] >= 8 * engine["seconds"]},
        "max_relative_difference": float(np.max(np.abs(fast - slow)) / np.max(np.abs(slow))),
    }


MODEL_CASES = (
    ("letter", {"model": "pc", "structure": "region-graph"}, 10.0),
    ("optdigits", {"model": "qda"}, 5.0),
)
"""(data set, model settings, target): a repeat of the model should take at most ``target`` times naive Bayes's."""


def models_versus_nb(repeats: int = REPEATS, seed: int = 0, cases=MODEL_CASES, **settings) -> dict:
    """Per case, one repeat of ``crc simulate`` (split, centralized ML and RC, CRC, evaluation; the data set loaded
    once beforehand) with naive Bayes and with the case's model, interleaved, best of ``repeats``; ``settings``
    override the default run (tests use small ones)."""
    report = {"timing": f"best of {repeats}, interleaved in one process (naive Bayes, the model, a {BLAS_PARK_SECONDS} s "
                        "pause); cpu_seconds is the process's CPU time (all threads)", "blas_threads": blas_threads(),
              "block_threads": threads(), "cases": []}
    for data, options, target in cases:
        configs = {"nb": SimulationConfig.from_settings(data=data, seed=seed, **settings),
                   options["model"]: SimulationConfig.from_settings(data=data, seed=seed, **options, **settings)}
        dataset = load_for(configs["nb"])
        network = network_factory(configs["nb"].topology)
        best = _interleaved(repeats, {name: functools.partial(simulate, config, network, dataset=dataset)
                                      for name, config in configs.items()})
        nb, model = best["nb"], best[options["model"]]
        report["cases"].append({
            "data": data, "model": options, "nodes": configs["nb"].nodes, "rounds": configs["nb"].rounds,
            "nb": {"seconds": nb[0], "cpu_seconds": nb[1], "test_error": nb[2]["crc"]["test_error"]},
            "other": {"seconds": model[0], "cpu_seconds": model[1], "test_error": model[2]["crc"]["test_error"]},
            "ratio": model[0] / nb[0], "cpu_ratio": model[1] / nb[1], "target_ratio": target,
            "meets_target": model[0] <= target * nb[0],
        })
    return report


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def scale_run(config: SimulationConfig) -> dict:
    """Wall time and peak memory of a large network: setup (data, split, graph), the CRC rounds, and the evaluation
    of the final statistics on the simulator's sample (``config.eval_nodes`` peers, ``config.eval_instances``
    training and test instances)."""
    tracemalloc.start()
    start = time.perf_counter()
    split, graph, ess = _prepared(config)
    local = LocalData.from_parts(split.phi_train, split.y_train, split.parts)
    nodes, train_idx, test_idx = evaluation_sample(split, config, np.random.SeedSequence(config.seed))
    model = split.model
    evaluation = (split.phi_train[train_idx], split.y_train[train_idx], split.phi_test[test_idx], split.y_test[test_idx])
    mixing = averaging_matrix(graph)
    del split, graph  # the pooled feature maps and the graph object are not needed by the rounds
    setup_seconds = time.perf_counter() - start
    _, setup_peak = tracemalloc.get_traced_memory()

    tracemalloc.reset_peak()
    engine = CRCEngine(model, local, mixing, ess=ess, iterations=config.iters)
    wall, cpu, stats = _timed(lambda: engine.run(config.rounds))
    _, rounds_peak = tracemalloc.get_traced_memory()

    tracemalloc.reset_peak()
    phi_train, y_train, phi_test, y_test = evaluation
    eval_wall, _, (train_error, test_error) = _timed(lambda: (metrics.node_errors(model, stats[nodes], phi_train, y_train),
                                                              metrics.node_errors(model, stats[nodes], phi_test, y_test)))
    current, eval_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    flop = run_flop(model, local, mixing, config.rounds, config.iters)
    return {
        "data": config.data, "model": config.model, "nodes": config.nodes, "local_size": config.local_size,
        "rounds": config.rounds,
        "setup_seconds": setup_seconds,
        "seconds": wall, "cpu_seconds": cpu, "node_rounds_per_s": config.nodes * config.rounds / wall,
        "flop_per_run": flop, "gflop_per_s": None if flop is None else flop / wall / 1e9,
        "evaluation": {"nodes": len(nodes), "train_instances": len(train_idx), "test_instances": len(test_idx),
                       "seconds": eval_wall, "train_error": float(train_error.mean()), "test_error": float(test_error.mean())},
        "local_data_bytes": int(local.phi.nbytes + local.y.nbytes + local.mask.nbytes),
        "peak_traced_bytes_setup": setup_peak,
        "peak_traced_bytes_rounds": rounds_peak,
        "peak_traced_bytes_evaluation": eval_peak,
        "max_rss_bytes_process": _max_rss_bytes(),
        "memory": "tracemalloc peaks per phase (numpy buffers included) and the process's maximum resident set size",
    }


def peers_run(config: SimulationConfig) -> dict:
    """Real peers on loopback (``crc launch``) against the simulator on the same run; the peers run with CURVE keys
    (the default, whose figures are at the top level) and, in the same run, in plaintext (``curve_cost``) and with
    secure aggregation on top of CURVE (``secure_aggregation_cost``)."""
    runs = {}
    for name, plaintext, secure_aggregation in (("plaintext", True, False), ("curve", False, False), ("secure", False, True)):
        with tempfile.TemporaryDirectory(prefix="crc-bench-") as workdir:
            runs[name] = launch(config.with_settings(secure_aggregation=secure_aggregation), workdir, plaintext=plaintext)
    start = time.perf_counter()
    simulated = simulate(config, network_factory(config.topology))
    simulate_seconds = time.perf_counter() - start
    results = runs["curve"]
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
        "curve_cost": {name: _transport_figures(runs[name], simulated) for name in ("plaintext", "curve")},
        "secure_aggregation_cost": {name: _secure_figures(runs[name]) for name in ("curve", "secure")},
    }


def _secure_figures(results: dict) -> dict:
    """Messages, bytes and round times of a launch, and what secure aggregation protected in it."""
    net = results["network"]
    return {"messages": net["messages"], "bytes": net["bytes"], "bytes_per_message": net["bytes_per_message"],
            "launch_wall_seconds": net["wall_s"], "rounds_seconds": net["rounds_seconds"],
            "round_ms_p50": net["round_ms_p50"], "round_ms_p99": net["round_ms_p99"],
            "test_error": results["crc"]["test_error"], **results.get("secure_aggregation", {})}


def _transport_figures(results: dict, simulated: dict) -> dict:
    """Round times of a launch, and the bytes its frames take on a TCP connection (``wire_bytes``: a frame of the
    launch's size; its content does not change the count)."""
    net = results["network"]
    frame = bytes(round(net["bytes_per_message"]))
    return {
        "encrypted": net["encrypted"], "launch_wall_seconds": net["wall_s"], "rounds_seconds": net["rounds_seconds"],
        "round_ms_p50": net["round_ms_p50"], "round_ms_p99": net["round_ms_p99"],
        "round_ms_p99_after_first": net["round_ms_p99_after_first"],
        "wire": wire_bytes(frame, encrypted=net["encrypted"]),
        "same_test_error_as_simulate": abs(results["crc"]["test_error"] - simulated["crc"]["test_error"]) < 1e-12,
    }



def vertical_run(datasets=VERTICAL_DATASETS, blocks=VERTICAL_BLOCKS, **settings) -> dict:
    """Real peers of one vertical group (``crc launch --partition vertical:K``, CURVE keys) on each data set for each
    K of ``blocks``, beside K horizontal peers (a random tree) sharing the same training instances in the same run:
    the set-up (alignment and start), a round's time (p50, p99) and the bytes a peer sends a round.

    A vertical round is a pass of the group: every member's scores (m instances x r classes, float64) to the label
    holder, and its weights ``Y - P`` (m x r) back to every member; a horizontal round is every peer's statistics to
    each neighbour. ``settings`` go to every run's configuration (``rounds``, ``model``, ``seed``)."""
    from crc.nodes.vertical_launcher import launch_groups  # the vertical peers' launcher (and its PSI) only here

    runs = []
    for data in datasets:
        for k in blocks:
            vertical = SimulationConfig.from_settings(data=data, partition=f"vertical:{k}", rc_converged=False, **settings)
            with tempfile.TemporaryDirectory(prefix="crc-bench-") as workdir:
                grouped = launch_groups(vertical, workdir)
            net, config = grouped["network"], grouped["config"]
            train = config["pooled_size"]
            horizontal = SimulationConfig.from_settings(data=data, nodes=k, local_size=train // k, rc_converged=False,
                                                        **settings)
            with tempfile.TemporaryDirectory(prefix="crc-bench-") as workdir:
                plain = launch(horizontal, workdir)
            members = [peer["bytes_per_round"] for peer in net["peers"] if peer["role"] == "member"]
            holder = next(peer for peer in net["peers"] if peer["role"] == "label holder")
            hnet = plain["network"]
            runs.append({
                "data": data, "blocks": k, "instances": net["instances"], "classes": config["classes"],
                "features_per_block": [len(block) for block in config["block_features"]],
                "vertical": {"setup_ms": net["setup_ms"], "round_ms_p50": net["round_ms_p50"],
                             "round_ms_p99": net["round_ms_p99"], "wall_s": net["wall_s"],
                             "member_bytes_per_round": float(np.mean(members)) if members else 0.0,
                             "label_holder_bytes_per_round": holder["bytes_per_round"],
                             "test_gap": grouped["test_gap"]},
                "horizontal": {"round_ms_p50": hnet["round_ms_p50"], "round_ms_p99": hnet["round_ms_p99"],
                               "wall_s": hnet["wall_s"],
                               "bytes_per_round": hnet["bytes"] / (horizontal.nodes * horizontal.rounds),
                               "test_gap": plain["test_gap"]},
            })
    return {"rounds": settings.get("rounds", SimulationConfig().rounds), "runs": runs,
            "what": "vertical: one group of K real peers (CURVE) holding K feature blocks of every training instance; "
                    "horizontal: K real peers on a random tree holding the same instances shared out; bytes a peer "
                    "sends a round (set-up apart), round times at the label holder (vertical) or over the peers"}
