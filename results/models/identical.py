"""What issues 31 and 32 left bit-identical to the code before issue 32 (commit b02faf8): every model under the
paper's algorithm, and naive Bayes under the default algorithm with the settings it had then (the uniform start,
two local steps, the local classifier: `--start uniform --iters 2 --classifier local`; issue 31 changed its default to
the categorical start, three steps and the averaged classifier).

    git archive b02faf8 | tar -x -C /tmp/b02faf8
    PYTHONPATH=/tmp/b02faf8 python results/models/identical.py run /tmp/before.npz
    python results/models/identical.py run /tmp/after.npz
    python results/models/identical.py compare /tmp/before.npz /tmp/after.npz

``run`` writes each case's final statistics (after the default setting's 64 rounds, first repeat); ``compare``
prints each case and whether its statistics are equal (numpy.array_equal), and exits 1 if any differs."""
import math
import sys

import numpy as np

import crc
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory

PREVIOUS_NB = {"start": "uniform", "iters": 2, "classifier": "local"}
"""Naive Bayes' settings of the default algorithm at b02faf8."""

CASES = [(data, "nb", "accelerated", PREVIOUS_NB) for data in ("letter", "satimage", "magic")] + [
    ("letter", "nb", "paper", {}), ("letter", "qda", "paper", {}), ("letter", "pc", "paper", {}),
    ("letter", "pc", "paper", {"structure": "region-graph"})]
"""(data set, model, algorithm, further settings) of every case."""


def name(data: str, model: str, algorithm: str, extra: dict) -> str:
    return "-".join([data, model, *map(str, extra.values()), algorithm])


def run(path: str) -> None:
    """Write every case's final statistics to the .npz ``path``."""
    print(f"crc from {crc.__file__}")
    out = {}
    for data, model, algorithm, extra in CASES:
        config = SimulationConfig.from_settings(data=data, model=model, algorithm=algorithm, rc_converged=False, **extra)
        repeat = prepare_repeat(load_for(config), config, 0)
        engine, _ = make_engine(repeat, config, network_factory(config.topology, math.inf))
        out[name(data, model, algorithm, extra)] = engine.run(config.rounds)
    np.savez(path, **out)


def compare(before: str, after: str) -> bool:
    """Print whether each case's statistics are equal in the two .npz files; True if all are."""
    first, second = np.load(before), np.load(after)
    equal = True
    for case in (name(*c) for c in CASES):
        same = case in first and case in second and np.array_equal(first[case], second[case])
        equal &= same
        print(f"{case}: {'identical' if same else 'DIFFERENT'}")
    return equal


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"] and len(sys.argv) == 3:
        run(sys.argv[2])
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        sys.exit(0 if compare(sys.argv[2], sys.argv[3]) else 1)
    else:
        sys.exit(__doc__)
