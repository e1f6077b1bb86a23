"""Naive Bayes with Gaussian continuous and categorical discrete features (paper, appendix A)."""

from __future__ import annotations

import numpy as np

from crc.core.models.base import LinearFamilyModel
from crc.core.models.categorical import CategoricalPart
from crc.core.models.layout import Layout
from crc.core.numeric import LOG_2PI

VAR_FLOOR = 1e-9
"""Smallest class-conditional variance, in standardized units."""


class NaiveBayes(LinearFamilyModel):
    """Naive Bayes as statistics.

    Layout: one row per class with column blocks

    ``count`` (1)   class count;
    ``obs`` (dc)    per continuous feature, the count of instances where it is present;
    ``sum`` (dc)    sum of its values;
    ``sumsq`` (dc)  sum of its squared values;
    ``cat`` (C)     per discrete feature, the count of each category.

    A missing continuous cell contributes 0 to ``obs``, ``sum`` and ``sumsq``; a
    missing discrete cell contributes no category count. The log-joint then
    omits that feature, which is exact marginalisation.
    """

    kind = "nb"
    summary = "naive Bayes (Gaussian continuous, categorical discrete features)"

    def _layout(self) -> Layout:
        self.continuous = self.schema.continuous
        self.categorical = CategoricalPart(self.schema)
        dc = len(self.continuous)
        return Layout(self.n_classes, (("count", 1), ("obs", dc), ("sum", dc), ("sumsq", dc), ("cat", self.categorical.width)))

    def features(self, x: np.ndarray) -> np.ndarray:
        values = np.asarray(x, dtype=np.float64)[:, self.continuous]
        present = ~np.isnan(values)
        values = np.where(present, values, 0.0)
        ones = np.ones((values.shape[0], 1))
        return np.concatenate([ones, present.astype(np.float64), values, values**2, self.categorical.one_hot(x)], axis=1)

    def theta(self, s: np.ndarray) -> dict:
        """Class log-priors (..., r), means and variances (..., r, dc), category log-probabilities (..., r, C)."""
        table = self.table(s)
        floor = self._floor(table)
        col = self.layout.columns
        counts = np.maximum(table[..., :, 0], floor[..., 0])
        obs = np.maximum(table[..., :, col("obs")], floor)
        mean = table[..., :, col("sum")] / obs
        var = np.maximum(table[..., :, col("sumsq")] / obs - mean**2, VAR_FLOOR)
        return {
            "log_prior": np.log(counts) - np.log(counts.sum(axis=-1, keepdims=True)),
            "mean": mean,
            "var": var,
            "log_cat": self.categorical.log_probs(table[..., :, col("cat")], floor),
        }

    def natural(self, theta: dict) -> np.ndarray:
        mean, var = theta["mean"], theta["var"]
        return np.concatenate(
            [
                theta["log_prior"][..., None],
                -0.5 * (LOG_2PI + np.log(var)) - mean**2 / (2 * var),
                mean / var,
                -0.5 / var,
                theta["log_cat"],
            ],
            axis=-1,
        )

    def uniform(self, m0: float) -> np.ndarray:
        """Class counts m0/r; per continuous feature mean 0, variance 1; even category counts."""
        dc = len(self.continuous)
        per_class = m0 / self.n_classes
        row = np.concatenate([[per_class], np.full(dc, per_class), np.zeros(dc), np.full(dc, per_class),
                              self.categorical.uniform(per_class)])
        return np.tile(row, self.n_classes)
