"""Table columns in factorized form: each distinct cell once, and every row's index into them.

Schema inference and encoding look at each distinct value once (a Python
step per distinct value) and at the rows only through numpy indexing, so a
million-row column with a few categories, or a float column of any length,
costs array operations rather than a Python call per cell. A CSV reader can
build columns straight from its parser's output (``Column.factorized``);
Python lists, numpy arrays and DataFrame columns go through ``as_column``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

MISSING_TOKENS = frozenset({"", "?", "nan", "NaN", "NAN", "NA", "N/A", "n/a", "null", "NULL"})
"""The spellings of a missing cell: empty, ``?`` (KEEL), ``nan`` (Python), ``NA`` (R), ``null`` (SQL exports)."""
MISSING_NAMED = "empty, ?, nan, NA, N/A and null cells are missing values"
"""``MISSING_TOKENS`` for a message: a label column must have none (a class spelled NA is read as missing)."""


def is_missing(cell: str) -> bool:
    """True for a spelling of a missing cell (``MISSING_TOKENS``)."""
    return cell.strip() in MISSING_TOKENS


def as_number(cell: str) -> float | None:
    """The finite number a cell spells, else None."""
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def separator_hint(names) -> str:
    """A hint for an error about a header of one column whose name holds a semicolon or a tab (a file separated by
    it, as a spreadsheet in a language with decimal commas saves one), else ""."""
    names = list(names)
    separator = next((c for c in ";\t" if len(names) == 1 and c in str(names[0])), None)
    if separator is None:
        return ""
    return (f" (the file looks separated by {separator!r}: crc reads comma-separated files; save it with commas "
            f"between cells and points in numbers)")


def headerless_hint(names) -> str:
    """A hint for an error about a header whose names are all numbers written as text, or all but one of two numbers
    or more (a file written without a header, its first row's class as a name: ``5.1,3.5,1.4,0.2,setosa``), else
    ""."""
    names = list(names)
    numbers = sum(isinstance(name, str) and as_number(name) is not None for name in names)
    if not names or numbers < len(names) - (1 if numbers >= 2 else 0):
        return ""
    return " (its first line looks like data, not column names: add a header row naming the columns)"


def canonical_number(value: float) -> str:
    """One spelling per finite number: ``1.0`` becomes ``"1"``."""
    return repr(int(value)) if value.is_integer() else repr(value)


def canonical_value(cell: str) -> str:
    """One spelling per value: ``"1"``, ``"1.0"`` and ``" 1 "`` all become ``"1"``."""
    cell = cell.strip()
    number = as_number(cell)
    return cell if number is None else canonical_number(number)


def _cell(value) -> str:
    """A raw value as its cell text; None and NaN are the empty (missing) cell."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return ""
    return str(value)


@dataclass(frozen=True)
class Column:
    """One column of m rows: ``codes`` (m,) int64 indexes ``values`` (u,), -1 where the cell is missing.

    ``values`` holds distinct present values: float64 when the column was read as numbers, otherwise an
    object array of cell strings (raw spellings; several may share one canonical spelling).
    """

    codes: np.ndarray
    values: np.ndarray

    @classmethod
    def factorized(cls, codes: np.ndarray, values: np.ndarray) -> Column:
        """A column from a factorization (codes -1 for missing); string values that spell a missing cell
        (``?``, ``nan``, blanks) are turned into missing codes here."""
        codes = np.asarray(codes, dtype=np.int64)
        if values.dtype.kind == "f":
            return cls(codes, np.asarray(values, dtype=np.float64))
        cells = np.array([_cell(v) for v in values], dtype=object)
        missing = np.array([is_missing(c) for c in cells], dtype=bool)
        if missing.any():
            keep = np.flatnonzero(~missing)
            remap = np.full(len(cells) + 1, -1, dtype=np.int64)  # index -1 (missing) stays -1
            remap[keep] = np.arange(len(keep))
            codes = remap[codes]
            cells = cells[keep]
        return cls(codes, cells)

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def numeric_dtype(self) -> bool:
        """Read as numbers (every value a float), not as text."""
        return self.values.dtype.kind == "f"

    @cached_property
    def canonical(self) -> list[str]:
        """Canonical spelling of each value (see ``canonical_value``); non-finite numbers keep their repr."""
        if self.numeric_dtype:
            return [canonical_number(v) if math.isfinite(v) else repr(v) for v in self.values.tolist()]
        return [canonical_value(v) for v in self.values]

    @cached_property
    def numbers(self) -> np.ndarray:
        """(u,) the finite number each value spells, NaN where it spells none."""
        if self.numeric_dtype:
            return np.where(np.isfinite(self.values), self.values, np.nan)
        return np.array([math.nan if (n := as_number(v.strip())) is None else n for v in self.values], dtype=np.float64)

    def cells(self) -> list[str]:
        """Each row's canonical spelling, ``""`` where missing."""
        return np.append(np.array(self.canonical, dtype=object), "")[self.codes].tolist()

    def texts(self) -> list[str]:
        """Each row's cell as written (stripped), ``""`` where missing: a column read as text (``read_csv``'s
        ``text``), whose values are spellings; a ValueError for one read as numbers."""
        if self.numeric_dtype:
            raise ValueError("a column read as numbers keeps no spellings")
        return np.append(np.array([value.strip() for value in self.values], dtype=object), "")[self.codes].tolist()

    def has_values(self) -> bool:
        """True if some cell is present."""
        return len(self.values) > 0

    def all_numbers(self) -> bool:
        """True if every present value spells a finite number."""
        return not np.isnan(self.numbers).any()

    def distinct_at_most(self, limit: int) -> bool:
        """True if the column has at most ``limit`` distinct present canonical values."""
        if self.numeric_dtype and len(self.values) > limit:
            return False  # distinct finite floats have distinct canonical spellings
        return len(set(self.canonical)) <= limit

    def first_row(self, value_index: int) -> int:
        """Index of the first row holding value ``value_index``."""
        return int(np.argmax(self.codes == value_index))

    def shown(self, value_index: int) -> str:
        """Value ``value_index`` as a message shows it: a finite number (or text that spells one) by its canonical
        spelling (``0.35``, ``10``), anything else by its repr (``'c'``, ``inf``), never ``np.float64(…)``."""
        if not math.isnan(self.numbers[value_index]):
            return self.canonical[value_index]
        value = self.values[value_index]
        return repr(float(value)) if self.numeric_dtype else repr(value)

    def gather(self, per_value: np.ndarray) -> np.ndarray:
        """(m,) float64: ``per_value`` (u,) at each row's value, NaN at missing cells."""
        return np.append(np.asarray(per_value, dtype=np.float64), np.nan)[self.codes]

    def number_rows(self) -> tuple[np.ndarray, int | None]:
        """(m,) each row's number (NaN where missing), and the index of a value that is not a finite number
        (None if there is none)."""
        bad = np.flatnonzero(np.isnan(self.numbers))
        return self.gather(self.numbers), (int(bad[0]) if bad.size else None)


class NumberColumn:
    """A column read as numbers, kept per row: ``rows`` (m,) float64, NaN where missing.

    It is factorized (into a ``Column``) only when asked for its distinct values, so a continuous column
    of a large table never pays for hashing or sorting its values.
    """

    SAMPLE = 4096
    """Rows looked at first when counting distinct values: more than the limit there settles it."""

    def __init__(self, rows: np.ndarray):
        self.rows = np.asarray(rows, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def factorized(self) -> Column:
        return as_column(self.rows)

    @property
    def codes(self) -> np.ndarray:
        return self.factorized.codes

    @property
    def values(self) -> np.ndarray:
        return self.factorized.values

    @property
    def canonical(self) -> list[str]:
        return self.factorized.canonical

    @property
    def numeric_dtype(self) -> bool:
        return True

    @property
    def numbers(self) -> np.ndarray:
        return self.factorized.numbers

    def cells(self) -> list[str]:
        return self.factorized.cells()

    def first_row(self, value_index: int) -> int:
        return self.factorized.first_row(value_index)

    def shown(self, value_index: int) -> str:
        return self.factorized.shown(value_index)

    def gather(self, per_value: np.ndarray) -> np.ndarray:
        return self.factorized.gather(per_value)

    def has_values(self) -> bool:
        return bool((~np.isnan(self.rows)).any())

    def all_numbers(self) -> bool:
        return bool(np.isfinite(self.rows[~np.isnan(self.rows)]).all())

    def distinct_at_most(self, limit: int) -> bool:
        sample = self.rows[: self.SAMPLE]
        if len(np.unique(sample[~np.isnan(sample)])) > limit:
            return False
        return self.factorized.distinct_at_most(limit)

    def number_rows(self) -> tuple[np.ndarray, int | None]:
        finite = np.isfinite(self.rows) | np.isnan(self.rows)
        if finite.all():
            return self.rows, None
        return self.factorized.number_rows()


def as_column(values) -> Column:
    """A Column from a Column, a numpy array, a pandas Series or any sequence of cells.

    Floating-point arrays are factorized with numpy (NaN is missing); anything else cell by cell as text
    (None, NaN, ``""``, ``?`` and ``nan`` are missing).
    """
    if isinstance(values, (Column, NumberColumn)):
        return values
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"a column must be one-dimensional, got shape {array.shape}")
    if array.dtype.kind == "f":
        present = ~np.isnan(array)
        distinct, inverse = np.unique(array[present], return_inverse=True)
        codes = np.full(len(array), -1, dtype=np.int64)
        codes[present] = inverse.reshape(-1)
        return Column(codes, distinct.astype(np.float64))
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(_cell(v), len(index)) for v in array.tolist()), dtype=np.int64, count=len(array))
    return Column.factorized(codes, np.array(list(index), dtype=object))
