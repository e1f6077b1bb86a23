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

    def _symmetric(self, packed: np.ndarray) -> np.ndarray:
        """Upper-triangle vectors (..., dc(dc+1)/2) -> symmetric matrices (..., dc, dc)."""
        dc = len(self.continuous)
        full = np.zeros(packed.shape[:-1] + (dc, dc))
        full[..., self.upper[0], self.upper[1]] = packed
        full[..., self.upper[1], self.upper[0]] = packed
        return full

    def theta(self, s: np.ndarray) -> dict:
        """Class log-priors (..., r), means (..., r, dc), covariances, precisions (..., r, dc, dc),
        log-determinants (..., r) and category log-probabilities (..., r, C).

        The covariance's eigenvalues are floored at EIG_FLOOR; the statistics are not changed.
        """
        table = self.table(s)
        floor = self._floor(table)
        col = self.layout.columns
        counts = np.maximum(table[..., :, 0], floor[..., 0])
        mean = table[..., :, col("sum")] / counts[..., None]
        cov = self._symmetric(table[..., :, col("outer")]) / counts[..., None, None] - mean[..., :, None] * mean[..., None, :]
        eigval, eigvec = np.linalg.eigh(cov)
        eigval = np.maximum(eigval, EIG_FLOOR)
        return {
            "log_prior": np.log(counts) - np.log(counts.sum(axis=-1, keepdims=True)),
            "mean": mean,
            "cov": (eigvec * eigval[..., None, :]) @ np.swapaxes(eigvec, -1, -2),
            "precision": (eigvec / eigval[..., None, :]) @ np.swapaxes(eigvec, -1, -2),
            "logdet": np.log(eigval).sum(axis=-1),
            "log_cat": self.categorical.log_probs(table[..., :, col("cat")], floor),
        }

    def natural(self, theta: dict) -> np.ndarray:
        mean, precision = theta["mean"], theta["precision"]
        linear = np.matmul(precision, mean[..., None])[..., 0]
        dc = len(self.continuous)
        const = theta["log_prior"] - 0.5 * ((linear * mean).sum(axis=-1) + theta["logdet"] + dc * LOG_2PI)
        quad = -precision[..., self.upper[0], self.upper[1]]
        quad = np.where(self.upper[0] == self.upper[1], 0.5 * quad, quad)
        return np.concatenate([const[..., None], linear, quad, theta["log_cat"]], axis=-1)

    def uniform(self, m0: float) -> np.ndarray:
        """Class counts m0/r; per class mean 0 and identity covariance; even category counts."""
        per_class = m0 / self.n_classes
        outer = np.where(self.upper[0] == self.upper[1], per_class, 0.0)
        row = np.concatenate([[per_class], np.zeros(len(self.continuous)), outer, self.categorical.uniform(per_class)])
        return np.tile(row, self.n_classes)
