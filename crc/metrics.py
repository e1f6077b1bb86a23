"""Errors of many node models on shared evaluation sets (paper, section IV)."""

from __future__ import annotations

import numpy as np

from crc.models.base import GenerativeModel, LinearFamilyModel

EVAL_BLOCK_BYTES = 256 * 2**20


def node_predictions(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Predicted class codes of shape (n, m) for node statistics (n, size) on phi (m, k).

    Nodes are processed in blocks so that the (m, block, r) score array stays
    under EVAL_BLOCK_BYTES.
    """
    n, m, r = stats.shape[0], phi.shape[0], model.n_classes
    block = max(1, EVAL_BLOCK_BYTES // max(1, 8 * m * r))
    out = np.empty((n, m), dtype=np.int64)
    for start in range(0, n, block):
        theta = model.theta(stats[start:start + block])
        if isinstance(model, LinearFamilyModel):
            eta = model.natural(theta)  # (b, r, k)
            b = eta.shape[0]
            scores = phi @ eta.reshape(b * r, -1).T  # one GEMM: (m, b*r)
            out[start:start + b] = scores.reshape(m, b, r).argmax(axis=-1).T
        else:
            out[start:start + block] = model.log_joint(theta, phi).argmax(axis=-1)
    return out


def node_errors(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray, y: np.ndarray) -> np.ndarray:
    """0-1 error of each node's classifier, shape (n,)."""
    return (node_predictions(model, stats, phi) != y[None, :]).mean(axis=1)


def error(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray, y: np.ndarray) -> float:
    """0-1 error of one classifier with statistics (size,)."""
    return float(node_errors(model, stats[None, :], phi, y)[0])
