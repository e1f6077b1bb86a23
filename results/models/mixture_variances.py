"""Issue 32: letter, the mixture circuit (K=2) under the accelerated algorithm for 128 rounds, repeat 0: test error,
smallest component count and the Gaussian leaves whose variance collapsed, every 16 rounds. Output: mixture_variances.txt."""
import math, numpy as np
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import prepare_repeat, load_for
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory
config = SimulationConfig.from_settings(data="letter", model="pc", rc_converged=False, rounds=128)
ds = load_for(config); rep = prepare_repeat(ds, config, 0); m = rep.split.model
net = network_factory(config.topology, math.inf)
engine, _ = make_engine(rep, config, net)
for r in range(1, 129):
    engine.step()
    if r % 16 == 0:
        t = m.table(engine.stats); cnt = t[..., 0]
        th = m.theta(engine.stats)
        e = rep.errors(engine.stats[rep.eval_nodes])[1]
        var = th["var"]
        print(r, f"err {e.mean():.3f} min count {cnt.min():.3f} neg counts {(cnt<0).sum()} min var {var.min():.2e} n var<1e-3 {(var<1e-3).sum()} ess {m.ess(engine.stats).min():.0f}-{m.ess(engine.stats).max():.0f}")
