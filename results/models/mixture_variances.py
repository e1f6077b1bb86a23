"""Issue 32: the mixture circuit (K=2) under the accelerated algorithm: test error, smallest component count and the
Gaussian leaves whose variance collapsed, every EVERY rounds of one repeat.

    python results/models/mixture_variances.py letter 128 0 16 > results/models/mixture_variances.txt
    python results/models/mixture_variances.py optdigits 64 2 8 > results/models/mixture_variances_optdigits.txt
"""

import math
import sys

from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory

data, rounds, repeat, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
config = SimulationConfig.from_settings(data=data, model="pc", rc_converged=False, rounds=rounds)
rep = prepare_repeat(load_for(config), config, repeat)
model = rep.split.model
engine, _ = make_engine(rep, config, network_factory(config.topology, math.inf))
for r in range(1, rounds + 1):
    engine.step()
    if r % every == 0:
        counts, var = model.table(engine.stats)[..., 0], model.theta(engine.stats)["var"]
        error = rep.errors(engine.stats[rep.eval_nodes])[1]
        ess = model.ess(engine.stats)
        print(r, f"err {error.mean():.3f} min count {counts.min():.3f} neg counts {(counts < 0).sum()} min var {var.min():.2e} "
              f"n var<1e-3 {(var < 1e-3).sum()} ess {ess.min():.0f}-{ess.max():.0f}")
