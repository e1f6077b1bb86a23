"""Iterate averaging on the paper's random tree: does a peer's classifier built from the average of its classifier
statistics over the last K rounds lower the ε the tree needs? Post-processing of released statistics, so it costs no
privacy. The grid of ``levers.py`` (magic, naive Bayes, 50 peers x 50 instances, 64 rounds, δ = 1e-5, 3 repeats) on
the tree, for its three tree levers (local noise with the paper's classifier or the aggregate one, distributed noise);
each run is scored with its last iterate (K = 1, ``levers.py``'s figure) and with the averages of its last K rounds.
Writes averaging.json next to this file, one entry per finished cell (rerun to resume), and averaging.md:

    python results/privacy/averaging.py
"""

import math
from pathlib import Path

import numpy as np
from levers import EPSILONS, LEVERS, SETTING, fill, first_within, key

from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import first_graph, make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
TREE_LEVERS = ("today", "aggregate classifier", "distributed, tree")
WINDOWS = (1, 8, 16, 32)
"""K: the rounds whose classifier statistics are averaged (1: the last iterate)."""


def repeat_errors(config: SimulationConfig, dataset, index: int) -> dict[int, float]:
    """Mean test error over the evaluation peers of one repeat, for every window K."""
    rep = prepare_repeat(dataset, config, index)
    graph = network_factory(config.topology, math.inf)(config.nodes, rep.graph_seed)
    privacy = config.privacy(rep.split.model, first_graph(graph))
    engine, _ = make_engine(rep, config, lambda n, seed: graph, privacy)
    history: list[np.ndarray] = []

    def keep(round_: int, classifiers: np.ndarray) -> None:
        if round_ > config.rounds - max(WINDOWS):
            history.append(classifiers[rep.eval_nodes].copy())

    engine.run(config.rounds, keep)
    return {k: float(rep.errors(np.mean(history[-k:], axis=0))[1].mean()) for k in WINDOWS}


def cell(lever: str, epsilon: float | None) -> dict[str, float]:
    settings = LEVERS[lever]
    private = epsilon is not None
    config = SimulationConfig.from_settings(
        **SETTING, **{k: v for k, v in settings.items() if private or k != "dp_noise"}, dp_epsilon=epsilon,
        secure_aggregation=settings.get("dp_noise") == "distributed")
    dataset = load_for(config)
    errors = [repeat_errors(config, dataset, index) for index in range(config.repeats)]
    return {str(k): float(np.mean([e[k] for e in errors])) for k in WINDOWS}


def table(done: dict) -> str:
    lines = ["| lever | K | " + " | ".join("∞" if e is None else f"ε = {e:g}" for e in EPSILONS)
             + " | ε within 0.05 of its own ∞ (K = 1) |", "|---" * (len(EPSILONS) + 3) + "|"]
    for lever in TREE_LEVERS:
        for k in map(str, WINDOWS):
            errors = [done[key(lever, e)][k] if key(lever, e) in done else None for e in EPSILONS]
            cells = ["–" if error is None else f"{error:.3f}" for error in errors]
            reach = "–" if errors[0] is None else first_within(errors[1:], done[key(lever, None)]["1"])
            lines.append(f"| {lever} | {k} | " + " | ".join(cells) + f" | {reach} |")
    return "\n".join(lines)


def main() -> None:
    done = fill(HERE / "averaging.json", TREE_LEVERS, EPSILONS, key, cell)
    (HERE / "averaging.md").write_text(
        "# Iterate averaging on the random tree (magic, 50 peers x 50 instances, 64 rounds)\n\nCRC's test error (mean "
        "of 3 repeats; naive Bayes, the paper's algorithm, δ = 1e-5, 1,000 test instances) of a classifier built from "
        "the average of a peer's classifier statistics over its last K rounds (K = 1: the last iterate, as in "
        "levers.md), and the smallest ε of the grid from which on the error stays within 0.05 of the lever's "
        "non-private last iterate. Written by `python results/privacy/averaging.py`.\n\n" + table(done) + "\n")


if __name__ == "__main__":
    main()
