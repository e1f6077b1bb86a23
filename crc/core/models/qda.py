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
                f"QDA does not handle missing continuous values ({int(holes.sum())} missing (NaN) cells, "
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

        The covariance's eigenvalues are floored at EIG_FLOOR, and a feature whose variance is below it is
        independent of the others within the class (``_precision_and_logdet``); the statistics are not changed.
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

    def _moments(self, table: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each class's count (floored as ``theta`` floors it), mean (..., r, dc) and covariance (..., r, dc, dc)."""
        col = self.layout.columns
        counts = np.maximum(table[..., :, 0], floor[..., 0])
        mean = table[..., :, col("sum")] / counts[..., None]
        cov = self._symmetric(table[..., :, col("outer")]) / counts[..., None, None]
        return counts, mean, cov - mean[..., :, None] * mean[..., None, :]

    def keep_variances(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        """Raise each class covariance C so that C >= ``fraction`` R in the positive semi-definite order, R the
        reference's covariance (eigenvalues floored at EIG_FLOOR): in R's whitened coordinates every eigenvalue of
        R^-1/2 C R^-1/2 below ``fraction`` is raised to it (naive Bayes' rule, ``NaiveBayes.keep_variances``, for a
        full covariance). Only ``outer`` changes, by count x (C' - C), so the mean and the count stay; a class whose
        count is at the floor, or whose covariance already passes, is left as it is.

        Exact diffusion's correction ``ψ + x - ψ_previous`` is applied to raw moments: it can leave a second moment
        that is not a valid one for its mean (a covariance with negative eigenvalues), which ``theta`` floors to a
        near-singular one. On ``letter`` (26 classes, 16 features, about two instances per class per peer) that
        made the accelerated algorithm's QDA worse than the paper's."""
        dc = len(self.continuous)
        if dc == 0:
            return stats
        table, reference = self.table(stats).copy(), self.table(reference)
        floor = self._floor(table)
        counts, _, cov = self._moments(table, floor)
        ref_cov = self._moments(reference, self._floor(reference))[2]
        raise_ = ~_positive_definite(cov - fraction * ref_cov) & (table[..., :, 0] > floor[..., 0])
        if not raise_.any():
            return stats
        cov, ref_cov, counts = cov[raise_], ref_cov[raise_], counts[raise_]
        values, vectors = np.linalg.eigh(ref_cov)
        scale = np.sqrt(np.maximum(values, EIG_FLOOR))
        half = (vectors * scale[..., None, :]) @ np.swapaxes(vectors, -1, -2)
        inverse_half = (vectors / scale[..., None, :]) @ np.swapaxes(vectors, -1, -2)
        whitened = inverse_half @ cov @ inverse_half
        low, rotation = np.linalg.eigh(0.5 * (whitened + np.swapaxes(whitened, -1, -2)))
        change = (rotation * np.maximum(fraction - low, 0.0)[..., None, :]) @ np.swapaxes(rotation, -1, -2)
        added = half @ change @ half * counts[..., None, None]
        table[..., self.layout.columns("outer")][raise_] += added[..., self.upper[0], self.upper[1]]
        return table.reshape(stats.shape)

    def uniform(self, m0: float) -> np.ndarray:
        """Class counts m0/r; per class mean 0 and identity covariance; even category counts."""
        per_class = m0 / self.n_classes
        outer = np.where(self.upper[0] == self.upper[1], per_class, 0.0)
        row = np.concatenate([[per_class], np.zeros(len(self.continuous)), outer, self.categorical.uniform(per_class)])
        return np.tile(row, self.n_classes)


def _positive_definite(matrices: np.ndarray) -> np.ndarray:
    """Whether each symmetric matrix (..., d, d) has a Cholesky factor, shape (...)."""
    return _cholesky_each(matrices.reshape((-1,) + matrices.shape[-2:]))[1].reshape(matrices.shape[:-2])


FLOOR_TRACE = 1 / EIG_FLOOR
"""A precision of trace below this has every eigenvalue of its covariance above EIG_FLOOR (trace P >= 1 / lambda_min)."""


def _precision_and_logdet(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Precisions (..., d, d) and log-determinants (...) of covariances (..., d, d) with eigenvalues floored at EIG_FLOOR.

    A feature whose variance is below EIG_FLOOR (constant within its class, up to rounding) is independent of the
    others with variance EIG_FLOOR: its covariances, at most sqrt(EIG_FLOOR var_j) in a positive semi-definite
    matrix and rounding noise when the feature is constant, are dropped (the other features' precisions change
    only through them). Its own eigenvalue would be floored anyway; dropping them leaves the rest to the Cholesky
    factorisation (``_factored``) instead of a ten times slower eigendecomposition of the whole matrix (on
    ``optdigits`` seven of ten classes have such a feature). While factorising, the feature stands in with the
    largest remaining variance, so that it does not change the scale, and the accuracy, of an eigendecomposition.
    """
    variances = np.diagonal(cov, axis1=-2, axis2=-1)
    constant = variances < EIG_FLOOR
    if not constant.any():
        return _factored(cov)
    kept = ~constant[..., :, None] & ~constant[..., None, :]
    largest = np.where(constant, 0.0, variances).max(axis=-1)
    stand_in = np.where(largest > 0, largest, 1.0)  # 1 where every feature is constant
    at = np.nonzero(constant)
    diagonal = at + (at[-1],)
    decoupled = np.where(kept, cov, 0.0)
    decoupled[diagonal] = stand_in[at[:-1]]
    precision, logdet = _factored(decoupled)
    precision *= kept  # exact zeros, also where a floored eigendecomposition left rounding noise
    precision[diagonal] = 1 / EIG_FLOOR
    return precision, logdet + constant.sum(axis=-1) * (np.log(EIG_FLOOR) - np.log(stand_in))


LAPACK_LOOP_ORDER = 12
"""From this order on, ``_factored`` calls LAPACK once per matrix; below it, numpy's batched Cholesky
factorisation and inverse cost less per matrix (crossover measured at order 10 to 12)."""


def _factored(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_precision_and_logdet`` of covariances (..., d, d) through their Cholesky factors L L^T = cov:
    P = L^-T L^-1 and log det = 2 sum log diag L, exact where no eigenvalue is at the floor, which trace P <
    FLOOR_TRACE guarantees. Matrices that are not positive definite, or whose trace P is not below it, take the
    floored eigendecomposition. Each matrix's path depends on that matrix only.
    """
    d = cov.shape[-1]
    if d == 0:
        return np.empty_like(cov), np.zeros(cov.shape[:-2])
    flat = cov.reshape(-1, d, d)
    inverse_t, diagonal, factored = (_batched_factors if d < LAPACK_LOOP_ORDER else _looped_factors)(flat)
    precision = np.matmul(inverse_t, np.swapaxes(inverse_t, -1, -2))
    logdet = 2 * np.log(diagonal).sum(axis=-1)
    floored = ~(factored & (np.trace(precision, axis1=-2, axis2=-1) < FLOOR_TRACE))
    if floored.any():
        precision[floored], logdet[floored] = _floored_eigen(flat[floored])
    return precision.reshape(cov.shape), logdet.reshape(cov.shape[:-2])


def _batched_factors(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_looped_factors`` with numpy's batched Cholesky factorisation (``_cholesky_each``) and inverse."""
    lower, factored = _cholesky_each(cov)
    return np.swapaxes(np.linalg.inv(lower), -1, -2), np.diagonal(lower, axis1=-2, axis2=-1), factored


def _cholesky_each(matrices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors L (b, d, d) of symmetric ``matrices`` (b, d, d), the identity where the factorisation fails,
    and whether it succeeded (b,). One batched call; a batch whose factorisation fails is factorised one matrix at a
    time with the same call, which gives the same bits. numpy's batched call cannot say which matrices failed, and
    a mask from a batched ``eigvalsh`` would differ from the factorisation at the margin and cost more (23 ms against
    17 ms for 1300 matrices of order 16, a third of them not positive definite, measured)."""
    factored = np.ones(len(matrices), dtype=bool)
    try:
        return np.linalg.cholesky(matrices), factored
    except np.linalg.LinAlgError:
        pass
    lower = np.empty(matrices.shape)  # C order whatever the matrices': the log-determinants' sums then add in one order
    for i, matrix in enumerate(matrices):
        try:
            lower[i] = np.linalg.cholesky(matrix)
        except np.linalg.LinAlgError:
            lower[i], factored[i] = np.eye(matrices.shape[-1]), False
    return lower, factored


def _looped_factors(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For covariances (b, d, d): (L^-1)^T (b, d, d), diag L (b, d) and whether the factorisation succeeded (b,),
    with one LAPACK potrf and trtri per matrix, in place (numpy's batched calls copy every matrix in and out:
    1.7 to 2.2 times slower for 250 to 500 matrices of order 51, measured). Where it failed they are 0 and 1."""
    from scipy.linalg import lapack  # on use: importing this module (crc --help does) loads no scipy

    # inverse_t[i].T, Fortran-ordered, becomes L^-1 in place: float64 and C order, or LAPACK would work on a copy
    inverse_t, diagonal = np.array(cov, dtype=np.float64, order="C"), np.ones(cov.shape[:-1])
    factored = np.ones(len(cov), dtype=bool)
    for i, matrix in enumerate(inverse_t):
        lower, info = lapack.dpotrf(matrix.T, lower=1, clean=1, overwrite_a=1)
        if info == 0:
            diagonal[i] = np.diagonal(lower)
            info = lapack.dtrtri(lower, lower=1, overwrite_c=1)[1]
        if info != 0:
            factored[i] = False
            matrix[...] = 0.0  # what the failed call left must not reach the batched product
    return inverse_t, diagonal, factored


def _floored_eigen(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_precision_and_logdet`` through the eigendecomposition, eigenvalues floored at EIG_FLOOR."""
    eigval, eigvec = np.linalg.eigh(cov)
    eigval = np.maximum(eigval, EIG_FLOOR)
    return (eigvec / eigval[..., None, :]) @ np.swapaxes(eigvec, -1, -2), np.log(eigval).sum(axis=-1)
