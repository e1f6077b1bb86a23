"""Distributed noise against local noise by the peers' degree: magic, naive Bayes, 50 peers x 50 instances, 64
rounds, the paper's algorithm with the classifier from the last aggregate, δ = 1e-5, 1,000 test instances, 10
repeats; graphs from the paper's random tree to the complete graph through random regular graphs of degree d.
Local noise: every peer noises its own release (``--dp-noise local``); distributed: with secure aggregation, each
member of a closed neighbourhood adds a share and the sum its recipient unmasks carries the noise once
(``--dp-noise distributed --secure-aggregation``, no colluders). A peer pays for every distinct neighbourhood sum it
is in (d + 1 on a d-regular graph, 1 on the complete graph), while its aggregate's noise falls like σ / (d + 1)
instead of σ / √(d + 1): the more neighbours, the more distributed noise buys. Writes degree.json next to this file,
one entry per finished cell (rerun to resume), and degree.md:

    python results/privacy/degree.py
"""

import math
from pathlib import Path

from levers import SETTING, WITHIN, fill, first_within, grid_lines

from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
REPEATS = 10
GRAPHS = ("tree", "regular:3", "regular:4", "regular:6", "regular:8", "regular:10", "complete")
NOISES = ("local", "distributed")
EPSILONS = (None, 1.0, 2.0, 4.0, 8.0)
ROWS = [{"topology": graph, "noise": noise} for graph in GRAPHS for noise in NOISES]


def key(row: dict, epsilon: float | None) -> str:
    return f"{row['topology']}/{row['noise']}/{'inf' if epsilon is None else f'{epsilon:g}'}"


def cell(row: dict, epsilon: float | None) -> float:
    """The mean test error of ``row``'s runs at ``epsilon`` (None: without noise, the same for both noises)."""
    private = {} if epsilon is None else {"dp_epsilon": epsilon, "dp_noise": row["noise"],
                                          "secure_aggregation": row["noise"] == "distributed"}
    config = SimulationConfig.from_settings(**SETTING | {"repeats": REPEATS}, topology=row["topology"], rounds=64,
                                            classifier="aggregate", **private)
    return simulate(config, network_factory(config.topology, math.inf))["crc"]["test_error"]


def table(done: dict) -> str:
    today = done[key(ROWS[0], None)]
    rows = []
    for row in ROWS:
        errors = [done[key(row, e)] for e in EPSILONS]
        rows.append(([row["topology"], row["noise"]], errors, [first_within(errors[1:], errors[0], EPSILONS[1:]),
                                                                first_within(errors[1:], today, EPSILONS[1:])]))
    return grid_lines(["graph", "noise"], EPSILONS, [f"ε within {WITHIN} of its ∞", "of the tree's ∞"], rows)


def main() -> None:
    done = fill(HERE / "degree.json", ROWS, EPSILONS, key, cell)
    (HERE / "degree.md").write_text(
        "# Distributed noise by degree on magic, 50 peers x 50 instances\n\n"
        f"CRC's test error (mean of {REPEATS} repeats; naive Bayes, the paper's algorithm, the classifier from the last "
        "aggregate, 64 rounds, δ = 1e-5, 1,000 test instances) by ε with local noise and with distributed noise "
        "through secure aggregation, on the paper's random tree, random d-regular graphs and the complete graph; the "
        f"smallest ε of the grid from which on the error stays within {WITHIN} of the same graph's non-private run, "
        "and of the tree's. Written by `python results/privacy/degree.py`.\n\n" + table(done) + "\n")


if __name__ == "__main__":
    main()
