"""Is the gap left on the categorical synthetic set the peers' different starts (issue 31)? One run of the default
algorithm from each peer's own category counts (today's start), one from the network mean of those starts given to
every peer (an oracle: the same network mean, no disagreement at round 0; no peer can compute it), per repeat: the
peers' mean test gap to RC (64 iterations) and the gap of the network mean's classifier at rounds 16, 32 and 64,
with the second largest eigenvalue modulus of the round's mixing matrix. Writes pooled_start.json next to this file:

    nice -n 10 python results/acceleration/pooled_start.py DATA [REPEATS]

DATA: a bundled name or a CSV file with a ``class`` column (synthetic.py's).
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

from crc.protocol import SimulationConfig
from crc.protocol.central import central_results
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
CHECKPOINTS = (16, 32, 64)


def second_eigenvalue(engine) -> float:
    """|λ2| of the first round's mixing matrix."""
    mixing = engine.mixing(1)
    dense = mixing.toarray() if hasattr(mixing, "toarray") else np.asarray(mixing)
    return float(np.sort(np.abs(np.linalg.eigvals(dense)))[-2])


def run(rep, config, reference: float, pooled: bool) -> tuple[dict, float]:
    """Gaps at CHECKPOINTS of one run, from the peers' own starts or (``pooled``) their network mean; and |λ2|."""
    engine, _ = make_engine(rep, config, network_factory(config.topology, math.inf))
    if pooled:
        engine.stats = np.broadcast_to(engine.stats.mean(axis=0), engine.stats.shape).copy()
    gaps = {}

    def checkpoint(round_: int, stats: np.ndarray) -> None:
        if round_ in CHECKPOINTS:
            peers = rep.errors(stats[rep.eval_nodes])[1].mean()
            mean = rep.errors(stats.mean(axis=0)[None])[1][0]
            gaps[round_] = {"gap": float(peers - reference), "mean_gap": float(mean - reference)}

    engine.run(max(CHECKPOINTS), checkpoint)
    return gaps, second_eigenvalue(engine)


def main(data: str, repeats: int) -> None:
    extra = {"label": "class"} if data.endswith((".csv", ".gz")) else {}
    config = SimulationConfig.from_settings(data=data, rc_converged=False, **extra)
    dataset = load_for(config)
    runs = []
    for index in range(repeats):
        rep = prepare_repeat(dataset, config, index)
        reference = central_results(dataset, config, rep, None)["rc"]["test_error"]
        own, eigenvalue = run(rep, config, reference, pooled=False)
        pooled, _ = run(rep, config, reference, pooled=True)
        runs.append({"repeat": index, "rc": reference, "lambda2": eigenvalue, "own": own, "pooled": pooled})
        print(f"repeat {index} |λ2| {eigenvalue:.4f}", *(f"{name} @{r}: {g[r]['gap']:+.4f} (mean {g[r]['mean_gap']:+.4f})"
              for name, g in (("own", own), ("pooled", pooled)) for r in CHECKPOINTS), flush=True)
    out = HERE / "pooled_start.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    done[Path(data).name.split(".")[0]] = runs
    out.write_text(json.dumps(done, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
