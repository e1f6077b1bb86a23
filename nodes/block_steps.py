"""What each peer of a vertical group computes on its own block, and what the label holder makes of the sums.

The group's model is a block product (``crc.core.models.blocks.BlockProduct``): ``log p(x, y) = log p(y) +
sum_b log p_b(x_b | y)``. The peer holding block ``b`` keeps that block's statistics ``s_b`` (its own table: a row
per class) and the block's feature map ``phi_b`` (m, k_b) of the group's instances, in the group's order:

* its scores ``log p_b(x_b | y)`` (m, r), from ``theta(s_b)`` (``scores``);
* the label holder adds every block's scores and its log-prior (from its own block's class counts, which every
  block shares) and forms the posteriors P, the soft 0-1 loss of the iterate and the weights ``Y - P``
  (``group_weights``);
* every peer adds ``W^T phi_b`` to ``s_b`` (``step``): its columns of the product's RC step.

The start is the ML statistics scaled to the ESS m0: ``(m0 / m) Y^T phi_b`` (``start``). So the group runs
centralized RC of the block product, exactly.

A latent mixture of block products (``crc.core.models.blocks.BlockMixture``, ``components`` K) is a block product
over the r K sub-classes (y, k): the scores and weights have r K columns. Its ML start is EM from the seeded uniform
start (every peer builds the same, ``em_start``): ``em_passes`` passes in which the label holder turns the summed
scores into the responsibilities ``Y_iy q(k | x_i, y)`` (``em_weights``) and every peer's block statistics become
``W^T phi_b`` (``em_step``); then they are scaled to the ESS. RC's weights split ``Y - P`` over the components by the
same q (``group_weights``), as ``MixtureCircuit.residual_and_posteriors`` does.
"""

from __future__ import annotations

import numpy as np

from crc.core.calibration import soft_zero_one
from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.models.blocks import BlockMixture, BlockProduct, block_schema
from crc.core.models.circuit import EM_ITERATIONS
from crc.core.numeric import logsumexp, normalise_exp


def em_passes(kind: str) -> int:
    """The EM passes a vertical group of ``--model kind`` runs before its start: a mixture's (pc, a ``BlockMixture``),
    else none."""
    return EM_ITERATIONS if kind == "pc" else 0


def rounds_of(passes: int, em: int, rounds: int) -> int:
    """The rounds of ``rounds`` a vertical group's peer has completed after ``passes`` passes: its ``em`` EM passes
    come first, and a vertical group's last pass (T + 1 after them) only scores."""
    return min(max(passes - em, 0), rounds)


class BlockSteps:
    """The computations of the peer holding block ``block`` of ``model`` (a block product or a mixture of them)."""

    def __init__(self, model: GenerativeModel, block: int):
        if not isinstance(model, (BlockProduct, BlockMixture)):
            raise CRCError(f"real peers of a vertical group take a block product of naive Bayes or QDA or a mixture of "
                           f"them (--model nb, qda or pc), not {model.kind!r}")
        if not 0 <= block < len(model.parts):
            raise CRCError(f"block {block} is not one of the model's {len(model.parts)} blocks (0 to {len(model.parts) - 1})")
        self.model, self.block = model, block
        self.part = model.parts[block]
        self.schema = block_schema(model.schema, model.blocks[block])
        """The block's features with the group's classes: what its rows hold and its model file describes."""
        self.classes = model.n_classes
        self.components = model.components if isinstance(model, BlockMixture) else 1
        self.width = self.classes * self.components
        """Columns of a row of scores and weights: the (sub-)classes."""
        self.em_passes = em_passes(model.kind)
        """Passes of EM before the start (a mixture's ML start)."""

    @property
    def size(self) -> int:
        """Length of the block's statistics."""
        return self.part.size

    def start(self, phi: np.ndarray, labels: np.ndarray, ess: float) -> np.ndarray:
        """The block's ML statistics (size,) scaled to ESS ``ess``, from the group's one-hot ``labels`` (m, r)."""
        return self.scaled(self.part.statistics(phi, labels), ess)

    def scaled(self, stats: np.ndarray, ess: float) -> np.ndarray:
        """``stats`` (size,) scaled to ESS ``ess``."""
        return stats * (ess / self.part.ess(stats))

    def em_start(self) -> np.ndarray:
        """A mixture's EM start (size,): the block's part of the model's seeded uniform statistics of ESS 1."""
        return self.model.block_statistics(self.model.uniform(1.0), self.block)

    def em_step(self, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """An EM pass: the block's statistics ``W^T phi_b`` (size,) of the responsibilities ``weights`` (m, r K)."""
        return self.part.statistics(phi, weights)

    def scores(self, stats: np.ndarray, phi: np.ndarray) -> np.ndarray:
        """``log p_b(x_b | y)`` (m, r) of the block's statistics (size,) on its feature map (m, k_b)."""
        theta = self.part.theta(stats)
        return self.part.log_joint(theta, phi) - theta["log_prior"][None, :]

    def log_prior(self, stats: np.ndarray) -> np.ndarray:
        """``log p(y)`` (r,) from the block's class counts."""
        return self.part.theta(stats)["log_prior"]

    def step(self, stats: np.ndarray, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The block's statistics after the group's step: ``s_b + W^T phi_b`` for weights (m, r)."""
        return stats + self.part.statistics(phi, weights)


def group_weights(total: np.ndarray, y: np.ndarray, components: int = 1) -> tuple[float, np.ndarray]:
    """(soft 0-1 loss, weights ``Y - P`` (m, r K)) of the group's summed log-joint ``total`` (m, r K) of every
    (class, component) and labels (m,): the class residual split over the components by q(k | x, y)."""
    total = np.array(total, dtype=np.float64)
    if components == 1:
        posteriors = normalise_exp(total)
        loss = soft_zero_one(posteriors, y)
        weights = -posteriors
        weights[np.arange(len(y)), y] += 1.0
        return loss, weights
    scores = total.reshape(len(y), -1, components)
    posteriors = normalise_exp(logsumexp(scores), axis=-1)
    residual = -posteriors
    residual[np.arange(len(y)), y] += 1.0
    return soft_zero_one(posteriors, y), (residual[..., None] * normalise_exp(scores, axis=-1)).reshape(len(y), -1)


def em_weights(total: np.ndarray, y: np.ndarray, components: int) -> np.ndarray:
    """An EM pass's weights (m, r K): ``Y_iy q(k | x_i, y)`` from the summed log-joint ``total`` (m, r K)."""
    scores = np.array(total, dtype=np.float64).reshape(len(y), -1, components)
    labels = np.zeros(scores.shape[:2])
    labels[np.arange(len(y)), y] = 1.0
    return (labels[..., None] * normalise_exp(scores, axis=-1)).reshape(len(y), -1)


def one_hot_rows(weights: np.ndarray) -> bool:
    """Whether every row of ``weights`` (m, r) is one class's indicator (the round-0 weights: the labels)."""
    return bool(np.all((weights == 0.0) | (weights == 1.0)) and np.all(weights.sum(axis=1) == 1.0))


RESIDUAL_TOLERANCE = 1e-9


def residual_rows(weights: np.ndarray) -> bool:
    """Whether ``weights`` (m, r) can be ``Y - P``: every entry within [-1, 1] and every row summing to 0."""
    return bool(np.all(np.abs(weights) <= 1.0 + RESIDUAL_TOLERANCE)
                and np.all(np.abs(weights.sum(axis=1)) <= RESIDUAL_TOLERANCE))


def responsibility_rows(weights: np.ndarray, components: int) -> bool:
    """Whether ``weights`` (m, r K) can be an EM pass's ``Y q``: entries in [0, 1], each row's summing to 1 within
    one class's components."""
    per_class = weights.reshape(len(weights), -1, components).sum(axis=-1)
    return bool(np.all(weights >= 0.0) and np.all(weights <= 1.0 + RESIDUAL_TOLERANCE)
                and np.all(np.abs(weights.sum(axis=1) - 1.0) <= RESIDUAL_TOLERANCE)
                and np.all(np.sum(per_class > RESIDUAL_TOLERANCE, axis=1) == 1))
