"""Warnings about columns that are legal but suspect: a header that reads as a data row, a row number, an identifier
given in class order, a column of many rare categories, a copy of the label, a feature missing in every row of a class,
values that differ only in letter case or spaces, a code for a missing value (-999) among numbers, a value that
swamps its column's standardization, a label of many fractional numbers. Each is read as any
column is, and named on the ``crc.data`` logger (``Warning:`` lines on a command's standard error, once per command)."""

from __future__ import annotations

import logging
import unicodedata

import numpy as np

from crc.core.columns import as_number, canonical_value, headerless_hint

LOG = logging.getLogger("crc.data")
TOO_FEW = 10
"""Rows (present values) a column needs, more than this, before a pattern in it is warned about."""
MANY_CATEGORIES = 10
"""More categories than this (the most a numeric column may have and still be discrete) count as many."""
ROWS_PER_CATEGORY = 10
"""Fewer values per category than this, on average, in a column of many categories: a warning."""


def warn_row_number(name: str, column, label_column=None) -> None:
    """Warn if ``column`` holds a different integer in each of more than ``TOO_FEW`` rows, and they are the consecutive
    lo, lo + 1, ..., hi (a row number, which tells the class of a file sorted by class) or, given the ``label_column``,
    the rows of each class hold a range of their own, the ranges of two classes or more apart (an identifier given in
    class order: patient numbers 84300903 and up)."""
    rows = column.number_rows()[0]
    present = rows[~np.isnan(rows)]
    if (present.size <= TOO_FEW or not np.array_equal(present, np.round(present))
            or np.unique(present).size < present.size):
        return
    low, high = present.min(), present.max()
    if high - (present.size - 1) == low:  # no high - low: it may overflow
        LOG.warning(
            f"feature column {name!r} holds the integers {low:.0f} to {high:.0f}, one per row: a row number or an "
            f"identifier? It is a feature like any other (in a file sorted by class it gives the class away); drop it")
    elif label_column is not None:
        _warn_class_ordered(name, rows, present.size, label_column)


CLASS_RANGES_SHOWN = 3
"""The classes whose ranges a warning about an identifier given in class order names."""


def _warn_class_ordered(name: str, rows: np.ndarray, distinct: int, label_column) -> None:
    """``warn_row_number``'s warning of an identifier given in class order, if the ``distinct`` integers of ``rows``
    (m,) (NaN where missing) fall in a range per class, apart."""
    codes, spellings = _canonical_values(label_column)
    valued = ~np.isnan(rows) & (codes >= 0)
    ranges = sorted((rows[valued & (codes == k)].min(), rows[valued & (codes == k)].max(), spellings[k])
                    for k in np.unique(codes[valued]))
    if len(ranges) < 2 or any(high >= next_low for (_, high, _), (next_low, _, _) in zip(ranges, ranges[1:])):
        return
    shown = ", ".join(f"{spelling!r} {low:.0f} to {high:.0f}" for low, high, spelling in ranges[:CLASS_RANGES_SHOWN])
    more = f" and {len(ranges) - CLASS_RANGES_SHOWN} more" if len(ranges) > CLASS_RANGES_SHOWN else ""
    LOG.warning(
        f"feature column {name!r} holds a different integer in each of its {distinct} rows, those of each class in a "
        f"range of its own ({shown}{more}): an identifier given in class order? It gives the class away; drop it")


MISSING_CODES = frozenset(float(sign + "9" * digits) for sign in ("", "-") for digits in range(2, 7))
"""Numbers that data exports write for a missing value: 99, 999, ..., 999999 and their negatives."""
CODE_GAP = 3
"""A code this many times the spread of a column's other values beyond them is warned about."""


SWAMPING_SPREADS = 1e6
"""Interquartile ranges from the median beyond which one value swamps its column's standardization: divided by a
standard deviation it makes (about its distance over the square root of the rows), the other values end within about
1e-4 of each other, and the class variances of the column sit at their floor."""


def median_and_spread(present: np.ndarray) -> tuple[float, float] | None:
    """The median of a continuous column's ``present`` values (m,) and their spread: the interquartile range, or the
    smallest gap between two values when that range is 0; None for fewer than two different values or a median or
    spread that is not finite."""
    values = np.unique(present)
    if values.size < 2:
        return None
    with np.errstate(all="ignore"):
        low, median, high = np.percentile(present, [25, 50, 75])
        spread = (high - low) or np.diff(values).min()
    return (float(median), float(spread)) if np.isfinite([median, spread]).all() else None


def warn_swamping_value(name: str, rows: np.ndarray, distance: np.ndarray, median: float, spread: float) -> None:
    """Warn if a value of a continuous column's ``rows`` (m,) (NaN where missing) lies more than ``SWAMPING_SPREADS``
    times its ``spread`` from its ``median`` (``median_and_spread``; ``distance`` (m,): each row's from it), 1e12 among
    lengths of 4 to 8: standardized with it, the other values are all about 0, and the column says nothing of the
    classes."""
    if np.nanmax(distance) > SWAMPING_SPREADS * spread:
        row = int(np.nanargmax(distance))
        LOG.warning(f"feature column {name!r} holds {rows[row]:.3g} in data row {row + 1}, {distance[row] / spread:.1e} times "
                    f"the spread of its values (interquartile range {spread:.3g}) from their median {median:.3g}: "
                    "standardized with it, every other value is about 0 and the column tells nothing of the classes; "
                    "a unit error or a typo? Correct the cell, or leave it missing")


def warn_missing_code(name: str, column) -> None:
    """Warn if the continuous ``column`` holds one of ``MISSING_CODES`` in two rows or more, beyond its other values
    by more than ``CODE_GAP`` times their spread (-999 among ages of 20 to 90): a code for a missing value, which crc
    would read as a number."""
    rows = column.number_rows()[0]
    for code in sorted(MISSING_CODES & set(np.unique(rows[~np.isnan(rows)]).tolist()), key=abs, reverse=True):
        others = rows[~np.isnan(rows) & (rows != code)]
        count = int((rows == code).sum())
        if count < 2 or others.size < 2:
            continue
        low, high = others.min(), others.max()
        if code > high + CODE_GAP * (high - low) or code < low - CODE_GAP * (high - low):
            LOG.warning(f"feature column {name!r} holds {code:.0f} in {count} rows, far outside its other values ({low:.4g} "
                        f"to {high:.4g}): a code for a missing value? crc reads it as a number; leave those cells empty")
            return


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
    return _canonical_values(column)[0]


def _canonical_values(column) -> tuple[np.ndarray, list[str]]:
    """(m,) each row's index among the column's distinct canonical spellings (-1 where missing), and those spellings
    in index order."""
    index: dict[str, int] = {}
    per_value = np.array([index.setdefault(spelling, len(index)) for spelling in column.canonical] + [-1], dtype=np.int64)
    return per_value[column.codes], list(index)


def warn_values_alike(what: str, values, kind: str) -> None:
    """Warn if two of ``values`` (a column's distinct canonical spellings) differ only in letter case, spaces or Unicode
    form (``Sick`` and ``sick``, ``no  pain`` and ``no pain``): one value written two ways, which crc reads as two
    ``kind`` (classes, categories). ``what`` names the column (``label column 'y'``)."""
    ways: dict[str, list[str]] = {}
    for value in values:
        ways.setdefault(" ".join(unicodedata.normalize("NFKC", value).casefold().split()), []).append(value)
    alike = next((spellings for spellings in ways.values() if len(spellings) > 1), None)
    if alike:
        LOG.warning(f"{what} has {' and '.join(map(repr, alike))}, which differ only in letter case or spaces: one value "
                    f"written {len(alike)} ways? crc reads them as {len(alike)} {kind}; write it one way")


def warn_missing_in_class(name: str, column, label: str, label_column) -> None:
    """Warn if ``column`` has a value in some row but in none of the more than ``TOO_FEW`` rows of a class: crc takes a
    missing value as unknown, so it learns nothing of the feature in that class, and loses what its absence tells
    (the class)."""
    present = column.codes >= 0
    classes, spellings = _canonical_values(label_column)
    rows = np.bincount(classes[classes >= 0], minlength=len(spellings))
    valued = np.bincount(classes[present & (classes >= 0)], minlength=len(spellings))
    empty = np.flatnonzero((rows > TOO_FEW) & (valued == 0))
    if present.any() and empty.size:
        LOG.warning(
            f"feature column {name!r} has no value in any of the {rows[empty[0]]} rows of class {spellings[empty[0]]!r}"
            f" (of the label column {label!r}): crc takes a missing value as unknown, so it learns nothing of {name!r} in "
            f"that class, and loses what its absence tells (the class); a column saying whether {name!r} was measured "
            "keeps that")


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


def warn_numeric_target(label: str, classes, rows: int, many: int) -> None:
    """Warn if the ``label`` column's distinct values ``classes`` (canonical spellings) over ``rows`` rows are more than
    ``many`` numbers, one of them not whole (``5.1``): a quantity to predict, not a class, which crc reads as that many
    classes (each value seen a few times; a test value never seen in training is always an error)."""
    numbers = [as_number(value) for value in classes]
    if None in numbers:  # a class that is text, or a number that is not finite ('inf'): not a quantity's values
        return
    fractional = [value for value, number in zip(classes, numbers) if number != round(number)]
    if len(classes) > many and fractional:
        LOG.warning(f"the label column {label!r} holds {len(classes)} different numbers in {rows} rows, such as "
                    f"{fractional[0]!r}: a quantity rather than a class? crc reads every value as a class of its own; "
                    f"--label names the class column (a quantity cut into ranges makes one)")


def warn_header_of_data(label: str, classes, names) -> None:
    """Warn if the ``label`` column's name is one of its own ``classes`` (canonical spellings) and the column ``names``
    are numbers but for it: the first line of a file without a header (``5.1,3.5,1.4,0.2,setosa`` with ``--label
    setosa``), read as names, its row left out."""
    hint = headerless_hint(names)
    if hint and canonical_value(label) in set(classes):
        LOG.warning(f"the label column's name {label!r} is one of its classes and the other columns are named by numbers"
                    f"{hint}; crc took that line for the header, leaving its row out")
