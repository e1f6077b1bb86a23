"""Collaborative risk-based calibration (Algorithm 2), all nodes at once.

The engine keeps every node's statistics in one array of shape (n, size). A
round is one sparse product with the closed-neighbourhood averaging matrix
followed by a batched LRC step over the nodes' padded local data; there is no
Python loop over nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from crc.core.calibration import DEFAULT_LR, lrc
from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel, labelled_weights

Mixing = sp.spmatrix | sp.sparray | np.ndarray | Callable[[int], object]
"""A row-stochastic (n, n) averaging matrix, or a function of the round (1, 2, ...) returning one."""


@dataclass(frozen=True)
class LocalData:
    """Every node's local data, padded to a common size.

    Attributes
    ----------
    phi : ndarray of shape (n, m_max, k)
    y : ndarray of shape (n, m_max)
    mask : ndarray of shape (n, m_max)
        1.0 for a real instance, 0.0 for padding.
    """

    phi: np.ndarray
    y: np.ndarray
    mask: np.ndarray

    @classmethod
    def from_parts(cls, phi: np.ndarray, y: np.ndarray, parts: list[np.ndarray]) -> LocalData:
        """Gather rows of phi (m, k) and y (m,) for each node's index array."""
        if any(len(p) == 0 for p in parts):
            raise CRCError("every node needs at least one local instance")
        sizes = np.array([len(p) for p in parts])
        m_max = int(sizes.max())
        mask = (np.arange(m_max)[None, :] < sizes[:, None]).astype(np.float64)
        index = np.zeros((len(parts), m_max), dtype=np.int64)
        index[mask.astype(bool)] = np.concatenate(parts)
        return cls(phi=phi[index] * mask[..., None], y=y[index], mask=mask)

    @property
    def sizes(self) -> np.ndarray:
        return self.mask.sum(axis=1)


def default_ess(total_instances: int, n_nodes: int, lr: float = DEFAULT_LR) -> float:
    """Eq. 5 of the paper: ``m0 = m / (lr * n)``."""
    return total_instances / (lr * n_nodes)


class CRCEngine:
    """Runs CRC over a network.

    Parameters
    ----------
    model : GenerativeModel
    local : LocalData
    mixing : Mixing
        Closed-neighbourhood averaging (each node's row averages itself and its neighbours).
    ess : float
        Equivalent sample size ``m0`` of every node's statistics.
    iterations : int
        LRC steps per round.
    """

    def __init__(self, model: GenerativeModel, local: LocalData, mixing: Mixing, *, ess: float, iterations: int = 1):
        if not ess > 0:
            raise CRCError(f"equivalent sample size must be positive, got {ess}")
        if iterations < 1:
            raise CRCError(f"local iterations must be at least 1, got {iterations}")
        self.model, self.local, self.iterations, self.ess = model, local, iterations, float(ess)
        self._mixing = mixing
        self.n_nodes = local.phi.shape[0]
        self.weights = labelled_weights(local.y, model.n_classes, local.mask)
        self._padding = None if local.mask.all() else local.mask
        self.stats = np.tile(model.uniform(self.ess), (self.n_nodes, 1))
        self.round = 0

    def mixing(self, round_: int):
        matrix = self._mixing(round_) if callable(self._mixing) else self._mixing
        if matrix.shape != (self.n_nodes, self.n_nodes):
            raise CRCError(f"mixing matrix has shape {matrix.shape}, expected {(self.n_nodes, self.n_nodes)}")
        return matrix

    def aggregate(self) -> np.ndarray:
        """Closed-neighbourhood averages of the current statistics for the next round, (n, size)."""
        return np.asarray(self.mixing(self.round + 1) @ self.stats)

    def step(self) -> np.ndarray:
        """One round: aggregate, then LRC. Returns the aggregated statistics of the round."""
        aggregated = self.aggregate()
        self.stats = lrc(self.model, aggregated, self.local.phi, self.weights, self._padding, iterations=self.iterations)
        self.round += 1
        return aggregated

    def run(self, rounds: int, callback: Callable[[int, np.ndarray], None] | None = None) -> np.ndarray:
        """Run ``rounds`` rounds; ``callback(round, stats)`` after each. Returns the final (n, size) statistics."""
        for _ in range(rounds):
            self.step()
            if callback is not None:
                callback(self.round, self.stats)
        return self.stats
