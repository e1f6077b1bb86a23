"""Numerical primitives shared by every model: log-sum-exp, normalised exponentials, log(2 pi)."""

from __future__ import annotations

import functools

import numpy as np

LOG_2PI = float(np.log(2 * np.pi))

SHORT_AXIS = 8
"""Reductions along a last axis at most this long are done slice by slice: numpy is slow along a short last axis."""


def _reduce(ufunc: np.ufunc, a: np.ndarray, axis: int) -> np.ndarray:
    """``ufunc.reduce(a, axis)``, slice by slice when ``axis`` is a short last axis."""
    if axis in (-1, a.ndim - 1) and a.shape[-1] <= SHORT_AXIS:
        return functools.reduce(ufunc, (a[..., i] for i in range(a.shape[-1])))
    return ufunc.reduce(a, axis=axis)


def logsumexp(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """``log(sum(exp(a), axis))`` without overflow; the axis is removed."""
    top = _reduce(np.maximum, a, axis)
    return top + np.log(_reduce(np.add, np.exp(a - np.expand_dims(top, axis)), axis))


def normalise_exp(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Log-weights -> normalised weights along ``axis`` (a softmax), in place: subtract the max, exp, divide."""
    scores -= np.expand_dims(_reduce(np.maximum, scores, axis), axis)
    np.exp(scores, out=scores)
    scores /= np.expand_dims(_reduce(np.add, scores, axis), axis)
    return scores
