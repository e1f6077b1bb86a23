"""A peer's local data file, checked against the shared schema before any network activity."""

from __future__ import annotations

import numpy as np

from crc.core.data import encode, standardize
from crc.core.errors import CRCError, named_errors
from crc.core.models import GenerativeModel
from crc.core.privacy import clip_standardized
from crc.core.schema import Schema


def load_local(path, schema: Schema, model: GenerativeModel, *, clip: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Features phi (m, k) and class codes y (m,) of a CSV file with the schema's columns; with ``clip`` the
    standardized continuous values are clipped to [-clip, clip] first (differential privacy).

    Raises CRCError naming the file for a wrong or missing column, an unknown
    class or category, an unparsable number, a value whose features overflow, or an empty file.
    """
    from crc.tables.reader import read_csv  # pandas, when the data is read: not at a peer's start-up

    columns = read_csv(path)
    if schema.label not in columns:
        raise CRCError(f"{path}: no label column {schema.label!r} (the schema's label)")
    x, y = encode(schema, columns, source=str(path))
    if len(y) == 0:
        raise CRCError(f"{path}: no instances")
    return feature_map(path, schema, model, x, clip=clip), y


def feature_map(path, schema: Schema, model: GenerativeModel, x: np.ndarray, *, clip: float | None = None) -> np.ndarray:
    """phi (m, k) of encoded instances ``x`` (m, d) read from ``path``: standardized (clipped to [-clip, clip] with
    ``clip``); a CRCError naming the file for a value whose features overflow, or that the model refuses."""
    x = standardize(schema, x)
    with np.errstate(over="ignore", invalid="ignore"), named_errors(path):  # QDA's refusal of a missing value
        phi = model.features(x if clip is None else clip_standardized(schema, x, clip))
    overflowed = np.isinf(phi).any(axis=1)  # NaN is a missing value, not an overflow
    if overflowed.any():
        row = int(np.flatnonzero(overflowed)[0])
        raise CRCError(f"{path}: instance {row + 1} has a value too large for the schema's standardization "
                       "(its square, or its product with another, is beyond float64): correct the cell, or leave it "
                       "empty")
    return phi
