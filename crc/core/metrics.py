"""Errors of many node models on shared evaluation sets (paper, section IV)."""

from __future__ import annotations

import numpy as np

from crc.core.models.base import GenerativeModel, LinearFamilyModel
from crc.core.numeric import logsumexp

EVAL_BLOCK_BYTES = 64 * 2**20
"""Bound on the score array of one block of nodes (the evaluation's largest temporary)."""


def node_predictions(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Predicted class codes of shape (n, m) for node statistics (n, size) on phi (m, k).

    Nodes are processed in blocks so that the (m, block, r) score array stays
    under EVAL_BLOCK_BYTES.
    """
    n, m, r = stats.shape[0], phi.shape[0], model.n_classes
    starts, block = _blocks(model, n, m)
    out = np.empty((n, m), dtype=np.int64)
    for start in starts:
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


def majority_errors(y_train: np.ndarray, *evaluated: np.ndarray) -> list[float]:
    """0-1 error on each of ``evaluated`` (label codes, (m_i,)) of always predicting the most frequent class of
    ``y_train`` (m,), the smallest code among ties: the trivial baseline a classifier should beat."""
    majority = int(np.argmax(np.bincount(y_train)))
    return [float(np.mean(y != majority)) for y in evaluated]


def f1_scores(predictions: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """F1 of each row of predicted codes (n, m) against labels (m,), shape (n,): of class 1 for two classes (the
    positive class, as scikit-learn's binary F1), else the mean over classes (macro F1). A class neither
    predicted nor present scores 0, as scikit-learn's ``zero_division=0``."""
    classes = [1] if n_classes == 2 else range(n_classes)
    scores = []
    for k in classes:
        predicted, actual = predictions == k, (y == k)[None, :]
        true_positive = np.sum(predicted & actual, axis=1)
        denominator = predicted.sum(axis=1) + actual.sum()
        scores.append(np.divide(2 * true_positive, denominator, out=np.zeros(len(predictions)), where=denominator > 0))
    return np.mean(scores, axis=0)


def node_f1(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray, y: np.ndarray) -> np.ndarray:
    """F1 (``f1_scores``) of each node's classifier, shape (n,)."""
    return f1_scores(node_predictions(model, stats, phi), y, model.n_classes)


def _blocks(model: GenerativeModel, n: int, m: int):
    block = max(1, EVAL_BLOCK_BYTES // max(1, 8 * m * model.n_classes))
    return range(0, n, block), block


def node_log_likelihood(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean log p(x, y) of the labelled instances under each node's model, shape (n,).

    For the linear family only the labelled class's score is computed: the
    instances are grouped by class and each group is one product with that
    class's natural parameters of a block of nodes, (b, k) @ (k, m_y), a
    1/r of the work of all scores.
    """
    if not isinstance(model, LinearFamilyModel):
        return node_errors_and_log_likelihood(model, stats, phi, y)[1]
    order = np.argsort(y, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(y, minlength=model.n_classes))])
    grouped = phi[order]
    block = max(1, EVAL_BLOCK_BYTES // max(1, 8 * len(y)))
    out = np.empty(stats.shape[0])
    for start in range(0, stats.shape[0], block):
        eta = model.natural(model.theta(stats[start:start + block]))  # (b, r, k)
        total = np.zeros(eta.shape[0])
        for c in range(model.n_classes):
            if bounds[c + 1] > bounds[c]:
                total += (eta[:, c, :] @ grouped[bounds[c]:bounds[c + 1]].T).sum(axis=-1)
        out[start:start + block] = total / len(y)
    return out


def node_errors_and_log_likelihood(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray,
                                   y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(node_errors(...), node_log_likelihood(...))``, each (n,); outside the linear family (circuits) one
    log-joint per block of nodes serves both, the same numbers as the two calls."""
    if isinstance(model, LinearFamilyModel):
        return node_errors(model, stats, phi, y), node_log_likelihood(model, stats, phi, y)
    starts, block = _blocks(model, stats.shape[0], phi.shape[0])
    errors, loglik = np.empty(stats.shape[0]), np.empty(stats.shape[0])
    for start in starts:
        scores = model.log_joint(model.theta(stats[start:start + block]), phi)  # (b, m, r)
        errors[start:start + block] = (scores.argmax(axis=-1) != y[None, :]).mean(axis=1)
        labelled = np.take_along_axis(scores, np.broadcast_to(y[None, :, None], scores.shape[:-1] + (1,)), axis=-1)
        loglik[start:start + block] = labelled[..., 0].mean(axis=-1)
    return errors, loglik


def mixture_log_joint(model: GenerativeModel, stats: np.ndarray, weights: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """log p(x, y) of the mixture sum_v weights_v p_v(x, y) of node models (n, size), shape (m, r)."""
    starts, block = _blocks(model, stats.shape[0], phi.shape[0])
    total = np.full((phi.shape[0], model.n_classes), -np.inf)
    for start in starts:
        scores = model.log_joint(model.theta(stats[start:start + block]), phi)
        scores += np.log(weights[start:start + block])[:, None, None]
        total = logsumexp(np.concatenate([total[None], scores]), axis=0)
    return total
