"""Does averaging a peer's own iterates remove the disagreement left on the categorical synthetic set (issue 31)?
One run of the default algorithm per repeat (the same seeds as measure.py), and from its rounds, per peer, classifiers
that average its statistics over past rounds (post-processing of each peer's own states: the messages are the
run's). Variants at round t, each the test gap to RC (64 iterations, read from measure.py's entries):

- ``last``: today's classifier (the statistics of round t);
- ``cat-half``: the category-count blocks averaged over rounds ceil(t/2)+1..t, the rest of round t;
- ``all-half``: every statistic averaged over those rounds;
- ``cat-poly<η>``: the category counts averaged with polynomial decay (Shamir and Zhang, 2013): ā_t = (1 - w) ā_{t-1}
  + w s_t with w = (η + 1) / (t + η); one running vector, weights about ∝ round^η.

Writes suffix.json next to this file:

    nice -n 10 python results/acceleration/suffix.py DATA [REPEATS] [ROUNDS]

DATA: a bundled name or a CSV file with a ``class`` column (synthetic.py's).
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
CHECKPOINTS = (16, 32, 64)
ETAS = (0, 1, 3)


def reference(data: str, index: int) -> float:
    """RC's test error (64 iterations) of repeat ``index`` from measure.py's accelerated entry."""
    key = f"default/{data}/accelerated" if "/" not in data else f"synthetic/{Path(data).name.split('.')[0]}/accelerated"
    for path in HERE.glob("sets*.json"):
        entries = json.loads(path.read_text())
        if key in entries:
            return entries[key]["repeat_rc"][index]
    raise KeyError(key)


def run(data: str, index: int, rounds: int) -> dict:
    """The variants' gaps at CHECKPOINTS of one repeat."""
    extra = {"label": "class"} if data.endswith((".csv", ".gz")) else {}
    extra |= {"test_size": 500} if data in ("chess", "splice") else {}
    config = SimulationConfig.from_settings(data=data, rc_converged=False, **extra)
    rep = prepare_repeat(load_for(config), config, index)
    engine, _ = make_engine(rep, config, network_factory(config.topology, math.inf))
    model = engine.model
    cat = model.layout.columns("cat")
    rc = reference(data, index)
    history, poly, gaps = [], {eta: None for eta in ETAS}, {}

    def with_cat(stats: np.ndarray, counts: np.ndarray) -> np.ndarray:
        out = model.table(stats.copy())
        out[..., cat] = counts
        return out.reshape(stats.shape)

    def gap(stats: np.ndarray) -> float:
        return float(rep.errors(stats[rep.eval_nodes])[1].mean() - rc)

    def checkpoint(round_: int, stats: np.ndarray) -> None:
        history.append(stats)
        counts = model.table(stats)[..., cat]
        for eta in ETAS:
            weight = (eta + 1) / (round_ + eta)
            poly[eta] = counts.copy() if poly[eta] is None else (1 - weight) * poly[eta] + weight * counts
        if round_ in CHECKPOINTS:
            window = np.mean(history[round_ - round_ // 2:], axis=0)
            gaps[round_] = {"last": gap(stats), "cat-half": gap(with_cat(stats, model.table(window)[..., cat])),
                            "all-half": gap(window),
                            **{f"cat-poly{eta}": gap(with_cat(stats, poly[eta])) for eta in ETAS}}

    engine.run(rounds, checkpoint)
    return gaps


def main(data: str, repeats: int, rounds: int) -> None:
    out = HERE / "suffix.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    name = Path(data).name.split(".")[0]
    for index in range(repeats):
        gaps = run(data, index, rounds)
        done[f"{name}/{index}"] = gaps
        out.write_text(json.dumps(done, indent=1) + "\n")
        print(name, index, *(f"@{r} " + " ".join(f"{k} {v:+.4f}" for k, v in g.items()) for r, g in gaps.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3, int(sys.argv[3]) if len(sys.argv) > 3 else 64)
