"""One network sum a round on the paper's random tree: magic, naive Bayes, 50 peers x 50 instances, 64 rounds, the
paper's algorithm with the classifier from the last aggregate, δ = 1e-5, 1,000 test instances, 10 repeats, as
``degree.py``. With ``--sum-over network`` every peer averages the whole network each round: one secure sum of all
peers' statistics, relayed along a spanning tree of the tree itself, carries the distributed noise once
(``--secure-aggregation --dp-noise distributed --sum-over network``, no colluders), so a peer is released once a round
(on the tree per neighbourhood: up to deg + 1 times) and every aggregate carries σ / n. Beside it, the tree's rows of
degree.json (local noise, and distributed noise per neighbourhood). Writes network_sum.json next to this file, one
entry per finished cell (rerun to resume), and network_sum.md:

    python results/privacy/network_sum.py
"""

import json
import math
from pathlib import Path

import degree
from levers import SETTING, WITHIN, fill, first_within, grid_lines

from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
REPEATS = degree.REPEATS
EPSILONS = (None, 0.5, 1.0, 2.0, 4.0, 8.0)
ROWS = [{"topology": "tree", "sum_over": "network"}]
BESIDE = [{"topology": "tree", "noise": noise} for noise in degree.NOISES]
"""degree.json's rows shown beside the network sum's (its cells, not run here)."""


def key(row: dict, epsilon: float | None) -> str:
    return f"{row['topology']}/{row['sum_over']}/{'inf' if epsilon is None else f'{epsilon:g}'}"


def cell(row: dict, epsilon: float | None) -> float:
    """The mean test error of the network sum's runs at ``epsilon`` (None: without noise, still one sum of all)."""
    private = {} if epsilon is None else {"dp_epsilon": epsilon, "dp_noise": "distributed"}
    config = SimulationConfig.from_settings(**SETTING | {"repeats": REPEATS}, topology=row["topology"], rounds=64,
                                            classifier="aggregate", secure_aggregation=True, sum_over=row["sum_over"],
                                            **private)
    return simulate(config, network_factory(config.topology, math.inf))["crc"]["test_error"]


def table(done: dict) -> str:
    beside = json.loads((HERE / "degree.json").read_text())
    tree = beside[degree.key(BESIDE[0], None)]
    noise = {"local": "local", "distributed": "distributed, per neighbourhood"}
    lines = [(["tree", noise[row["noise"]]], [beside.get(degree.key(row, e)) for e in EPSILONS]) for row in BESIDE]
    lines += [([row["topology"], "distributed, one network sum"], [done[key(row, e)] for e in EPSILONS]) for row in ROWS]
    rows = [(first, errors, [first_within(errors[1:], errors[0], EPSILONS[1:]),
                             first_within(errors[1:], tree, EPSILONS[1:])]) for first, errors in lines]
    return grid_lines(["graph", "noise"], EPSILONS, [f"ε within {WITHIN} of its ∞", "of the tree's ∞"], rows)


def main() -> None:
    done = fill(HERE / "network_sum.json", ROWS, EPSILONS, key, cell)
    (HERE / "network_sum.md").write_text(
        "# One network sum a round on magic, 50 peers x 50 instances\n\n"
        f"CRC's test error (mean of {REPEATS} repeats; naive Bayes, the paper's algorithm, the classifier from the last "
        "aggregate, 64 rounds, δ = 1e-5, 1,000 test instances) by ε on the paper's random tree: with local noise and "
        "with distributed noise per closed neighbourhood (`degree.py`, – where it did not run that ε), and with "
        "`--secure-aggregation --dp-noise distributed --sum-over network`, one secure sum of all peers a round "
        "relayed along the tree, which every peer averages; the smallest ε of the grid from which on the error stays "
        f"within {WITHIN} of the same row's non-private run, and of the tree's. Written by "
        "`python results/privacy/network_sum.py`.\n\n" + table(done) + "\n")


if __name__ == "__main__":
    main()
