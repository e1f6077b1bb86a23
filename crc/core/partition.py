"""How the pooled training set is shared out over the nodes (section IV-C of the paper).

Every partition is a list of index arrays into the pooled training set, one
per node, that together use every training instance exactly once. The pooled
set itself stays the same i.i.d. sample whatever the partition, so
centralized ML and RC do not depend on it.
"""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError
from crc.core.schema import Schema

PARTITIONS = ("iid", "covariate", "label", "joint", "dirichlet")
PARTITION_HELP = (
    "iid (random), covariate (sorted by the first principal component, drift in p(x)), "
    "label (sorted by class: nearly every node sees one class, drift in p(y)), "
    "joint (by class, then principal component: drift in p(x, y)), "
    "dirichlet (node class proportions ~ Dirichlet(--alpha))"
)
SINKHORN_ITERATIONS = 200


def local_sizes(total: int, nodes: int, *, skew: float = 0.0, rng: np.random.Generator | None = None) -> np.ndarray:
    """Sizes of the nodes' local sets, summing to ``total``, each at least 1.

    ``skew = 0`` shares as evenly as possible; otherwise the sizes are
    proportional to log-normal weights ``exp(N(0, skew^2))``.
    """
    if nodes < 1 or total < nodes:
        raise CRCError(f"cannot share {total} training instances over {nodes} nodes with at least one each: give at most "
                       f"{total} nodes, or more training instances")
    if skew < 0 or not np.isfinite(skew):
        raise CRCError(f"size skew must be a finite number >= 0, got {skew}")
    if skew == 0:
        return np.array([len(part) for part in np.array_split(np.arange(total), nodes)])
    weights = np.exp(skew * (rng or np.random.default_rng()).standard_normal(nodes))
    spare = total - nodes  # one instance each is reserved, the rest follows the weights
    ideal = spare * weights / weights.sum()
    sizes = np.floor(ideal).astype(np.int64)
    remainder = spare - int(sizes.sum())
    sizes[np.argsort(sizes - ideal, kind="stable")[:remainder]] += 1
    return sizes + 1


def design_matrix(schema: Schema, x: np.ndarray) -> np.ndarray:
    """Standardized continuous columns and one-hot discrete columns; missing cells give 0.

    x : (m, d) encoded and standardized -> (m, k) float64.
    """
    columns = []
    for j, feature in enumerate(schema.features):
        column = x[:, j]
        if j in schema.continuous:
            columns.append(np.nan_to_num(column, nan=0.0)[:, None])
        else:
            columns.append((column[:, None] == np.arange(len(feature.categories))).astype(np.float64))
    return np.hstack(columns) if columns else np.zeros((len(x), 0))


def first_principal_component(design: np.ndarray) -> np.ndarray:
    """Scores (m,) on the first principal component, its sign fixed by the largest loading."""
    centred = design - design.mean(axis=0)
    if centred.shape[1] == 0 or not np.any(centred):
        return np.zeros(len(design))
    _, vectors = np.linalg.eigh(centred.T @ centred)  # (k, k): cheaper and sturdier than an SVD of (m, k)
    loading = vectors[:, -1]
    return centred @ (loading * np.sign(loading[np.argmax(np.abs(loading))]))


def _cut(order: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    return np.split(order, np.cumsum(sizes)[:-1])


def _dirichlet_counts(class_counts: np.ndarray, sizes: np.ndarray, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Integer (nodes, classes) counts with the given margins, near Dirichlet proportions.

    Each node draws class proportions from Dirichlet(alpha); Sinkhorn scaling
    then fits them to the node sizes and the pooled class counts, and a greedy
    rounding keeps both margins exact.
    """
    proportions = rng.dirichlet(np.full(len(class_counts), alpha), size=len(sizes)) + 1e-12
    target = proportions * sizes[:, None]
    for _ in range(SINKHORN_ITERATIONS):
        target *= (class_counts / np.maximum(target.sum(axis=0), 1e-300))[None, :]
        target *= (sizes / np.maximum(target.sum(axis=1), 1e-300))[:, None]
    counts = np.zeros_like(target, dtype=np.int64)
    left = class_counts.astype(np.int64).copy()
    for v, size in enumerate(sizes):
        take = np.minimum(np.floor(target[v]).astype(np.int64), left)
        missing = int(size - take.sum())
        for k in np.argsort(take - target[v], kind="stable"):  # largest shortfall first
            if missing == 0:
                break
            extra = min(missing, int(left[k] - take[k]))
            take[k] += extra
            missing -= extra
        counts[v], left = take, left - take
    return counts


def partition(kind: str, y: np.ndarray, sizes: np.ndarray, *, design: np.ndarray | None = None,
              alpha: float = 1.0, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Index arrays (one per node, of the given sizes) into a pooled training set.

    y : (m,) class codes of the pooled training set, in its (random) order.
    sizes : (n,) local sizes summing to m.
    design : (m, k) numeric features (see ``design_matrix``), needed by
        ``covariate`` and ``joint``.
    alpha : Dirichlet concentration of ``dirichlet`` (small = skewed).
    """
    m, sizes = len(y), np.asarray(sizes, dtype=np.int64)
    if int(sizes.sum()) != m or np.any(sizes < 1):
        raise CRCError(f"local sizes must be >= 1 and sum to the {m} training instances, got a sum of {int(sizes.sum())}")
    if kind == "iid":
        return _cut(np.arange(m), sizes)
    if kind in ("covariate", "joint"):
        if design is None:
            raise CRCError(f"the {kind} partition needs the training features")
        score = first_principal_component(design)
        order = np.argsort(score, kind="stable") if kind == "covariate" else np.lexsort((score, y))
        return _cut(order, sizes)
    if kind == "label":
        return _cut(np.argsort(y, kind="stable"), sizes)
    if kind == "dirichlet":
        if not (alpha > 0 and np.isfinite(alpha)):
            raise CRCError(f"--alpha must be a positive number, got {alpha}")
        rng = rng or np.random.default_rng()
        classes = np.unique(y)
        counts = _dirichlet_counts(np.array([np.sum(y == k) for k in classes]), sizes, alpha, rng)
        pools = [np.flatnonzero(y == k) for k in classes]
        parts = []
        for row in counts:
            taken = [pools[c][:row[c]] for c in range(len(classes))]
            pools = [pools[c][row[c]:] for c in range(len(classes))]
            parts.append(np.sort(np.concatenate(taken)))
        return parts
    raise CRCError(f"unknown partition {kind!r}; choose one of: {', '.join(PARTITIONS)}")
