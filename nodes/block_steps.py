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
"""

from __future__ import annotations

import numpy as np

from crc.core.calibration import soft_zero_one
from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.models.blocks import BlockProduct
from crc.core.numeric import normalise_exp


class BlockSteps:
    """The computations of the peer holding block ``block`` of ``model`` (a block product)."""

    def __init__(self, model: GenerativeModel, block: int):
        if not isinstance(model, BlockProduct):
            raise CRCError(f"real peers of a vertical group take the block product of naive Bayes or QDA (--model nb "
                           f"or qda), not {model.kind!r} yet: run the mixture of block products with `crc simulate`")
        if not 0 <= block < len(model.parts):
            raise CRCError(f"block {block} is not one of the model's {len(model.parts)} blocks (0 to {len(model.parts) - 1})")
        self.part = model.parts[block]
        self.width = model.n_classes
        """Columns of a row of scores and weights."""

    @property
    def size(self) -> int:
        """Length of the block's statistics."""
        return self.part.size

    def start(self, phi: np.ndarray, labels: np.ndarray, ess: float) -> np.ndarray:
        """The block's ML statistics (size,) scaled to ESS ``ess``, from the group's one-hot ``labels`` (m, r)."""
        stats = self.part.statistics(phi, labels)
        return stats * (ess / self.part.ess(stats))

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


def group_weights(total: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """(soft 0-1 loss, weights ``Y - P`` (m, r)) of the group's summed log-joint ``total`` (m, r) and labels (m,)."""
    posteriors = normalise_exp(np.array(total, dtype=np.float64))
    loss = soft_zero_one(posteriors, y)
    weights = -posteriors
    weights[np.arange(len(y)), y] += 1.0
    return loss, weights


def one_hot_rows(weights: np.ndarray) -> bool:
    """Whether every row of ``weights`` (m, r) is one class's indicator (the round-0 weights: the labels)."""
    return bool(np.all((weights == 0.0) | (weights == 1.0)) and np.all(weights.sum(axis=1) == 1.0))


RESIDUAL_TOLERANCE = 1e-9


def residual_rows(weights: np.ndarray) -> bool:
    """Whether ``weights`` (m, r) can be ``Y - P``: every entry within [-1, 1] and every row summing to 0."""
    return bool(np.all(np.abs(weights) <= 1.0 + RESIDUAL_TOLERANCE)
                and np.all(np.abs(weights.sum(axis=1)) <= RESIDUAL_TOLERANCE))
