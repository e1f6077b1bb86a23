"""A lead measured, not shipped: exact diffusion with two local steps, against the paper's algorithm and the preset.

CRC is diffusion: each peer averages its neighbourhood, then takes a local step. With a constant step, diffusion
keeps a steady disagreement between peers (each is pulled towards its own data), and with the preset that
disagreement is most of `letter`'s gap at round 64 (the network mean of the aggregates is then already at RC's
error). Exact diffusion (Yuan, Ying, Zhao and Sayed, 2019) removes that bias with one more vector per peer and the
same messages. With x_v the peer's aggregate (its classifier), ψ_v its statistics after its local steps and M_t
the round's closed-neighbourhood averaging:

    ψ_v(t) = LRC_v(x_v(t-1))                       (two local steps, --iters 2)
    φ_v(t) = ψ_v(t) + x_v(t-1) - ψ_v(t-1)          (φ_v(1) = ψ_v(1); φ is what the peer sends)
    x_v(t) = valid(½ φ_v(t) + ½ (M_t φ(t))_v)      (lazy mixing: the method needs a positive definite mixing)

``valid`` raises each naive-Bayes sum of squares to at least the floor variance (the extrapolation in φ can make
a variance negative, and on `spambase` it then diverged). Naive Bayes only. Writes exact-diffusion.json next to
this file, one entry per finished (setting, data set); rerun to resume:

    nice -n 10 python results/acceleration/exact_diffusion.py
"""

import json
import math
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from crc.core.calibration import lrc
from crc.core.engine import single_threaded_blas
from crc.core.models.naive_bayes import VAR_FLOOR, NaiveBayes
from crc.experiments.runner import DirectoryCache
from crc.protocol import SimulationConfig, simulate
from crc.protocol.central import central_results
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.tables.datasets import BUNDLED
from crc.topologies import network_factory

HERE = Path(__file__).parent
ROUNDS = 64
LOCAL_STEPS = 2
SETTINGS = {
    "default": ({}, math.inf),
    "label-tree+80": ({"partition": "label", "topology": "tree+80"}, math.inf),
    "loss0.3": ({"loss": 0.3}, math.inf),
    "tree-period1": ({}, 1),
}
"""setting -> (configuration overrides, period of the graph: a fresh random tree every round for tree-period1)."""


def valid(model: NaiveBayes, stats: np.ndarray) -> np.ndarray:
    """``stats`` (n, size) with every sum of squares raised to what the floor variance needs."""
    table = model.table(stats).copy()
    obs = np.maximum(table[..., model.layout.columns("obs")], 1e-12)
    mean = table[..., model.layout.columns("sum")] / obs
    sumsq = table[..., model.layout.columns("sumsq")]
    np.maximum(sumsq, obs * (mean**2 + VAR_FLOOR), out=sumsq)
    return table.reshape(stats.shape)


def exact_diffusion(engine, rounds: int) -> np.ndarray:
    """Every peer's classifier statistics x (n, size) after ``rounds`` rounds from the engine's start."""
    model, local = engine.model, engine.local
    x, psi_previous = engine.stats, None
    with single_threaded_blas():
        for round_ in range(1, rounds + 1):
            psi = lrc(model, x, local.phi, engine.weights, local.mask, iterations=LOCAL_STEPS)
            sent = psi if psi_previous is None else psi + x - psi_previous
            mixing = sp.csr_array(engine.mixing(round_))
            x, psi_previous = valid(model, 0.5 * (sent + mixing @ sent)), psi
    return x


def gaps(data: str, overrides: dict, period: float, cache: DirectoryCache) -> list[float]:
    """The test gap to RC (at --rc-iterations) of exact diffusion at round ROUNDS, one per repeat."""
    extra = {"test_size": 500} if data in ("chess", "splice") else {}
    config = SimulationConfig.from_settings(data=data, repeats=3, rounds=ROUNDS, **extra, **overrides)
    dataset, network = load_for(config), network_factory(config.topology, period)
    out = []
    for index in range(config.repeats):
        rep = prepare_repeat(dataset, config, index)
        central = central_results(dataset, config, rep, cache)
        engine, _ = make_engine(rep, config, network)
        test_error = rep.errors(exact_diffusion(engine, ROUNDS)[rep.eval_nodes])[1].mean()
        out.append(float(test_error - central["rc"]["test_error"]))
    return out


def product_gaps(data: str, preset: dict, period: float, cache: DirectoryCache) -> list[float]:
    """The product's test gaps (paper or preset) on a fresh random tree every ``period`` rounds, one per repeat."""
    extra = {"test_size": 500} if data in ("chess", "splice") else {}
    config = SimulationConfig.from_settings(data=data, repeats=3, rounds=ROUNDS, **extra, **preset)
    results = simulate(config, network_factory(config.topology, period), cache=cache)
    return [r["test_gap"] for r in results["repeats"]]


def main() -> None:
    out = HERE / "exact-diffusion.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    cache = DirectoryCache(HERE / "sets" / ".cache")
    for setting, (overrides, period) in SETTINGS.items():
        for data in BUNDLED:
            key = f"{setting}/{data}"
            if key in done:
                continue
            entry = {"exact_diffusion": gaps(data, overrides, period, cache)}
            if setting == "tree-period1":  # no product figures for this setting in sets.json
                entry["paper"] = product_gaps(data, {}, period, cache)
                entry["accelerated"] = product_gaps(data, {"accelerated": True}, period, cache)
            done[key] = entry
            out.write_text(json.dumps(done, indent=1) + "\n")
            print(key, " ".join(f"{name} {np.mean(values):+.4f}" for name, values in entry.items()), flush=True)


if __name__ == "__main__":
    main()
