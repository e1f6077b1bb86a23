"""Probabilistic-circuit class-conditionals: a mixture of K fully factorized products per class.

For class y the circuit is one sum node over K product nodes, each a product
of one leaf per feature (Gaussian for continuous, categorical for discrete):

    p(x | y) = sum_k pi_yk prod_j f_jyk(x_j).

It is smooth (every product covers all features) and decomposable (a product's
leaves have disjoint scopes). Its statistics are those of naive Bayes over the
r K "sub-classes" (y, k): the sum node's child counts are the sub-class counts,
the leaves' statistics are the sub-class moments and category counts, so
``theta(s)`` is naive Bayes' closed form and all of its safeguards apply.

The statistics mapping contains the E-step: ``s(X, W; theta)`` weights
instance i's feature map by ``W_iy q(k | x_i, y)`` with the current circuit's
component responsibilities q. With K = 1 it is exactly naive Bayes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from crc.core.models.base import GenerativeModel, labelled_weights
from crc.core.models.layout import Layout
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.models.options import Option
from crc.core.numeric import logsumexp, normalise_exp
from crc.core.schema import Schema

EM_ITERATIONS = 50
SPREAD = 0.5
"""Scale of the seeded component offsets that break the symmetry of ``uniform``."""

STRUCTURE_SEED = Option("structure_seed", int, 0, "Circuit (--model pc): seed of the structure and of the start's "
                        "symmetry breaking; part of the schema id, so all peers must share it.", low=0, high=2**32 - 1)
COMPONENTS = Option("components", int, 2, "Mixture circuit: product components per class; 1 is naive Bayes.",
                    low=1, high=64)


class MixtureCircuit(GenerativeModel):
    """Per class, a sum node over ``components`` fully factorized product nodes."""

    kind = "pc"
    structure = "mixture"
    OPTIONS = (COMPONENTS, STRUCTURE_SEED)

    def __init__(self, schema: Schema, *, components: int = COMPONENTS.default, structure_seed: int = STRUCTURE_SEED.default):
        self.components = COMPONENTS.check(components)
        self.structure_seed = STRUCTURE_SEED.check(structure_seed)
        self.leaves = self._leaves(subclass_schema(schema, self.components))
        super().__init__(schema)

    def _leaves(self, subclasses: Schema) -> GenerativeModel:
        """The leaves' model over the (y, k) sub-classes: naive Bayes, every product covering all features."""
        return NaiveBayes(subclasses)

    def _layout(self) -> Layout:
        return self.leaves.layout

    def _structure_digest(self) -> str:
        return f"mixture:{self.components}:{self.structure_seed}"

    @property
    def options(self) -> dict:
        return {"structure": self.structure, **super().options}

    def features(self, x: np.ndarray) -> np.ndarray:
        return self.leaves.features(x)

    def theta(self, s: np.ndarray) -> dict:
        """Naive-Bayes parameters of the (y, k) sub-classes: log p(y, k), leaf means, variances, category logs."""
        return self.leaves.theta(s)

    def _component_scores(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        """log p(x, y, k) of shape (..., m, r, K)."""
        scores = self.leaves.log_joint(theta, phi)
        return scores.reshape(scores.shape[:-1] + (self.n_classes, self.components))

    def log_joint(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        return logsumexp(self._component_scores(theta, phi))

    def labelled(self, theta: dict, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``s(X, W; theta)``: class weights (..., m, r) split over components by q(k | x, y)."""
        return self._split_statistics(self._component_scores(theta, phi), phi, weights)

    def _split_statistics(self, scores: np.ndarray, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``s(X, W; theta)`` from the component scores (..., m, r, K) of ``_component_scores``."""
        responsibilities = normalise_exp(scores, axis=-1)
        expanded = (weights[..., None] * responsibilities).reshape(weights.shape[:-1] + (-1,))
        return self.leaves.statistics(phi, expanded)

    def residual_and_posteriors(self, theta: dict, phi: np.ndarray, weights: np.ndarray,
                                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As ``GenerativeModel.residual_and_posteriors``, with the component scores computed once."""
        scores = self._component_scores(theta, phi)
        posteriors = normalise_exp(logsumexp(scores), axis=-1)
        masked = posteriors if mask is None else posteriors * mask[..., None]
        return self._split_statistics(scores, phi, weights - masked), posteriors

    def fit_ml(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None,
               iterations: int = EM_ITERATIONS) -> np.ndarray:
        return fit_em(self, phi, y, mask=mask, iterations=iterations)

    def local_start(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
        return aligned_statistics(self, phi, y, mask=mask)

    def keep_variances(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        """The leaves' rule (``NaiveBayes.keep_leaves``) on every (y, k) sub-class: the circuit's statistics are its
        leaves'. Without it exact diffusion let leaf variances collapse onto single values of integer-valued features
        (``letter``: 289 leaves below 1e-3 at round 64, results/models/mixture_variances.txt)."""
        return self.leaves.keep_leaves(stats, reference, fraction)

    def record_bound(self, clip: float) -> float:
        """The leaves' ||phi(x)||: row (y, k) of s({x}, u) is u_y q(k|x, y) phi(x), and sum_k q^2 <= (sum_k q)^2 = 1."""
        return self.leaves.record_bound(clip)

    def uniform(self, m0: float) -> np.ndarray:
        """ESS ``m0``, uniform p(y|x): every class has the same K components, given seeded offsets.

        Component k has weight 1/K in every class; its Gaussian leaves have mean
        ``SPREAD * z_k`` (z_k standard normal, drawn from the structure seed) and
        variance 1; its categorical leaves have seeded probabilities. With K = 1
        this is naive Bayes' uniform start.
        """
        if self.components == 1:
            return self.leaves.uniform(m0)
        per_component = m0 / (self.n_classes * self.components)
        rows = self._seeded_rows(per_component, np.random.default_rng(self.structure_seed))
        return np.tile(rows.reshape(-1), self.n_classes)

    def _seeded_rows(self, count: float, rng: np.random.Generator) -> np.ndarray:
        """The ``components`` rows (K, n_columns) of every class's start: count ``count`` each, seeded leaves."""
        leaves = seeded_leaves(self.leaves, count, self.components, rng)
        return np.concatenate([np.full((self.components, 1), count), leaves], axis=1)


def subclass_schema(schema: Schema, components: int) -> Schema:
    """``schema`` with each class y split into the sub-classes (y, 0) … (y, components - 1), class-major."""
    return replace(schema, classes=tuple(f"{c}\x1f{k}" for c in schema.classes for k in range(components)))


def seeded_leaves(leaves: NaiveBayes, count: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` leaf rows (n, width) of naive-Bayes statistics without the count column, each of weight ``count``:
    Gaussian leaves of variance 1 and mean ``SPREAD * z`` (z standard normal), categorical leaves of seeded
    probabilities. Drawn from ``rng`` so that every peer builds the same start."""
    dc = len(leaves.continuous)
    categorical = leaves.categorical
    rows = []
    for _ in range(n):
        mean = SPREAD * rng.standard_normal(dc)
        raw = 1.0 + rng.random(categorical.width)
        totals = np.repeat(np.add.reduceat(raw, categorical.offsets), categorical.sizes) if categorical.width else raw
        rows.append(np.concatenate([np.full(dc, count), count * mean, count * (1.0 + mean**2), count * raw / totals]))
    return np.array(rows).reshape(n, -1)


def aligned_statistics(model: GenerativeModel, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
    """A circuit's local start: one E-step of a peer's data from the shared seeded start ``uniform``, ``s(X, Y;
    theta(uniform))``, batched as ``fit_em``.

    Not the local ML statistics (``fit_ml``, EM to convergence): every peer's EM on its own few instances labels
    its components its own way, and averaging such statistics mixes unrelated components (on ``letter`` the
    region graph's CRC ended at 0.70 test error with them). One E-step from the start every peer shares keeps
    component k of every peer the same component."""
    weights = labelled_weights(y, model.n_classes, mask)
    start = np.broadcast_to(model.uniform(1.0), weights.shape[:-2] + (model.size,))  # theta is scale-free
    return model.labelled(model.theta(start), phi, weights)


def fit_em(model: GenerativeModel, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None,
           iterations: int = EM_ITERATIONS) -> np.ndarray:
    """EM for a model with hidden variables from its uniform start: ``iterations`` times ``s <- s(X, Y; theta(s))``.

    Batched like every statistic: phi (..., m, k), y (..., m), mask (..., m) -> (..., size).
    """
    weights = labelled_weights(y, model.n_classes, mask)
    stats = np.broadcast_to(model.uniform(1.0), weights.shape[:-2] + (model.size,))  # theta is scale-free
    for _ in range(iterations):
        stats = model.labelled(model.theta(stats), phi, weights)
    return stats
