"""Issue 32's gap decomposition of CRC for one data set and model, in the default setting.

    python results/models/decompose.py DATA MODEL [repeats=3] [nokeep=1] [variants=accelerated,paper+start:local,...]

MODEL: nb, qda, pcK (mixture of K products), rg (the default region graph). A variant is an algorithm and settings
joined by + as name:value; shrink:λ starts from λ x the algorithm's start + (1 - λ) x uniform(m0). Per repeat it
prints centralized RC's test error from the ML statistics (64 iterations) and from the uniform start, then per
variant CRC's peers (mean, std, worst), the error of the network mean of the final statistics, and that of each peer's
closed-neighbourhood average. nokeep=1: QDA without keep_variances (the code before issue 32's fix)."""
import math
import sys
import time

import numpy as np

from crc.core.calibration import rc
from crc.core.threads import single_threaded_blas
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory


def errors(rep, stats):
    """The test errors of ``stats`` (k, size) or (size,) on the repeat ``rep``'s test split."""
    return rep.errors(np.atleast_2d(stats))[1]


data, model = sys.argv[1], sys.argv[2]
extra = dict(a.split("=") for a in sys.argv[3:])
repeats = int(extra.pop("repeats", 1))
if extra.pop("nokeep", None):
    from crc.core.models.base import GenerativeModel
    from crc.core.models.qda import QDA
    QDA.keep_variances = GenerativeModel.keep_variances
variants = extra.pop("variants", "accelerated,paper").split(",")
structure = {}
if model == "rg":
    model, structure = "pc", {"structure": "region-graph", "depth": 2, "repetitions": 2, "sums": 2}
elif model.startswith("pc"):
    structure = {"components": int(model[2:] or 2)}
    model = "pc"
for rep_i in range(repeats):
    base = SimulationConfig.from_settings(data=data, model=model, rc_converged=False, repeats=repeats, **structure)
    ds = load_for(base)
    rep = prepare_repeat(ds, base, rep_i)
    sp_ = rep.split
    m = sp_.model
    with single_threaded_blas():
        ml = m.fit_ml(sp_.phi_train, sp_.y_train)
        rcs = rc(m, sp_.phi_train, sp_.y_train, lr=base.lr, init=ml, iterations=base.rc_iterations).stats
        uni = m.uniform(float(m.ess(ml)))
        rcu = rc(m, sp_.phi_train, sp_.y_train, lr=base.lr, init=uni, iterations=base.rc_iterations).stats
    rc_error = errors(rep, rcs)[0]
    print(f"{data} {model}{structure} rep {rep_i}: ML {errors(rep, ml)[0]:.3f}  RC(ML start) {rc_error:.3f}  "
          f"RC(uniform start) {errors(rep, rcu)[0]:.3f}")
    for v in variants:
        opts = dict(kv.split(":") for kv in v.split("+")[1:])
        name = v.split("+")[0]
        shrink = float(opts.pop("shrink")) if "shrink" in opts else None
        conv = {k: (int(x) if x.isdigit() else x) for k, x in opts.items()}
        config = SimulationConfig.from_settings(data=data, model=model, rc_converged=False, repeats=repeats, algorithm=name,
                                                **structure, **conv)
        net = network_factory(config.topology, config.period or math.inf)
        t = time.time()
        engine, _ = make_engine(rep, config, net)
        if shrink is not None:  # the start shrunk toward uniform(m0): shrink x start + (1 - shrink) x uniform
            engine.stats = shrink * engine.stats + (1 - shrink) * m.uniform(engine.ess)[None, :]
        final = engine.run(config.rounds)
        e = rep.errors(final[rep.eval_nodes])[1]
        mean = final.mean(axis=0)
        me = errors(rep, mean)[0]
        ea = rep.errors(engine.aggregate()[rep.eval_nodes])[1]
        print(f"  {v:40s} CRC mean {e.mean():.3f} (std {e.std():.3f}, worst {e.max():.3f}) gap {e.mean()-rc_error:+.3f} "
              f"| net-mean stats {me:.3f} | nbhd avg {ea.mean():.3f} ({time.time()-t:.1f}s)")
