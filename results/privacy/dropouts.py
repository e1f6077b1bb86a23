"""What tolerating dropouts costs distributed noise: magic, naive Bayes, 50 peers x 50 instances, 64 rounds, the
paper's algorithm with the classifier from the last aggregate, δ = 1e-5, 1,000 test instances, 10 repeats, no
colluders, on the graphs where distributed noise reaches ε = 4 (degree.md). With ``--dp-dropouts d`` a sum is
unmasked without up to d of its members, so every share is sized for |N| - 1 - d honest ones instead of |N| - 1: the
sum of all members carries (|N| - 1) / (|N| - 1 - d) times the noise the accountant needs. With d > 0 recipients of
one closed neighbourhood no longer share its shares (they may unmask different members), so on the complete graph a
peer is in 50 sums a round instead of 1 (``crc.core.distributed_noise``). The simulator's sums have every member, so
this is the price paid in a run where nobody drops. Writes dropouts.json next to this file, one
entry per finished cell (rerun to resume), and dropouts.md:

    python results/privacy/dropouts.py
"""

import math
from pathlib import Path

from levers import SETTING, WITHIN, fill, first_within, grid_lines

from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
REPEATS = 10
GRAPHS = ("regular:6", "regular:10", "complete")
DROPOUTS = (0, 1, 2)
EPSILONS = (None, 2.0, 4.0, 8.0)
ROWS = [{"topology": graph, "dropouts": d} for graph in GRAPHS for d in DROPOUTS]


def key(row: dict, epsilon: float | None) -> str:
    if epsilon is None:  # without noise the dropouts change nothing: one run per graph
        return f"{row['topology']}/inf"
    return f"{row['topology']}/{row['dropouts']}/{epsilon:g}"


def cell(row: dict, epsilon: float | None) -> float:
    """The mean test error of ``row``'s runs at ``epsilon`` (None: without noise)."""
    private = {} if epsilon is None else {"dp_epsilon": epsilon, "dp_noise": "distributed", "secure_aggregation": True,
                                          "dp_dropouts": row["dropouts"]}
    config = SimulationConfig.from_settings(**SETTING | {"repeats": REPEATS}, topology=row["topology"], rounds=64,
                                            classifier="aggregate", **private)
    return simulate(config, network_factory(config.topology, math.inf))["crc"]["test_error"]


def table(done: dict) -> str:
    rows = []
    for row in ROWS:
        errors = [done[key(row, e)] for e in EPSILONS]
        rows.append(([row["topology"], str(row["dropouts"])], errors, [first_within(errors[1:], errors[0], EPSILONS[1:])]))
    return grid_lines(["graph", "--dp-dropouts"], EPSILONS, [f"ε within {WITHIN} of ∞"], rows)


def main() -> None:
    done = fill(HERE / "dropouts.json", ROWS, EPSILONS, key, cell)
    (HERE / "dropouts.md").write_text(
        "# Distributed noise that survives dropouts, on magic, 50 peers x 50 instances\n\n"
        f"CRC's test error (mean of {REPEATS} repeats; naive Bayes, the paper's algorithm, the classifier from the last "
        "aggregate, 64 rounds, δ = 1e-5, 1,000 test instances, no colluders) by ε and `--dp-dropouts` d, the members "
        "a neighbourhood sum may go without and still be unmasked; the smallest ε of the grid from which on the "
        f"error stays within {WITHIN} of the graph's non-private run. Every member's share is sized for |N| - 1 - d "
        "honest ones, so in these runs, where nobody drops, each sum carries (|N| - 1) / (|N| - 1 - d) times the "
        "noise of d = 0: 6/5 and 6/4 on regular:6, 10/9 and 10/8 on regular:10, 49/48 and 49/47 on the complete "
        "graph. On the complete graph d > 0 changes the accounting too: the recipients, who shared one sum's shares with d = 0, "
        "may then unmask different members (two sums of the same shares would differ by one member's statistics and "
        "share), so each recipient's sum has shares of its own and a peer is released in 50 sums a round instead of "
        "1. Written by `python results/privacy/dropouts.py`.\n\n" + table(done) + "\n")


if __name__ == "__main__":
    main()
