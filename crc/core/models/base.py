"""The closed-form learning contract shared by every model (DESIGN.md, paper §II-A).

A model maps encoded instances to a feature map ``phi`` (the per-instance
statistics before class weighting), and

* ``statistics(phi, w)`` -- ``s(X, W)``: additive statistics, shape (..., size);
* ``theta(s)``           -- parameters, every numerical safeguard inside;
* ``log_joint(theta, phi)`` -- shape (..., m, r);
* ``uniform(m0)``        -- statistics of ESS ``m0`` with a uniform class posterior.

All functions accept leading batch axes (one per network node), so the CRC
engine runs every node of a round in one call.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.layout import Layout
from crc.core.models.options import Option, check_exact, select
from crc.core.numeric import normalise_exp
from crc.core.schema import Schema
from crc.core.threads import ordered_map

COUNT_FLOOR = 1e-9
"""Lower bound of every count used by ``theta``, as a fraction of the ESS (scale-free)."""
MAX_STATISTICS = 2**23
"""Longest statistics vector a model may have (64 MiB of float64): its model file, statistics and parameters at up to
25 characters a number, stays readable (``crc.core.model_file.MAX_MODEL_BYTES``). The bundled data sets' models hold
at most 140,000 with their default options. Without a bound, a schema file of under a megabyte (50,000 classes, 2,000
categories a feature) asked for 16 GiB, one of 300,000 classes ran a peer out of 4 GB."""


class ModelTooLarge(CRCError):
    """A schema whose model would hold more than ``MAX_STATISTICS`` statistics (the reader of its file names it)."""


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    """Class codes of shape (...,) -> indicator weights of shape (..., n_classes)."""
    return (np.asarray(y)[..., None] == np.arange(n_classes)).astype(np.float64)


def labelled_weights(y: np.ndarray, n_classes: int, mask: np.ndarray | None = None) -> np.ndarray:
    """The weights ``Y`` of ``s(X, Y)``: one-hot labels (..., m, r), zero on padding where ``mask`` (..., m) is 0."""
    weights = one_hot(y, n_classes)
    return weights if mask is None else weights * mask[..., None]


class GenerativeModel(ABC):
    """A generative classifier represented by its sufficient statistics.

    Models with hidden variables (circuits) override ``labelled``: their
    statistics ``s(X, W; theta)`` contain an E-step and depend on the parameters.
    """

    kind: str = ""
    summary: str = ""
    """One line for the ``--model`` help."""
    OPTIONS: tuple[Option, ...] = ()
    """Structure options beyond the schema: the constructor's keyword arguments, stored as attributes of the same names."""

    @classmethod
    def select_options(cls, settings) -> dict:
        """This model's options from ``settings`` (which may hold other models' options too), defaults where absent."""
        return select(cls.OPTIONS, settings)

    @classmethod
    def create(cls, schema: Schema, **options) -> GenerativeModel:
        """The model for ``schema`` after checking ``options`` against ``OPTIONS`` (untrusted values are bounded)."""
        return cls(schema, **check_exact(cls.OPTIONS, options, f"model {cls.kind!r}"))

    def __init__(self, schema: Schema):
        self.schema = schema
        self.layout = self._layout()
        if self.layout.size > MAX_STATISTICS:
            raise ModelTooLarge(f"the schema's model would hold {self.layout.size:,} statistics or more, more than "
                                f"{MAX_STATISTICS:,}: give the schema fewer classes, features or categories, or the "
                                "model smaller structure options")

    @property
    def n_classes(self) -> int:
        return self.schema.n_classes

    @property
    def size(self) -> int:
        """Length of the flat statistics vector."""
        return self.layout.size

    @property
    def schema_id(self) -> str:
        """Hash of schema, model kind and statistics layout: what peers must share."""
        text = f"{self.schema.fingerprint}:{self.kind}:{self.layout.digest()}:{self._structure_digest()}"
        return hashlib.sha256(text.encode()).hexdigest()

    def _structure_digest(self) -> str:
        """Extra structure that must match between peers (none by default)."""
        return ""

    def table(self, s: np.ndarray) -> np.ndarray:
        """Flat statistics (..., size) -> table (..., rows, n_columns), a view (a row per class, or per
        class and component for circuits)."""
        s = np.asarray(s, dtype=np.float64)
        if s.shape[-1] != self.size:
            raise CRCError(f"statistics have length {s.shape[-1]}, the {self.kind} layout needs {self.size}")
        return s.reshape(s.shape[:-1] + (self.layout.n_classes, self.layout.n_columns))

    def ess(self, s: np.ndarray) -> np.ndarray:
        """Equivalent sample size: the total class count, shape (...)."""
        return self.table(s)[..., :, self.layout.columns("count")].sum(axis=(-1, -2))

    def statistics(self, phi: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``s(X, W)`` for feature maps (..., m, k) and weights (..., m, r) -> (..., size)."""
        table = np.matmul(np.swapaxes(w, -1, -2), phi)
        return table.reshape(table.shape[:-2] + (self.size,))

    @property
    def options(self) -> dict:
        """Structure settings beyond the schema, as ``make_model`` takes them."""
        return {option.name: getattr(self, option.name) for option in self.OPTIONS}

    def labelled(self, theta: dict, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``s(X, W; theta)``; without hidden variables it does not depend on ``theta``."""
        return self.statistics(phi, weights)

    def fit_ml(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
        """Maximum-likelihood statistics ``s(X, Y)``: phi (..., m, k), y (..., m), padding mask (..., m) -> (..., size)."""
        return self.statistics(phi, labelled_weights(y, self.n_classes, mask))

    def local_start(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
        """A peer's statistics of its own data for CRC's local start (``crc.core.acceleration.start_statistics``),
        batched as ``fit_ml``: the ML statistics, for a model without hidden variables."""
        return self.fit_ml(phi, y, mask=mask)

    def posteriors(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        """Class posteriors p(y|x) of shape (..., m, r), normalised by log-sum-exp."""
        return normalise_exp(self.log_joint(theta, phi), axis=-1)

    def residual(self, theta: dict, phi: np.ndarray, weights: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """``s(X, W - P; theta)``, the change of one calibration step (RC, LRC), of shape (..., size).

        ``weights`` (..., m, r) are the labelled weights (one-hot, zero on padding);
        ``P`` are the model's posteriors, multiplied by ``mask`` (..., m) (0 on padding, or instance weights).
        Statistics are linear in the weights, so this is ``s(X, Y; theta) - s(X, theta; theta)``
        for every model, latent or not.
        """
        return self.residual_and_posteriors(theta, phi, weights, mask)[0]

    def residual_and_posteriors(self, theta: dict, phi: np.ndarray, weights: np.ndarray,
                                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(residual(theta, phi, weights, mask), posteriors(theta, phi))``: what an RC iteration needs, its
        loss and its step, from one evaluation of the model where the model can share it (circuits)."""
        posteriors = self.posteriors(theta, phi)
        masked = posteriors if mask is None else posteriors * mask[..., None]
        return self.labelled(theta, phi, weights - masked), posteriors

    def keep_variances(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        """``stats`` (..., size) with every class-conditional variance raised to at least ``fraction`` times the one
        of ``reference`` (..., size), where the model has variances in its statistics; by default unchanged.

        Exact diffusion (``crc.core.acceleration``) extrapolates statistics, which can leave a sum of squares
        below what its mean needs; this keeps a variance from collapsing in one round."""
        return stats

    def _floor(self, table: np.ndarray) -> np.ndarray:
        """Per-batch count floor of shape (..., 1, 1); rejects a non-positive ESS."""
        ess = table[..., :, self.layout.columns("count")].sum(axis=(-1, -2))
        if not np.all(np.isfinite(table)):
            raise CRCError("statistics contain non-finite values")
        if np.any(ess <= 0):
            raise CRCError("statistics have a non-positive equivalent sample size")
        return (COUNT_FLOOR * ess)[..., None, None]

    @abstractmethod
    def _layout(self) -> Layout: ...

    @abstractmethod
    def features(self, x: np.ndarray) -> np.ndarray:
        """Encoded, standardized instances (m, d) -> feature map (m, k)."""

    @abstractmethod
    def theta(self, s: np.ndarray) -> dict:
        """Parameters from statistics (..., size); a dict of arrays with the same batch axes."""

    @abstractmethod
    def log_joint(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        """log p(x, y) of shape (..., m, r)."""

    @abstractmethod
    def uniform(self, m0: float) -> np.ndarray:
        """Statistics of shape (size,) with ESS ``m0`` and uniform p(y|x) (paper, appendix A-A)."""

    @abstractmethod
    def record_bound(self, clip: float) -> float:
        """An upper bound G on ``||s({x}, u; theta)||_2 / ||u||_2`` over every instance x whose standardized
        continuous values lie in [-clip, clip], every weight vector u (r,) and every theta: how far one
        instance can move the statistics (``crc.core.privacy`` derives the sensitivity from it)."""


POOLED_BLOCK_ELEMENTS = 2**20
"""Feature-map elements (8 MB) from which a pooled residual (one phi (m, k) and one theta, as centralized RC
computes it) runs over blocks of instances, on ``crc.core.threads``' threads."""
DIRECT_CLASSES = 8
"""From this many classes on, the batched residual writes the class-major scores straight from the product
(eta_v @ phi_v^T); below, a plain product and a transposing copy are faster (OpenBLAS 0.3, measured)."""


class LinearFamilyModel(GenerativeModel):
    """A model whose log-joint is linear in the feature map: log p(x, y) = phi(x) . eta_y.

    Subclasses give ``natural(theta)`` of shape (..., r, k). It may be a view of a
    *feature-major* array (k, ..., r), as naive Bayes returns it: each batch entry's
    eta^T (k, r) is then a plain (untransposed) operand of the score product.
    """

    @abstractmethod
    def natural(self, theta: dict) -> np.ndarray: ...

    def log_joint(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        return np.matmul(phi, np.swapaxes(self.natural(theta), -1, -2))

    def residual(self, theta: dict, phi: np.ndarray, weights: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        eta = self.natural(theta)
        if phi.ndim == 3 and eta.shape[:-2] == weights.shape[:-2] == phi.shape[:-2] and (mask is None or mask.shape[:-1] == phi.shape[:-2]):
            return self._batched_residual(eta, phi, weights, mask)
        # Class-major posteriors (..., r, m): the softmax then reduces across rows,
        # which numpy does far faster than along a short last axis.
        posteriors = normalise_exp(np.matmul(eta, np.swapaxes(phi, -1, -2)), axis=-2)
        if mask is not None:
            posteriors *= mask[..., None, :]
        table = np.matmul(np.swapaxes(weights, -1, -2) - posteriors, phi)
        return table.reshape(table.shape[:-2] + (self.size,))

    def residual_and_posteriors(self, theta: dict, phi: np.ndarray, weights: np.ndarray,
                                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As ``GenerativeModel.residual_and_posteriors``; a large pooled phi (m, k) goes by blocks of instances.

        Both products stream phi, and with few classes they are bound by reading it (QDA's quadratic map is
        28.8 MB on ``optdigits``): a block's posteriors and its residual are taken while the block is in cache,
        and blocks run on threads. The blocks depend on phi's shape only and their tables are added in block
        order, so results do not depend on the thread count. The posteriors come back as a (m, r) view of a
        class-major array."""
        if phi.ndim != 2 or phi.size < POOLED_BLOCK_ELEMENTS:  # before eta: the plain path computes its own
            return super().residual_and_posteriors(theta, phi, weights, mask)
        eta = self.natural(theta)
        if eta.ndim != 2:  # a batch of parameters over one large phi: no caller does this, the plain path serves it
            return super().residual_and_posteriors(theta, phi, weights, mask)
        m = phi.shape[0]
        n_blocks = -(-phi.size // POOLED_BLOCK_ELEMENTS)
        rows = -(-m // n_blocks)

        def block(start: int) -> tuple[np.ndarray, np.ndarray]:
            # class-major posteriors (r, rows): the softmax reduces across rows, and W^T - P feeds the product as is
            part = slice(start, start + rows)
            block_posteriors = normalise_exp(np.matmul(eta, phi[part].T), axis=0)
            masked = block_posteriors if mask is None else block_posteriors * mask[part]
            return np.matmul(weights[part].T - masked, phi[part]), block_posteriors

        tables, posteriors = zip(*ordered_map(block, range(0, m, rows)))
        table = tables[0]
        for part in tables[1:]:
            table += part
        return table.reshape(self.size), np.concatenate(posteriors, axis=1).T

    def _batched_residual(self, eta: np.ndarray, phi: np.ndarray, weights: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """The residual of ``b`` batch entries (phi (b, m, k), eta (b, r, k), weights (b, m, r)) through one
        class-major (r, b, m) array: the softmax reduces over its first axis, across rows of b*m contiguous
        values; ``W - P`` is one subtraction (contiguous when ``weights`` is a view of class-major labels, as
        ``CRCEngine`` passes them); the residual product reads each entry's (r, m) slice of it in place.
        The same arithmetic as the unbatched path, in other memory layouts."""
        b, m, _ = phi.shape
        r = eta.shape[-2]
        scores = np.empty((r, b, m))
        if eta.strides[-2] == eta.itemsize and r < DIRECT_CLASSES:
            # feature-major eta, few classes: phi_v @ eta_v^T is a plain product (b, m, r), then one transposing copy
            np.copyto(scores, np.matmul(phi, np.swapaxes(eta, -1, -2)).transpose(2, 0, 1))
        else:  # eta_v @ phi_v^T, written straight into the class-major array
            np.matmul(eta, np.swapaxes(phi, -1, -2), out=scores.transpose(1, 0, 2))
        flat = scores.reshape(r, b * m)
        np.subtract(flat, np.maximum.reduce(flat, axis=0), out=flat)  # normalise_exp along the classes
        np.exp(flat, out=flat)
        np.divide(flat, np.add.reduce(flat, axis=0), out=flat)
        if mask is not None:
            flat *= mask.reshape(1, b * m)
        np.subtract(weights.transpose(2, 0, 1), scores, out=scores)  # W - P
        table = np.matmul(scores.transpose(1, 0, 2), phi)  # (b, r, k)
        return table.reshape(b, self.size)
