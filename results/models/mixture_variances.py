"""Issue 32: the mixture circuit (K=2) under the accelerated algorithm: test error, smallest component count and the
Gaussian leaves whose variance collapsed, every EVERY rounds of one repeat.

    python results/models/mixture_variances.py letter 128 0 16 > results/models/mixture_variances.txt
    python results/models/mixture_variances.py optdigits 64 2 8 > results/models/mixture_variances_optdigits.txt
"""

import sys

from mixture_trace import every_rounds

data, rounds, repeat, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for r, rep, engine in every_rounds(data, rounds, repeat, every):
    model = rep.split.model
    counts, var = model.table(engine.stats)[..., 0], model.theta(engine.stats)["var"]
    error = rep.errors(engine.stats[rep.eval_nodes])[1]
    ess = model.ess(engine.stats)
    print(r, f"err {error.mean():.3f} min count {counts.min():.3f} neg counts {(counts < 0).sum()} min var {var.min():.2e} "
          f"n var<1e-3 {(var < 1e-3).sum()} ess {ess.min():.0f}-{ess.max():.0f}")
