"""Checks of values parsed from an untrusted file, one field at a time.

Each function returns the value (typed) or raises a CRCError that names the
field, e.g. ``features[2].std must be a positive number, got true``. Booleans
are never numbers here (JSON ``true`` is not 1).
"""

from __future__ import annotations

import math

import numpy as np

from crc.core.errors import CRCError, plain

SHOWN_CHARS = 40
"""Longest excerpt of an offending value in a message."""


def shown(value) -> str:
    """A short one-line description of an untrusted value for a message."""
    if isinstance(value, (dict, list)):
        return f"{'an object' if isinstance(value, dict) else 'a list'} of {len(value)} entries"
    text = "true" if value is True else "false" if value is False else "null" if value is None else plain(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def is_number(value) -> bool:
    """An int or float that is not a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def mapping(value, name: str) -> dict:
    if not isinstance(value, dict):
        raise CRCError(f"{name} must be an object, got {shown(value)}")
    return value


def string(value, name: str) -> str:
    if not isinstance(value, str):
        raise CRCError(f"{name} must be a string, got {shown(value)}")
    return value


def strings(value, name: str) -> list[str]:
    """A list of strings."""
    if not isinstance(value, list):
        raise CRCError(f"{name} must be a list of strings, got {shown(value)}")
    for index, item in enumerate(value):
        string(item, f"{name}[{index}]")
    return value


def integer(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (not a boolean, not 1.0) within [low, high]."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise CRCError(f"{name} must be an integer, got {shown(value)}")
    _check_range(value, name, low, high)
    return value


def number(value, name: str, *, low: float | None = None, high: float | None = None, positive: bool = False) -> float:
    """A finite number (not a boolean) within [low, high], and above 0 if ``positive``."""
    if not is_number(value) or not math.isfinite(value):
        raise CRCError(f"{name} must be a finite number, got {shown(value)}")
    if positive and value <= 0:
        raise CRCError(f"{name} must be a positive number, got {shown(value)}")
    _check_range(value, name, low, high)
    return float(value)


def numbers(value, name: str, *, length: int | None = None) -> np.ndarray:
    """A list of finite numbers (no booleans), of ``length`` entries if given, as float64 of shape (n,)."""
    if not isinstance(value, list) or not set(map(type, value)) <= {int, float}:
        raise CRCError(f"{name} must be a list of finite numbers, got {_first_offender(value)}")
    if length is not None and len(value) != length:
        raise CRCError(f"{name} must hold {length} numbers, got {len(value)}")
    array = np.array(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise CRCError(f"{name} must be a list of finite numbers, got {shown(value[int(np.argmin(np.isfinite(array)))])}")
    return array


def _first_offender(value) -> str:
    if not isinstance(value, list):
        return shown(value)
    index = next(i for i, item in enumerate(value) if type(item) not in (int, float))
    return f"{shown(value[index])} at [{index}]"


def _check_range(value, name: str, low, high) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"at most {high}" if low is None else f"from {low} to {high}"
        raise CRCError(f"{name} must be {bounds}, got {shown(value)}")
