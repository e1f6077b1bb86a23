"""Categorical class-conditionals of the discrete features, shared by every model.

Each discrete feature ``j`` with ``r_j`` categories owns ``r_j`` one-hot
columns; a missing cell has an all-zero row, which both adds nothing to the
counts and marginalises the feature in the log-joint.
"""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError
from crc.core.schema import Schema


class CategoricalPart:
    """One-hot map and category probabilities of a schema's discrete features."""

    def __init__(self, schema: Schema):
        self.columns = schema.discrete
        self.names = [schema.features[j].name for j in self.columns]
        self.sizes = np.array([len(schema.features[j].categories) for j in self.columns], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.width = int(self.sizes.sum())

    def one_hot(self, x: np.ndarray) -> np.ndarray:
        """(m, d) encoded matrix -> (m, width) indicators of the discrete cells."""
        out = np.zeros((x.shape[0], self.width))
        if not self.columns:
            return out
        codes = x[:, self.columns]
        present = ~np.isnan(codes)
        safe = np.where(present, codes, 0.0)
        if np.any((safe != np.floor(safe)) | (safe < 0) | (safe >= self.sizes)):
            bad = int(np.argmax(np.any((safe != np.floor(safe)) | (safe < 0) | (safe >= self.sizes), axis=0)))
            raise CRCError(f"feature {self.names[bad]!r}: category codes must be integers in [0, {self.sizes[bad]})")
        rows, cols = np.nonzero(present)
        out[rows, self.offsets[cols] + safe[rows, cols].astype(np.int64)] = 1.0
        return out

    def log_probs(self, counts: np.ndarray, floor: np.ndarray) -> np.ndarray:
        """Log category probabilities from counts of shape (..., r, width).

        ``floor`` (shape (..., 1, 1)) bounds every count from below before
        normalising within each feature's block.
        """
        if self.width == 0:
            return counts.copy()
        floored = np.maximum(counts, floor)
        totals = np.add.reduceat(floored, self.offsets, axis=-1)
        return np.log(floored) - np.log(np.repeat(totals, self.sizes, axis=-1))

    def uniform(self, per_class: float) -> np.ndarray:
        """Counts of shape (width,) spreading ``per_class`` evenly over each feature's categories."""
        return np.repeat(per_class / self.sizes, self.sizes) if self.width else np.zeros(0)
