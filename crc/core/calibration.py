"""Risk-based calibration: RC on pooled data (Algorithm 1) and local RC (Algorithm 3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from crc.core.models.base import GenerativeModel, labelled_weights

DEFAULT_LR = 0.05
DEFAULT_ITERATIONS = 64
CONVERGED_PATIENCE = 64
"""RC run to convergence stops once the training soft 0-1 loss has not improved for this many iterations ..."""
CONVERGED_MAX_ITERATIONS = 4096
"""... or after this many iterations."""


def soft_zero_one(posteriors: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
    """Mean soft 0-1 loss ``1 - p(y|x)`` of posteriors (m, r) against labels (m,), weighted by ``sample_weight`` (m,)."""
    correct = np.take_along_axis(posteriors, y[:, None], axis=1)
    if sample_weight is None:
        return float(1.0 - correct.mean())
    return float(1.0 - np.average(correct[:, 0], weights=sample_weight))


@dataclass
class RCResult:
    """Outcome of RC.

    Attributes
    ----------
    stats : ndarray of shape (size,)
        Statistics of the returned classifier.
    best_iteration : int
        Iteration whose statistics were returned (0 is the start).
    losses : list of float
        Training soft 0-1 loss of iterations 0 .. iterations.
    milestone : RCResult or None
        What RC stopped after ``milestone`` iterations would have returned (``rc(milestone=...)``), when this
        run reached that iteration.
    """

    stats: np.ndarray
    best_iteration: int
    losses: list = field(default_factory=list)
    milestone: RCResult | None = None


def rc(
    model: GenerativeModel,
    phi: np.ndarray,
    y: np.ndarray,
    *,
    lr: float = DEFAULT_LR,
    iterations: int = DEFAULT_ITERATIONS,
    init: np.ndarray | None = None,
    select_best: bool = True,
    callback: Callable[[int, np.ndarray], None] | None = None,
    sample_weight: np.ndarray | None = None,
    momentum: float = 0.0,
    patience: int | None = None,
    milestone: int | None = None,
) -> RCResult:
    """Algorithm 1: ``s <- s + lr s(X, Y - P; theta(s))``, i.e. ``s + lr (s(X, Y) - s(X, theta(s)))``.

    Parameters
    ----------
    phi : ndarray of shape (m, k)
        Feature map of the pooled training data.
    y : ndarray of shape (m,)
    init : ndarray of shape (size,), optional
        Starting statistics; the ML statistics ``s(X, Y)`` by default.
    select_best : bool
        Return the iterate with the lowest training soft 0-1 loss (True) or the last.
    callback : callable(iteration, stats), optional
        Called for every iterate, 0 included.
    sample_weight : ndarray of shape (m,), optional
        Instance weights: they multiply the one-hot labels and the posteriors of
        ``s(X, Y - P)`` (and of the ML start) and weight the soft 0-1 loss.
    momentum : float
        Heavy-ball memory β: the step is taken from ``s + β (s - s_previous)`` (the centralized
        counterpart of CRC's memory through the mixing, ``crc.core.acceleration``); 0 is Algorithm 1.
    patience : int, optional
        Stop early once the training soft 0-1 loss has not improved for ``patience`` iterations
        (``iterations`` is then the maximum).
    milestone : int, optional
        Also return, as ``milestone`` of the result, what this call with ``iterations=milestone`` and no patience
        would have returned: its iterates are this run's first ones, so one run gives both.
    """
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
    weights = labelled_weights(y, model.n_classes, sample_weight)
    stats = model.fit_ml(phi, y, mask=sample_weight) if init is None else np.array(init, dtype=np.float64)
    best, best_loss, best_iteration, losses, previous = stats, np.inf, 0, [], None
    reached = None
    for iteration in range(iterations + 1):
        theta = model.theta(stats)
        pushed = bool(momentum) and previous is not None
        if pushed:  # the step is taken from elsewhere: only the loss is needed here
            posteriors = model.posteriors(theta, phi)
        else:
            residual, posteriors = model.residual_and_posteriors(theta, phi, weights, sample_weight)
        loss = soft_zero_one(posteriors, y, sample_weight)
        losses.append(loss)
        if callback is not None:
            callback(iteration, stats)
        if loss < best_loss:
            best, best_loss, best_iteration = stats, loss, iteration
        if iteration == milestone:
            kept, kept_iteration = (best, best_iteration) if select_best else (stats, iteration)
            reached = RCResult(stats=kept, best_iteration=kept_iteration, losses=list(losses))
        if iteration == iterations or (patience is not None and iteration - best_iteration >= patience):
            break
        if pushed:
            stats, previous = stats + momentum * (stats - previous), stats
            residual = model.residual_and_posteriors(model.theta(stats), phi, weights, sample_weight)[0]
        else:
            previous = stats
        stats = stats + lr * residual
    if not select_best:
        best, best_iteration = stats, iteration
    return RCResult(stats=best, best_iteration=best_iteration, losses=losses, milestone=reached)


def lrc(
    model: GenerativeModel,
    stats: np.ndarray,
    phi: np.ndarray,
    weights: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    iterations: int = 1,
) -> np.ndarray:
    """Algorithm 3, batched over nodes: ``iterations`` times ``s <- s + s(X_v, Y_v - P_v; theta(s))``.

    Parameters
    ----------
    stats : ndarray of shape (..., size)
        Aggregated statistics, one row per node.
    phi : ndarray of shape (..., m, k)
        Each node's local feature map, padded to a common ``m``.
    weights : ndarray of shape (..., m, r)
        Each node's labelled weights (``labelled_weights``: one-hot labels, zero on padding).
    mask : ndarray of shape (..., m), optional
        1 for a real instance, 0 for padding.
    """
    for _ in range(iterations):
        stats = stats + model.residual(model.theta(stats), phi, weights, mask)
    return stats
