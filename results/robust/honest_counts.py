"""The lowest class count honest peers reach, as a fraction of m0 (the basis of crc.core.plausibility's
NEGATIVE_COUNT_MASS): every round of every peer, 20 peers on a random tree, 64 rounds, 2 repeats, for each data set
given, algorithm, model and partition. Writes one line per run and the worst at the end.

    python results/robust/honest_counts.py letter,penbased > results/robust/honest_counts.txt
"""

import sys

import numpy as np

from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory


def run(**settings) -> tuple[float, float]:
    """(the lowest count / m0, the largest negative count mass / m0) over the repeats, rounds and peers."""
    config = SimulationConfig.from_settings(**settings)
    dataset = load_for(config)
    lowest, mass = np.inf, 0.0
    for index in range(config.repeats):
        rep = prepare_repeat(dataset, config, index)
        engine, _ = make_engine(rep, config, network_factory(config.topology), config.privacy(rep.split.model))
        model = rep.split.model

        def check(round_, classifiers, engine=engine, model=model):
            nonlocal lowest, mass
            counts = model.table(engine.stats)[..., :, model.layout.columns("count")] / engine.ess
            lowest = min(lowest, float(counts.min()))
            mass = max(mass, float((-np.minimum(counts, 0.0)).sum(axis=(-1, -2)).max()))

        engine.run(config.rounds, check)
    return lowest, mass


worst = (np.inf, 0.0)
for data in sys.argv[1].split(","):
    for algorithm in ("paper", "accelerated"):
        for model in ("nb", "qda", "pc"):
            for partition in ("iid", "label"):
                lowest, mass = run(data=data, algorithm=algorithm, model=model, partition=partition, nodes=20, rounds=64,
                                   repeats=2, topology="tree")
                worst = (min(worst[0], lowest), max(worst[1], mass))
                print(f"{data} {algorithm} {model} {partition}: lowest count {lowest:+.4f} m0, negative mass {mass:.4f} m0",
                      flush=True)
print(f"worst: lowest count {worst[0]:+.4f} m0, negative mass {worst[1]:.4f} m0")
