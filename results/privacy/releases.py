"""Fewer releases in the same rounds (``--release-every k``): a peer takes its local step and releases (its noisy
statistics) only every k-th round, and in the k - 1 rounds between only averages what is already public
(post-processing, no privacy cost), so the accountant composes ceil(rounds / k) releases and σ falls by about √k.
A release may carry j steps' worth of data, ``a + j (LRC(a) - a)`` (the data term at the same public θ(a); a second
sequential step has no sensitivity bound, ``crc.core.privacy``), of sensitivity jΔ: ``Steps``, this study only.

The grid of ``levers.py`` (magic, naive Bayes, 50 peers x 50 instances, 64 rounds, δ = 1e-5, 1,000 test instances,
3 repeats, the paper's algorithm, local noise, the classifier from the last aggregate), each run scored on its last
iterate and on the average of its last 16 rounds' classifier statistics (``averaging.py``). Writes releases.json next
to this file, one entry per finished cell (rerun to resume), and releases.md:

    python results/privacy/releases.py
"""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
from levers import SETTING, WITHIN, fill, first_within, grid_lines

from crc.core.engine import CRCEngine
from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import first_graph, make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
WINDOW = 16
"""Rounds whose classifier statistics are averaged for the second score."""
EPSILONS = (None, 2.0, 4.0, 8.0, 16.0)
ROWS = [
    *({"topology": "tree", "release_every": k, "momentum": 0.0, "steps": 1} for k in (1, 2, 4, 8, 16)),
    *({"topology": "tree", "release_every": k, "momentum": 0.7, "steps": 1} for k in (1, 2, 4, 8, 16)),
    *({"topology": "tree", "release_every": k, "momentum": 0.0, "steps": 2} for k in (4, 8, 16)),
    *({"topology": "complete", "release_every": k, "momentum": 0.0, "steps": 1} for k in (1, 4, 8, 16)),
]


class Steps(CRCEngine):
    """A CRC engine whose local step adds ``steps`` times the data term at the aggregate's θ."""

    steps = 1

    def _lrc(self, aggregated, block, restart):
        stats, memory = super()._lrc(aggregated, block, restart)
        return aggregated + self.steps * (stats - aggregated), memory


def name(row: dict) -> str:
    return "/".join(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in row.items())


def repeat_errors(config: SimulationConfig, dataset, index: int, steps: int) -> tuple[float, float]:
    """Mean test error over the evaluation peers of one repeat: last iterate, last WINDOW averaged."""
    rep = prepare_repeat(dataset, config, index)
    graph = network_factory(config.topology, math.inf)(config.nodes, rep.graph_seed)
    privacy = config.privacy(rep.split.model, first_graph(graph))
    if privacy is not None:
        privacy = replace(privacy, sensitivity=steps * privacy.sensitivity)
    engine, _ = make_engine(rep, config, lambda n, seed: graph, privacy)
    engine.__class__, engine.steps = Steps, steps
    history: list[np.ndarray] = []

    def keep(round_: int, classifiers: np.ndarray) -> None:
        if round_ > config.rounds - WINDOW:
            history.append(classifiers[rep.eval_nodes].copy())

    engine.run(config.rounds, keep)
    return float(rep.errors(history[-1])[1].mean()), float(rep.errors(np.mean(history, axis=0))[1].mean())


def cell(row: dict, epsilon: float | None) -> dict:
    settings = {key: value for key, value in row.items() if key != "steps"}
    config = SimulationConfig.from_settings(**SETTING, **settings, rounds=64, classifier="aggregate", dp_epsilon=epsilon)
    dataset = load_for(config)
    errors = np.array([repeat_errors(config, dataset, index, row["steps"]) for index in range(config.repeats)])
    return {"last": float(errors[:, 0].mean()), f"last {WINDOW}": float(errors[:, 1].mean())}


def key(row: dict, epsilon: float | None) -> str:
    return f"{name(row)}/eps={'inf' if epsilon is None else f'{epsilon:g}'}"


def table(done: dict, score: str) -> str:
    """Rows of ROWS by ε, and the ε each reaches against today's non-private run (ROWS[0] at ∞)."""
    today = done[key(ROWS[0], None)][score]
    rows = []
    for row in ROWS:
        errors = [done.get(key(row, e), {}).get(score) for e in EPSILONS]
        rows.append(([row["topology"], str(row["release_every"]), f"{row['momentum']:g}", str(row["steps"]),
                      str(-(-64 // row["release_every"]))], errors, [first_within(errors[1:], today, EPSILONS[1:])]))
    return grid_lines(["graph", "k", "momentum", "steps j", "releases"], EPSILONS, [f"ε within {WITHIN} of {today:.3f}"],
                      rows)


def main() -> None:
    done = fill(HERE / "releases.json", ROWS, EPSILONS, key, cell)
    (HERE / "releases.md").write_text(
        "# Fewer releases in the same 64 rounds (magic, 50 peers x 50 instances, random tree)\n\n"
        "CRC's test error (mean of 3 repeats; naive Bayes, the paper's algorithm, local noise, δ = 1e-5, 1,000 test "
        "instances, the classifier from the last aggregate) when a peer takes its local step and releases only every "
        "k-th round (`--release-every k`) and averages public values between; `releases` is what the accountant "
        "composes, ceil(64 / k); steps j > 1: a release carrying j times the data term at the same public θ, of "
        f"sensitivity jΔ. Last column: the smallest ε from which on the error stays within {WITHIN} of today's "
        "non-private run (the first row's ∞). Written by `python results/privacy/releases.py`.\n\n"
        "### Last iterate\n\n" + table(done, "last") + f"\n\n### Average of the last {WINDOW} rounds\n\n"
        + table(done, f"last {WINDOW}") + "\n")


if __name__ == "__main__":
    main()
