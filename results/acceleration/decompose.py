"""Where CRC's gap to RC comes from, on one repeat (issue 31): at rounds 8, 16, 32 and 64, the peers' mean test gap
to RC, the gap of the classifier of the peers' mean statistics (the network mean: what is left when the peers'
disagreement is taken away) and the spread (standard deviation) of the peers' test errors; and centralized RC from
the pooled ML statistics (the reference), from the paper's uniform start at ESS m (what CRC from a uniform start
tracks) and ML. Default setting; writes decomposition.json next to this file (one entry per run, rerun to add):

    nice -n 10 python results/acceleration/decompose.py DATA[,DATA...] [ALGORITHM[=START]...]

DATA: a bundled name or a CSV file with a ``class`` column (synthetic.py's); ALGORITHM: ``paper``, ``accelerated``
(default: both), ``accelerated=uniform`` the accelerated algorithm with another ``--start``.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

from crc.core.calibration import rc
from crc.protocol import SimulationConfig
from crc.protocol.central import central_results
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
CHECKPOINTS = (8, 16, 32, 64)


def decompose(data: str, algorithm: str, start: str | None) -> dict:
    """The decomposition of one run of ``algorithm`` (with ``start``, None for its own) on repeat 0 of ``data``."""
    extra = {"label": "class"} if data.endswith((".csv", ".gz")) else {"test_size": 500} if data in ("chess", "splice") else {}
    config = SimulationConfig.from_settings(data=data, algorithm=algorithm, start=start, rc_converged=False, **extra)
    dataset = load_for(config)
    rep = prepare_repeat(dataset, config, 0)
    central = central_results(dataset, config, rep, None)
    reference = central["rc"]["test_error"]
    split = rep.split
    uniform = rc(split.model, split.phi_train, split.y_train, lr=config.lr, init=split.model.uniform(len(split.y_train)),
                 iterations=config.rc_iterations).stats
    engine, _ = make_engine(rep, config, network_factory(config.topology, math.inf))
    rounds = {}

    def checkpoint(round_: int, stats: np.ndarray) -> None:
        if round_ in CHECKPOINTS:
            errors = rep.errors(stats[rep.eval_nodes])[1]
            mean = rep.errors(stats.mean(axis=0)[None])[1][0]
            rounds[round_] = {"gap": float(errors.mean() - reference), "mean_gap": float(mean - reference),
                              "spread": float(errors.std())}

    engine.run(max(CHECKPOINTS), checkpoint)
    return {"rc": reference, "ml": central["ml"]["test_error"], "rc_uniform": float(rep.errors(uniform[None])[1][0]),
            "settings": engine.acceleration.__dict__ | {"iters": config.iters}, "rounds": rounds}


def main(datasets: str, algorithms: list[str]) -> None:
    out = HERE / "decomposition.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    for data in datasets.split(","):
        for algorithm in algorithms or ["paper", "accelerated"]:
            name, _, start = algorithm.partition("=")
            key = f"{Path(data).name.split('.')[0]}/{algorithm}"
            done[key] = decompose(data, name, start or None)
            out.write_text(json.dumps(done, indent=1) + "\n")
            print(key, " ".join(f"@{r}: {v['gap']:+.3f} mean {v['mean_gap']:+.3f} spread {v['spread']:.3f}"
                                for r, v in done[key]["rounds"].items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
