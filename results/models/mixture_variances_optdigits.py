"""Issue 32: optdigits, the mixture circuit (K=2) under the accelerated algorithm for 64 rounds, repeat 2: test error,
smallest component count and the Gaussian leaves whose variance collapsed, every 8 rounds. Output: mixture_variances_optdigits.txt."""
import math, numpy as np
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import prepare_repeat, load_for
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory
config = SimulationConfig.from_settings(data="optdigits", model="pc", rc_converged=False, rounds=64)
ds = load_for(config); rep = prepare_repeat(ds, config, 2); m = rep.split.model
net = network_factory(config.topology, math.inf)
engine, _ = make_engine(rep, config, net)
for r in range(1, 65):
    engine.step()
    if r % 8 == 0:
        t = m.table(engine.stats); cnt = t[..., 0]
        th = m.theta(engine.stats)
        e = rep.errors(engine.stats[rep.eval_nodes])[1]
        var = th["var"]
        print(r, f"err {e.mean():.3f} min count {cnt.min():.3f} neg counts {(cnt<0).sum()} min var {var.min():.2e} n var<1e-3 {(var<1e-3).sum()} ess {m.ess(engine.stats).min():.0f}-{m.ess(engine.stats).max():.0f}")
