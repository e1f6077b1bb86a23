"""Quadratic discriminant analysis: full-covariance Gaussian classes."""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.base import LinearFamilyModel
from crc.core.models.categorical import CategoricalPart
from crc.core.models.layout import Layout
from crc.core.numeric import LOG_2PI

EIG_FLOOR = 1e-9
"""Smallest eigenvalue of a class covariance, in standardized units."""


class QDA(LinearFamilyModel):
    """QDA as statistics.

    The continuous features of class ``y`` follow one Gaussian with a full
    covariance. Discrete features, when the schema has any, are categorical and
    independent of the continuous ones and of each other given the class (the
    naive-Bayes treatment), so QDA on a purely discrete schema is naive Bayes.

    Missing values: a missing discrete cell is marginalised exactly (its
    category counts are untouched). A missing *continuous* cell is rejected
    with a CRCError: the exact marginal of a full-covariance Gaussian needs a
    per-pattern sub-covariance, which these additive statistics do not carry.

    Layout: one row per class with column blocks ``count`` (1), ``sum`` (dc),
    ``outer`` (dc (dc + 1) / 2: the upper triangle of sum x x^T, row-major)
    and ``cat`` (C).
    """

    kind = "qda"
    summary = "QDA (one full-covariance Gaussian per class; discrete features categorical)"

    def _layout(self) -> Layout:
        self.continuous = self.schema.continuous
        self.categorical = CategoricalPart(self.schema)
        dc = len(self.continuous)
        self.upper = np.triu_indices(dc)
        packed = np.empty((dc, dc), dtype=np.intp)  # the upper-triangle position of every entry (i, j)
        packed[self.upper[0], self.upper[1]] = packed[self.upper[1], self.upper[0]] = np.arange(len(self.upper[0]))
        self._packed_index = packed.reshape(-1)
        self._upper_flat = self.upper[0] * dc + self.upper[1]
        self._diagonal = np.flatnonzero(self.upper[0] == self.upper[1])
        return Layout(self.n_classes, (("count", 1), ("sum", dc), ("outer", dc * (dc + 1) // 2), ("cat", self.categorical.width)))

    def features(self, x: np.ndarray) -> np.ndarray:
        values = np.asarray(x, dtype=np.float64)[:, self.continuous]
        holes = np.isnan(values)
        if holes.any():
            j = int(np.argmax(holes.any(axis=0)))
            name = self.schema.features[self.continuous[j]].name
            raise CRCError(
                f"QDA does not handle missing continuous values ({int(holes.sum())} missing cells, "
                f"first in feature {name!r}); use the naive Bayes model or impute them"
            )
        outer = (values[:, :, None] * values[:, None, :])[:, self.upper[0], self.upper[1]]
        ones = np.ones((values.shape[0], 1))
        return np.concatenate([ones, values, outer, self.categorical.one_hot(x)], axis=1)

    def record_bound(self, clip: float) -> float:
        """||phi(x)||: the constant, dc values, dc (dc + 1) / 2 products x_i x_j (each at most clip^2), one category
        per discrete feature; s({x}, u) = u (x) phi(x) has norm ||u|| ||phi(x)||."""
        dc = len(self.continuous)
        return float(np.sqrt(1 + dc * clip**2 + dc * (dc + 1) // 2 * clip**4 + len(self.categorical.columns)))

    def _symmetric(self, packed: np.ndarray) -> np.ndarray:
        """Upper-triangle vectors (..., dc(dc+1)/2) -> symmetric matrices (..., dc, dc)."""
        dc = len(self.continuous)
        return np.take(packed, self._packed_index, axis=-1).reshape(packed.shape[:-1] + (dc, dc))

    def theta(self, s: np.ndarray) -> dict:
        """Class log-priors (..., r), means (..., r, dc), precisions (..., r, dc, dc), log-determinants (..., r)
        and category log-probabilities (..., r, C).

        The covariance's eigenvalues are floored at EIG_FLOOR; the statistics are not changed.
        """
        table = self.table(s)
        floor = self._floor(table)
        col = self.layout.columns
        counts = np.maximum(table[..., :, 0], floor[..., 0])
        mean = table[..., :, col("sum")] / counts[..., None]
        cov = self._symmetric(table[..., :, col("outer")])
        cov /= counts[..., None, None]
        cov -= mean[..., :, None] * mean[..., None, :]
        precision, logdet = _precision_and_logdet(cov)
        return {
            "log_prior": np.log(counts) - np.log(counts.sum(axis=-1, keepdims=True)),
            "mean": mean,
            "precision": precision,
            "logdet": logdet,
            "log_cat": self.categorical.log_probs(table[..., :, col("cat")], floor),
        }

    def natural(self, theta: dict) -> np.ndarray:
        """Natural parameters (..., r, k), written block by block into one array."""
        mean, precision = theta["mean"], theta["precision"]
        col = self.layout.columns
        dc = len(self.continuous)
        eta = np.empty(mean.shape[:-1] + (self.layout.n_columns,))
        linear = np.matmul(precision, mean[..., None])[..., 0]
        eta[..., col("sum")] = linear
        eta[..., 0] = theta["log_prior"] - 0.5 * ((linear * mean).sum(axis=-1) + theta["logdet"] + dc * LOG_2PI)
        quad = eta[..., col("outer")]
        np.negative(np.take(precision.reshape(precision.shape[:-2] + (-1,)), self._upper_flat, axis=-1), out=quad)
        quad[..., self._diagonal] *= 0.5
        eta[..., col("cat")] = theta["log_cat"]
        return eta

    def uniform(self, m0: float) -> np.ndarray:
        """Class counts m0/r; per class mean 0 and identity covariance; even category counts."""
        per_class = m0 / self.n_classes
        outer = np.where(self.upper[0] == self.upper[1], per_class, 0.0)
        row = np.concatenate([[per_class], np.zeros(len(self.continuous)), outer, self.categorical.uniform(per_class)])
        return np.tile(row, self.n_classes)


FLOOR_TRACE = 1 / EIG_FLOOR
"""A precision of trace below this has every eigenvalue of its covariance above EIG_FLOOR (trace P >= 1 / lambda_min)."""


def _precision_and_logdet(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Precisions (..., d, d) and log-determinants (...) of covariances (..., d, d) with eigenvalues floored at EIG_FLOOR.

    A batched Cholesky factorisation L L^T = cov gives P = L^-T L^-1 and log det = 2 sum log diag L, exact where
    no eigenvalue is at the floor, which trace P < FLOOR_TRACE guarantees. The other matrices, and those whose
    factorisation fails (not positive definite), take the eigendecomposition, about ten times slower. A matrix
    with a diagonal entry below EIG_FLOOR (a feature constant within its class) goes there at once, all such
    matrices in one batched call: its smallest eigenvalue is at most that entry, so the floor applies, and
    leaving it out keeps the others' batched factorisation from failing. Each matrix's path depends on that
    matrix only, so its result does not depend on the batch it came in.
    """
    degenerate = np.diagonal(cov, axis1=-2, axis2=-1).min(axis=-1, initial=np.inf) < EIG_FLOOR  # none without features
    if np.any(degenerate):
        if cov.ndim == 2:
            return _floored_eigen(cov)
        precision, logdet = np.empty_like(cov), np.empty(cov.shape[:-2])
        precision[degenerate], logdet[degenerate] = _floored_eigen(cov[degenerate])
        if not degenerate.all():
            precision[~degenerate], logdet[~degenerate] = _precision_and_logdet(cov[~degenerate])
        return precision, logdet
    try:
        factor = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        if cov.size == cov.shape[-1] ** 2:  # a single matrix
            return _floored_eigen(cov)
        return _one_by_one(cov)
    inverse = _lower_inverse(factor)
    precision = np.matmul(np.swapaxes(inverse, -1, -2), inverse)
    logdet = 2 * np.log(np.diagonal(factor, axis1=-2, axis2=-1)).sum(axis=-1)
    floored = ~(np.trace(precision, axis1=-2, axis2=-1) < FLOOR_TRACE)
    if floored.any():
        precision[floored], logdet[floored] = _floored_eigen(cov[floored])
    return precision, logdet


def _one_by_one(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_precision_and_logdet`` of each matrix of a batch (..., d, d) whose batched factorisation failed."""
    d = cov.shape[-1]
    flat = cov.reshape(-1, d, d)
    precision, logdet = np.empty_like(flat), np.empty(len(flat))
    for i in range(len(flat)):
        one_precision, one_logdet = _precision_and_logdet(flat[i : i + 1])
        precision[i], logdet[i] = one_precision[0], one_logdet[0]
    return precision.reshape(cov.shape), logdet.reshape(cov.shape[:-2])


TRIANGULAR_BLOCK = 16
"""Order up to which ``_lower_inverse`` inverts a block directly (LU); above, it splits it in two."""


def _lower_inverse(lower: np.ndarray) -> np.ndarray:
    """Inverses (..., d, d) of invertible lower-triangular matrices, by halves: [[A, 0], [C, B]]^-1 is
    [[A^-1, 0], [-B^-1 C A^-1, B^-1]]. About three times faster than a general inverse at d = 51."""
    d = lower.shape[-1]
    if d <= TRIANGULAR_BLOCK:
        return np.linalg.inv(lower)
    h = d // 2
    first, second = _lower_inverse(lower[..., :h, :h]), _lower_inverse(lower[..., h:, h:])
    inverse = np.zeros_like(lower)
    inverse[..., :h, :h] = first
    inverse[..., h:, h:] = second
    inverse[..., h:, :h] = -np.matmul(second, np.matmul(lower[..., h:, :h], first))
    return inverse


def _floored_eigen(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_precision_and_logdet`` through the eigendecomposition, eigenvalues floored at EIG_FLOOR."""
    eigval, eigvec = np.linalg.eigh(cov)
    eigval = np.maximum(eigval, EIG_FLOOR)
    return (eigvec / eigval[..., None, :]) @ np.swapaxes(eigvec, -1, -2), np.log(eigval).sum(axis=-1)
