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
        """Class log-priors (..., r), means and variances (..., r, dc), category log-probabilities (..., r, C).

        Batched statistics are worked on feature-major, in one (3 dc, ..., r) copy
        of the obs/sum/sumsq blocks, so that every step runs over contiguous memory
        (``mean`` and ``var`` are then (..., r, dc) views of that copy). The same
        arithmetic, operation for operation, as the one-vector form.
        """
        table = self.table(s)
        floor = self._floor(table)
        col = self.layout.columns
        counts = np.maximum(table[..., :, 0], floor[..., 0])
        if table.ndim == 2:
            obs = np.maximum(table[:, col("obs")], floor)
            mean = table[:, col("sum")] / obs
            var = np.maximum(table[:, col("sumsq")] / obs - mean**2, VAR_FLOOR)
        else:
            dc = len(self.continuous)
            moments = _last_to_front(table[..., :, 1:1 + 3 * dc]).copy()  # (3 dc, ..., r)
            obs, mean, var = moments[:dc], moments[dc:2 * dc], moments[2 * dc:]
            np.maximum(obs, floor[..., 0], out=obs)
            np.divide(mean, obs, out=mean)
            np.divide(var, obs, out=var)
            np.subtract(var, np.square(mean), out=var)
            np.copyto(var, VAR_FLOOR, where=var < VAR_FLOOR)  # np.maximum(var, VAR_FLOOR), 2-3x faster against a scalar
            mean, var = _front_to_last(mean), _front_to_last(var)
        return {
            "log_prior": np.log(counts) - np.log(counts.sum(axis=-1, keepdims=True)),
            "mean": mean,
            "var": var,
            "log_cat": self.categorical.log_probs(table[..., :, col("cat")], floor),
        }

    def _variances(self, table: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each class's observed counts, floored at ``floor`` (``_floor(table)``, as ``theta`` floors them), and
        variances of the continuous features (..., r, dc)."""
        obs = np.maximum(table[..., self.layout.columns("obs")], floor)
        mean = table[..., self.layout.columns("sum")] / obs
        return obs, table[..., self.layout.columns("sumsq")] / obs - mean**2

    def keep_variances(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        """Raise each ``sumsq`` so that its variance is at least ``fraction`` times the reference's (and the floor);
        a feature whose observed count is at the floor (a class the peers have hardly seen) is left as it is."""
        table, reference = self.table(stats).copy(), self.table(reference)
        floor = self._floor(table)
        obs, variance = self._variances(table, floor)
        wanted = np.maximum(fraction * self._variances(reference, self._floor(reference))[1], VAR_FLOOR)
        seen = table[..., self.layout.columns("obs")] > floor
        sumsq = table[..., self.layout.columns("sumsq")]
        np.add(sumsq, np.where(seen, obs * np.maximum(wanted - variance, 0.0), 0.0), out=sumsq)
        return table.reshape(stats.shape)

    def keep_leaves(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        """What a circuit keeps of its leaves (``MixtureCircuit``, ``RegionGraphCircuit``): ``keep_variances``, and
        every category count at least ``fraction`` times the reference's. Exact diffusion's correction drove a
        mixture's category counts below zero (floored by ``theta``) on ``marketing``, whose peers then never agreed
        (gap +0.020 with the variance rule alone, +0.007 with both; naive Bayes itself reaches RC there without it)."""
        table = self.table(self.keep_variances(stats, reference, fraction)).copy()
        categories = self.layout.columns("cat")
        np.maximum(table[..., categories], fraction * self.table(reference)[..., categories], out=table[..., categories])
        return table.reshape(stats.shape)

    def natural(self, theta: dict) -> np.ndarray:
        """Natural parameters (..., r, k); batched, a view of a feature-major (k, ..., r) array filled block by
        block with the one-vector form's operations."""
        log_prior, mean, var = theta["log_prior"], theta["mean"], theta["var"]
        if log_prior.ndim == 1:
            return np.concatenate([log_prior[:, None], -0.5 * (LOG_2PI + np.log(var)) - mean**2 / (2 * var), mean / var,
                                   -0.5 / var, theta["log_cat"]], axis=-1)
        mean, var = _last_to_front(mean), _last_to_front(var)  # (dc, ..., r)
        dc = len(mean)
        out = np.empty((self.layout.n_columns,) + log_prior.shape)
        out[0] = log_prior
        const = out[1:1 + dc]  # -0.5 (log 2 pi + log var) - mean^2 / (2 var)
        np.log(var, out=const)
        np.add(const, LOG_2PI, out=const)
        np.multiply(const, -0.5, out=const)
        quad = np.square(mean)
        np.divide(quad, np.multiply(var, 2), out=quad)
        np.subtract(const, quad, out=const)
        np.divide(mean, var, out=out[1 + dc:1 + 2 * dc])
        np.divide(-0.5, var, out=out[1 + 2 * dc:1 + 3 * dc])
        out[1 + 3 * dc:] = _last_to_front(theta["log_cat"])
        return _front_to_last(out)

    def record_bound(self, clip: float) -> float:
        """||phi(x)||: the constant, per continuous feature its presence, value and square, one category per
        discrete feature (a missing cell only lowers it); s({x}, u) = u (x) phi(x) has norm ||u|| ||phi(x)||."""
        dc = len(self.continuous)
        return float(np.sqrt(1 + dc * (1 + clip**2 + clip**4) + len(self.categorical.columns)))

    def uniform(self, m0: float) -> np.ndarray:
        """Class counts m0/r; per continuous feature mean 0, variance 1; even category counts."""
        dc = len(self.continuous)
        per_class = m0 / self.n_classes
        row = np.concatenate([[per_class], np.full(dc, per_class), np.zeros(dc), np.full(dc, per_class),
                              self.categorical.uniform(per_class)])
        return np.tile(row, self.n_classes)


def _last_to_front(a: np.ndarray) -> np.ndarray:
    """View of ``a`` with its last axis first (np.moveaxis(a, -1, 0), without its overhead)."""
    return a.transpose((a.ndim - 1,) + tuple(range(a.ndim - 1)))


def _front_to_last(a: np.ndarray) -> np.ndarray:
    """View of ``a`` with its first axis last."""
    return a.transpose(tuple(range(1, a.ndim)) + (0,))
