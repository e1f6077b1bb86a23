"""Where the private error on the tree comes from: the peers' disagreement or the network mean itself.

A private peer's statistics after the last round are public (every value it sent was released), so anything computed
from them alone costs no privacy. This study scores, per run, the peers' classifiers (what `crc simulate` reports),
the classifier of the exact network mean of their final public statistics (what the peers would hold if they could
average them exactly: on a tree, by relaying them, not built), and the peers after T more rounds that only average
those statistics, plainly or with heavy-ball memory β (x ← A + β (A - A_prev), A the round's neighbourhood average on
the run's mixing matrix) — extra rounds beyond the run's 64. The grid's rows are ``releases.py``'s best on the tree
(magic, naive Bayes, 50 peers x 50 instances, 64 rounds, the paper's algorithm, the classifier from the last
aggregate, δ = 1e-5, 1,000 test instances, 3 repeats). Writes consensus.json next to this file, one entry per
finished cell (rerun to resume), and consensus.md:

    python results/privacy/consensus.py
"""

import math
from pathlib import Path

import numpy as np
from levers import SETTING, WITHIN, fill

from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import first_graph, make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
EPSILONS = (None, 4.0, 8.0)
ROWS = [{"release_every": 1, "momentum": 0.0}, {"release_every": 4, "momentum": 0.7},
        {"release_every": 8, "momentum": 0.7}]
TAILS = (16, 32, 64)
BETAS = (0.0, 0.8)


def gossip(mixing: np.ndarray, stats: np.ndarray, rounds: int, beta: float) -> np.ndarray:
    """``stats`` (n, size) after ``rounds`` rounds of neighbourhood averaging on ``mixing`` (n, n) with heavy-ball
    memory ``beta`` (0: plain)."""
    previous, current = stats, stats
    for _ in range(rounds):
        average = mixing @ current
        previous, current = current, average + beta * (average - mixing @ previous)
    return current


def scores(config: SimulationConfig, dataset, index: int) -> dict:
    """One repeat's mean test errors over its evaluation peers: as run, the network mean's, and after each tail."""
    rep = prepare_repeat(dataset, config, index)
    graph = network_factory(config.topology, math.inf)(config.nodes, rep.graph_seed)
    privacy = config.privacy(rep.split.model, first_graph(graph))
    engine, mixing = make_engine(rep, config, lambda n, seed: graph, privacy)
    classifiers = engine.run(config.rounds)
    matrix = first_graph(mixing)
    matrix = matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)

    def error(stats: np.ndarray) -> float:
        return float(rep.errors(stats)[1].mean())

    found = {"peers": error(classifiers[rep.eval_nodes]), "mean": error(engine.stats.mean(axis=0, keepdims=True))}
    for beta in BETAS:
        for tail in TAILS:
            found[f"+{tail}, β {beta:g}"] = error(gossip(matrix, engine.stats, tail, beta)[rep.eval_nodes])
    return found


def cell(row: dict, epsilon: float | None) -> dict:
    config = SimulationConfig.from_settings(**SETTING, **row, topology="tree", rounds=64, classifier="aggregate",
                                            dp_epsilon=epsilon)
    dataset = load_for(config)
    runs = [scores(config, dataset, index) for index in range(config.repeats)]
    return {name: float(np.mean([run[name] for run in runs])) for name in runs[0]} | {
        "mean per repeat": [run["mean"] for run in runs]}


def key(row: dict, epsilon: float | None) -> str:
    return f"k={row['release_every']}/momentum={row['momentum']:g}/eps={'inf' if epsilon is None else f'{epsilon:g}'}"


def table(done: dict) -> str:
    columns = ["peers", "mean", *(f"+{tail}, β {beta:g}" for beta in BETAS for tail in TAILS)]
    lines = ["| k | momentum | ε | " + " | ".join(columns) + " | network mean per repeat |", "|---" * (len(columns) + 4) + "|"]
    for row in ROWS:
        for epsilon in EPSILONS:
            found = done[key(row, epsilon)]
            lines.append(f"| {row['release_every']} | {row['momentum']:g} | {'∞' if epsilon is None else f'{epsilon:g}'} | "
                         + " | ".join(f"{found[name]:.3f}" for name in columns) + " | "
                         + ", ".join(f"{value:.3f}" for value in found["mean per repeat"]) + " |")
    return "\n".join(lines)


READING = """## Reading

- At ε = 4 most of the peers' error is their disagreement, not the network mean's: with a release every 4 rounds and
  momentum 0.7 the peers score 0.356 while the classifier of their mean scores 0.219 (0.190, 0.187 and 0.280 per
  repeat: in one repeat the noise spoils the mean itself). With a release every round, 0.461 against 0.321.
- Averaging public values is slow on a random tree: 32 more rounds of plain averaging take that run to 0.300, 32 with
  heavy-ball memory 0.8 to 0.232, within the bar, but that is 96 rounds in all, not the bar's 64.
- Within the 64 rounds, rounds spent averaging are rounds without a release: a release every 8 rounds leaves the peers
  near their mean (0.265 against 0.245), but that mean is worse, since 8 releases carry less data than 16.
- So on the tree at 64 rounds, what ε = 4 lacks is consensus on the public statistics, which neither the local noise
  nor its accountant changes. Neither remedy is built: exact averaging of the final public statistics (relaying them
  along the graph, the `mean` column) or a network-wide secure sum per round (distributed noise over every peer, as
  the complete graph's distributed noise in levers.md).
"""


def main() -> None:
    done = fill(HERE / "consensus.json", ROWS, EPSILONS, key, cell)
    today = done[key(ROWS[0], None)]["peers"]
    (HERE / "consensus.md").write_text(
        "# The private error on the tree: the peers' disagreement against the network mean\n\n"
        "Test errors (mean of 3 repeats; magic, naive Bayes, 50 peers x 50 instances on a random tree, 64 rounds, the "
        "paper's algorithm with the classifier from the last aggregate, local noise, δ = 1e-5, 1,000 test instances). "
        "`peers`: the peers' classifiers as `crc simulate` scores them; `mean`: the classifier of the exact network "
        "mean of the peers' final public statistics; `+T, β b`: the peers after T more rounds (beyond the 64) that only "
        "average those public statistics, with heavy-ball memory b (0: plain averaging). All of these are computed "
        "from released values only, so they cost no privacy. The bar of issue 30: within "
        f"{WITHIN} of today's non-private {today:.3f}, that is at most {today + WITHIN:.3f}. Written by "
        "`python results/privacy/consensus.py`.\n\n" + table(done) + "\n\n" + READING)


if __name__ == "__main__":
    main()
