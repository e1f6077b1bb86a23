"""Warnings about feature columns that are legal but suspect: a row number, a column of many rare categories, a copy
of the label. Each is read as any column is, and named on the ``crc.data`` logger (``Warning:`` lines on a command's
standard error, once per command)."""

from __future__ import annotations

import logging

import numpy as np

LOG = logging.getLogger("crc.data")
TOO_FEW = 10
"""Rows (present values) a column needs, more than this, before a pattern in it is warned about."""
MANY_CATEGORIES = 10
"""More categories than this (the most a numeric column may have and still be discrete) count as many."""
ROWS_PER_CATEGORY = 10
"""Fewer values per category than this, on average, in a column of many categories: a warning."""


def warn_row_number(name: str, column) -> None:
    """Warn if ``column`` holds the consecutive integers lo, lo + 1, ..., hi, one per row,
    in more than ``TOO_FEW`` rows: a row number, which tells the class of a file sorted by class."""
    rows = column.number_rows()[0]
    present = rows[~np.isnan(rows)]
    if present.size <= TOO_FEW or not np.array_equal(present, np.round(present)):
        return
    low, high = present.min(), present.max()
    if high - low + 1 == present.size and np.unique(present).size == present.size:
        LOG.warning(
            f"feature column {name!r} holds the integers {low:.0f} to {high:.0f}, one per row: a row number or an "
            f"identifier? It is a feature like any other (in a file sorted by class it gives the class away); drop it")


def warn_rare_categories(name: str, categories: int, values: int) -> None:
    """Warn if a discrete column has more than ``MANY_CATEGORIES`` categories, seen fewer
    than ``ROWS_PER_CATEGORY`` times each on average: naive Bayes' unsmoothed category frequencies of such a column
    outweigh the other features."""
    if categories > MANY_CATEGORIES and values < ROWS_PER_CATEGORY * categories:
        LOG.warning(
            f"feature column {name!r} has {categories} categories for {values} values ({values / categories:.1f} each on "
            f"average): its frequencies, estimated per class from so few, can outweigh every other feature; merge its "
            f"rare categories or drop it")


def _canonical_codes(column) -> np.ndarray:
    """(m,) each row's index among the column's distinct canonical spellings, -1 where missing."""
    index: dict[str, int] = {}
    per_value = np.array([index.setdefault(spelling, len(index)) for spelling in column.canonical] + [-1], dtype=np.int64)
    return per_value[column.codes]


def warn_label_copy(name: str, column, label: str, label_column) -> None:
    """Warn if the discrete ``column`` matches the classes one to one in more than
    ``TOO_FEW`` rows: the label again (a class code), which gives the class away."""
    values, classes = _canonical_codes(column), _canonical_codes(label_column)
    both = (values >= 0) & (classes >= 0)
    n_values, n_classes = int(values.max()) + 1, int(classes.max()) + 1
    if both.sum() <= TOO_FEW or n_values != n_classes:  # each value of a column is present in some row
        return
    seen = np.bincount(values[both] * n_classes + classes[both], minlength=n_values * n_classes).reshape(n_values, n_classes)
    seen = seen[seen.any(axis=1)][:, seen.any(axis=0)] > 0  # (values present, classes present): seen together
    if seen.shape[1] >= 2 and (seen.sum(axis=0) == 1).all() and (seen.sum(axis=1) == 1).all():
        LOG.warning(
            f"feature column {name!r} matches the classes one to one (each of its values goes with one class): a copy "
            f"of the label column {label!r}? It gives the class away; drop it")
