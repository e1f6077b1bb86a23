"""Where the private error on the tree comes from: the peers' disagreement or the network mean itself.

A private peer's statistics after every round are public (each value it sent was released, or an average of released
values), so anything computed from them alone costs no privacy. This study scores, per run, the peers' classifiers
(what `crc simulate` reports); the classifier of the exact network mean of their final public statistics (what the
peers would hold if they could average them exactly at no cost in rounds); the "relayed" classifiers, which cost no
extra round either: each peer's classifier from the mean of the newest statistics of every peer that relaying along
the graph brings it within the 64 rounds (peer j's after round 64 - d(i, j), d the graph distance: a round a hop;
not built); and the peers after T more rounds that only average the final statistics, plainly or with heavy-ball
memory β (x ← A + β (A - A_prev), A the round's neighbourhood average on the run's mixing matrix) — extra rounds
beyond the run's 64. The grid's rows are ``releases.py``'s best on the tree (magic, naive Bayes, 50 peers x 50
instances, 64 rounds, the paper's algorithm, the classifier from the last aggregate, δ = 1e-5, 1,000 test instances,
10 repeats). Writes consensus.json next to this file, one entry per finished cell (rerun to resume), and
consensus.md:

    python results/privacy/consensus.py
"""

import math
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from levers import SETTING, WITHIN, fill
from scipy.sparse.csgraph import shortest_path

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
REPEATS = 10  # the 3 of the other studies called a mean of 0.219 what 10 repeats put at 0.252


def gossip(mixing: np.ndarray, stats: np.ndarray, rounds: int, beta: float) -> np.ndarray:
    """``stats`` (n, size) after ``rounds`` rounds of neighbourhood averaging on ``mixing`` (n, n) with heavy-ball
    memory ``beta`` (0: plain)."""
    previous, current = stats, stats
    for _ in range(rounds):
        average = mixing @ current
        previous, current = current, average + beta * (average - mixing @ previous)
    return current


def relayed(history: np.ndarray, mixing) -> np.ndarray:
    """Every peer's mean (n, size) of the newest statistics of each peer that reaches it by relaying, one hop a
    round, from ``history`` (rounds + 1, n, size), the statistics after each round (row 0: before the first)."""
    hops = shortest_path(sp.csr_array(mixing) != 0, unweighted=True).astype(int)
    last, peers = history.shape[0] - 1, np.arange(history.shape[1])
    return np.stack([history[np.maximum(last - hops[i], 0), peers].mean(axis=0) for i in peers])


def scores(config: SimulationConfig, dataset, index: int) -> dict:
    """One repeat's mean test errors over its evaluation peers: as run, the network mean's, and after each tail."""
    rep = prepare_repeat(dataset, config, index)
    graph = network_factory(config.topology, math.inf)(config.nodes, rep.graph_seed)
    privacy = config.privacy(rep.split.model, first_graph(graph))
    engine, mixing = make_engine(rep, config, lambda n, seed: graph, privacy)
    history = [engine.stats.copy()]
    classifiers = engine.run(config.rounds, lambda round_, _: history.append(engine.stats.copy()))
    matrix = first_graph(mixing)
    matrix = matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)

    def error(stats: np.ndarray) -> float:
        return float(rep.errors(stats)[1].mean())

    found = {"peers": error(classifiers[rep.eval_nodes]), "mean": error(engine.stats.mean(axis=0, keepdims=True)),
             "relayed": error(relayed(np.stack(history), matrix)[rep.eval_nodes])}
    for beta in BETAS:
        for tail in TAILS:
            found[f"+{tail}, β {beta:g}"] = error(gossip(matrix, engine.stats, tail, beta)[rep.eval_nodes])
    return found


def cell(row: dict, epsilon: float | None) -> dict:
    config = SimulationConfig.from_settings(**SETTING | {"repeats": REPEATS}, **row, topology="tree", rounds=64, classifier="aggregate",
                                            dp_epsilon=epsilon)
    dataset = load_for(config)
    runs = [scores(config, dataset, index) for index in range(config.repeats)]
    return {name: float(np.mean([run[name] for run in runs])) for name in runs[0]} | {
        "mean per repeat": [run["mean"] for run in runs]}


def key(row: dict, epsilon: float | None) -> str:
    return f"k={row['release_every']}/momentum={row['momentum']:g}/eps={'inf' if epsilon is None else f'{epsilon:g}'}"


def table(done: dict) -> str:
    columns = ["peers", "mean", "relayed", *(f"+{tail}, β {beta:g}" for beta in BETAS for tail in TAILS)]
    lines = ["| k | momentum | ε | " + " | ".join(columns) + " | network mean per repeat |", "|---" * (len(columns) + 4) + "|"]
    for row in ROWS:
        for epsilon in EPSILONS:
            found = done[key(row, epsilon)]
            lines.append(f"| {row['release_every']} | {row['momentum']:g} | {'∞' if epsilon is None else f'{epsilon:g}'} | "
                         + " | ".join(f"{found[name]:.3f}" for name in columns) + " | "
                         + ", ".join(f"{value:.3f}" for value in found["mean per repeat"]) + " |")
    return "\n".join(lines)


READING = """## Reading

- At ε = 4 much of the peers' error is their disagreement: with a release every 4 rounds and momentum 0.7 the peers
  score 0.353 while the classifier of their exact network mean scores 0.252. But the mean itself misses the bar: in 3
  of the 10 repeats the noise spoils it (0.280, 0.333, 0.352). With 3 repeats this study read 0.219 there and
  called exact averaging the remedy; 10 repeats say it is not enough alone.
- Relaying the public statistics, a hop a round, would give each peer nearly the network mean at no cost in rounds
  (`relayed`: 0.252 with a release every 4 rounds, 0.244 every 8, against the mean's 0.252 and 0.241), since the
  statistics of far peers change little in the rounds their relay takes. At a release every 8 rounds that is 0.001
  inside the bar, within the spread of the repeats (0.20 to 0.28 per repeat): not a result to build on.
- Averaging the final public values is slow on a random tree: 32 more rounds of heavy-ball averaging (β 0.8) take the
  every-4 run to 0.260 and 64 more to 0.255, above the bar and 96 to 128 rounds in all, not the bar's 64.
- So on the tree at 64 rounds and ε = 4, consensus on the public statistics is necessary but not sufficient: the
  noise of 8 to 16 local releases of 50 instances each also moves the network mean itself past the bar in some
  repeats. A network-wide secure sum per round (distributed noise over every peer, as the complete graph's
  distributed noise in levers.md, within the bar from ε = 1) is the lever left; it is not built.
"""


def main() -> None:
    done = fill(HERE / "consensus.json", ROWS, EPSILONS, key, cell)
    today = done[key(ROWS[0], None)]["peers"]
    (HERE / "consensus.md").write_text(
        "# The private error on the tree: the peers' disagreement against the network mean\n\n"
        f"Test errors (mean of {REPEATS} repeats; magic, naive Bayes, 50 peers x 50 instances on a random tree, 64 rounds, the "
        "paper's algorithm with the classifier from the last aggregate, local noise, δ = 1e-5, 1,000 test instances). "
        "`peers`: the peers' classifiers as `crc simulate` scores them; `mean`: the classifier of the exact network "
        "mean of the peers' final public statistics; `relayed`: each peer's classifier from the mean of the newest "
        "statistics of every peer that relaying, a hop a round, brings it within the 64 rounds; `+T, β b`: the peers "
        "after T more rounds (beyond the 64) that only "
        "average those public statistics, with heavy-ball memory b (0: plain averaging). All of these are computed "
        "from released values only, so they cost no privacy. The bar of issue 30: within "
        f"{WITHIN} of today's non-private {today:.3f}, that is at most {today + WITHIN:.3f}. Written by "
        "`python results/privacy/consensus.py`.\n\n" + table(done) + "\n\n" + READING)


if __name__ == "__main__":
    main()
