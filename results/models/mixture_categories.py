"""Issue 32: the mixture circuit (K=2) under the accelerated algorithm on a data set with discrete features: test
error of the peers and of the network mean of their statistics, and the category counts below zero, every EVERY
rounds of one repeat. variance-only=1 keeps the leaves' variance rule only (the code before the category rule).

    python results/models/mixture_categories.py marketing 64 1 8 variance-only=1 > results/models/mixture_categories_before.txt
    python results/models/mixture_categories.py marketing 64 1 8 > results/models/mixture_categories.txt
"""

import sys

from mixture_trace import every_rounds

from crc.core.models.naive_bayes import NaiveBayes

data, rounds, repeat, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if "variance-only=1" in sys.argv[5:]:
    NaiveBayes.keep_leaves = NaiveBayes.keep_variances
for r, rep, engine in every_rounds(data, rounds, repeat, every):
    model = rep.split.model
    categories = model.table(engine.stats)[..., model.layout.columns("cat")]
    errors = rep.errors(engine.stats[rep.eval_nodes])[1]
    mean = rep.errors(engine.stats.mean(axis=0, keepdims=True))[1][0]
    print(r, f"err {errors.mean():.3f} std {errors.std():.3f} network mean {mean:.3f} "
          f"min category count {categories.min():.2f} below zero {(categories < 0).mean():.2%}")
