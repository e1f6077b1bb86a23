"""Seeded synthetic CSV data sets of the kinds the bundled ones do not cover (issue 31), for ``crc --data FILE
--label class``. Each has 4,000 instances: the default setting's 50 x 50 training pool and a test set of 1,000
(``--test-size 0.25``).

- ``sparse-binary``: 1,500 binary features (mean rate of a 1 about 0.04), 3 classes; each class shifts the
  log-odds of a random 10 % of the features by N(0, 1.5^2).
- ``categorical``: 180 features of 4 values each (value probabilities Dirichlet(0.5): many rare values), 3
  classes; each class mixes fresh probabilities (weight 0.15) into a random 30 % of the features.
- ``rare-class``: 10 continuous and 10 categorical (4 values) features, 4 classes of 55 %, 30 %, 15 % and 16
  instances (about 10 in the training pool); continuous class means N(0, 0.5^2); each class redraws the value
  probabilities of a random 20 % of the categorical features.

    python results/acceleration/synthetic.py   # writes results/acceleration/data/<name>.csv.gz
"""

import gzip
import io
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "data"
SIZE = 4000
SEED = 31


def categorical_values(rng: np.random.Generator, y: np.ndarray, n_classes: int, n_features: int,
                       changed: float, weight: float) -> np.ndarray:
    """(m, n_features) values in 0..3: Dirichlet(0.5) probabilities per feature; for each class a fraction
    ``changed`` of the features mixes in fresh Dirichlet(0.5) probabilities with ``weight``."""
    base = rng.dirichlet(np.full(4, 0.5), size=n_features)
    probs = np.repeat(base[None], n_classes, axis=0)
    for c in range(n_classes):
        picked = rng.random(n_features) < changed
        fresh = rng.dirichlet(np.full(4, 0.5), size=int(picked.sum()))
        probs[c, picked] = (1.0 - weight) * probs[c, picked] + weight * fresh
    cumulative = probs[y].cumsum(axis=-1)
    return (rng.random((len(y), n_features, 1)) > cumulative).sum(axis=-1)


def sparse_binary(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(3, size=SIZE)
    logit = np.log(rng.beta(0.5, 12.0, size=1500).clip(1e-3, 0.5))
    logit = logit - np.log1p(-np.exp(logit))
    shift = rng.normal(0.0, 1.5, size=(3, 1500)) * (rng.random((3, 1500)) < 0.1)
    p = 1.0 / (1.0 + np.exp(-(logit[None] + shift)))
    return (rng.random((SIZE, 1500)) < p[y]).astype(np.int64), y


def categorical(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(3, size=SIZE)
    return categorical_values(rng, y, 3, 180, 0.3, 0.15), y


def rare_class(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    counts = [int(0.55 * (SIZE - 16)), int(0.30 * (SIZE - 16))]
    counts += [SIZE - 16 - sum(counts), 16]
    y = rng.permutation(np.repeat(np.arange(4), counts))
    means = rng.normal(0.0, 0.5, size=(4, 10))
    continuous = means[y] + rng.standard_normal((SIZE, 10))
    return np.hstack([continuous, categorical_values(rng, y, 4, 10, 0.2, 1.0)]), y


SETS = {"sparse-binary": sparse_binary, "categorical": categorical, "rare-class": rare_class}


def write(name: str, x: np.ndarray, y: np.ndarray) -> None:
    """A gzip CSV file (byte-identical on a rerun) with a header x1..xd,class; integers as integers, reals to 6
    digits."""
    columns = [f"x{j + 1}" for j in range(x.shape[1])] + ["class"]
    fmt = ["%d" if np.issubdtype(x.dtype, np.integer) or np.all(x[:, j] == np.round(x[:, j])) else "%.6f"
           for j in range(x.shape[1])] + ["%d"]
    OUT.mkdir(exist_ok=True)
    with gzip.GzipFile(OUT / f"{name}.csv.gz", "wb", mtime=0) as raw, io.TextIOWrapper(raw) as out:
        out.write(",".join(columns) + "\n")
        np.savetxt(out, np.column_stack([x, y]), fmt=fmt, delimiter=",")


def main() -> None:
    for index, (name, make) in enumerate(SETS.items()):
        x, y = make(np.random.default_rng([SEED, index]))
        write(name, x, y)
        print(name, x.shape, np.bincount(y))


if __name__ == "__main__":
    main()
