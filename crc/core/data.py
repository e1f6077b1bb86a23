"""Tables of raw cells, their encoding under a schema, and seeded splits.

Encoded matrices have shape (m, d) and dtype float64: a continuous feature
holds its standardized value, a discrete one its category code; NaN marks a
missing cell. Labels are int64 class codes.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from dataclasses import dataclass

import numpy as np

from crc.core.errors import CRCError
from crc.core.files import atomic_write_text
from crc.core.schema import CONTINUOUS, Schema, canonical_value, infer_schema, is_missing

MAX_TABLE_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Dataset:
    """A schema with its data, continuous features not yet standardized.

    Attributes
    ----------
    schema : Schema
    x : ndarray of shape (m, d)
        Raw continuous values and discrete category codes, NaN for missing.
    y : ndarray of shape (m,)
        Class codes.
    name : str
    """

    schema: Schema
    x: np.ndarray
    y: np.ndarray
    name: str = ""

    def __len__(self) -> int:
        return len(self.y)


def read_csv(path, *, header: bool = True, max_bytes: int = MAX_TABLE_BYTES) -> dict[str, list[str]]:
    """Read a comma-separated file (plain or ``.gz``) into raw string columns.

    Without a header the columns are named ``x1 … xd`` and the last one ``class``.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise CRCError(f"{path}: no such file") from None
    except (OSError, EOFError) as exc:
        raise CRCError(f"{path}: cannot read ({exc})") from None
    if len(raw) > max_bytes:
        raise CRCError(f"{path}: larger than {max_bytes} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CRCError(f"{path}: not UTF-8 text ({exc})") from None
    rows = [row for row in csv.reader(io.StringIO(text)) if row and any(c.strip() for c in row)]
    if not rows:
        raise CRCError(f"{path}: no rows")
    if header:
        names = [name.strip() for name in rows.pop(0)]
        if len(set(names)) != len(names) or "" in names:
            raise CRCError(f"{path}: header has empty or repeated column names")
    else:
        names = [f"x{j + 1}" for j in range(len(rows[0]) - 1)] + ["class"]
    for i, row in enumerate(rows):
        if len(row) != len(names):
            line = i + 2 if header else i + 1
            raise CRCError(f"{path}: line {line} has {len(row)} cells, expected {len(names)}")
    if not rows:
        raise CRCError(f"{path}: header but no data rows")
    return {name: [row[j].strip() for row in rows] for j, name in enumerate(names)}


def encode(schema: Schema, columns: dict[str, list[str]], *, labels: bool = True,
           source: str = "data") -> tuple[np.ndarray, np.ndarray | None]:
    """Encode raw columns under a schema (no standardization).

    Returns ``x`` of shape (m, d) and ``y`` of shape (m,) (None when ``labels`` is
    False). Raises CRCError for a missing or unexpected column, an unknown
    category or class, or an unparsable number.
    """
    allowed = set(schema.feature_names) | {schema.label}
    missing_cols = [c for c in schema.feature_names + ([schema.label] if labels else []) if c not in columns]
    if missing_cols:
        raise CRCError(f"{source}: missing column(s) {', '.join(map(repr, missing_cols))}")
    extra = [c for c in columns if c not in allowed]
    if extra:
        raise CRCError(f"{source}: column(s) not in the schema: {', '.join(map(repr, extra))}")
    m = len(next(iter(columns.values())))
    x = np.empty((m, len(schema.features)))
    for j, feature in enumerate(schema.features):
        cells = columns[feature.name]
        if feature.kind == CONTINUOUS:
            x[:, j] = [_parse_number(c, feature.name, source) for c in cells]
        else:
            codes = {c: k for k, c in enumerate(feature.categories)}
            x[:, j] = [_code(c, codes, feature.name, source) for c in cells]
    if not labels:
        return x, None
    class_codes = {c: k for k, c in enumerate(schema.classes)}
    y = np.empty(m, dtype=np.int64)
    for i, cell in enumerate(columns[schema.label]):
        if is_missing(cell):
            raise CRCError(f"{source}: missing label in data row {i + 1}")
        code = class_codes.get(canonical_value(cell))
        if code is None:
            raise CRCError(f"{source}: unknown class {cell!r} in data row {i + 1}; schema classes are {', '.join(schema.classes)}")
        y[i] = code
    return x, y


def _parse_number(cell: str, name: str, source: str) -> float:
    if is_missing(cell):
        return math.nan
    try:
        value = float(cell)
    except ValueError:
        raise CRCError(f"{source}: column {name!r} is continuous but holds {cell!r}") from None
    if not math.isfinite(value):
        raise CRCError(f"{source}: column {name!r} holds non-finite value {cell!r}")
    return value


def _code(cell: str, codes: dict[str, int], name: str, source: str) -> float:
    if is_missing(cell):
        return math.nan
    code = codes.get(canonical_value(cell))
    if code is None:
        raise CRCError(f"{source}: column {name!r} has unknown category {cell!r}; known: {', '.join(codes)}")
    return float(code)


def dataset_from_columns(columns: dict[str, list[str]], label: str, name: str = "") -> Dataset:
    """Infer the schema of a table and encode it."""
    schema = infer_schema(columns, label)
    x, y = encode(schema, columns, source=name or "data")
    return Dataset(schema, x, y, name)


def raw_cells(values) -> list[str]:
    """Raw string cells of any values; None and NaN become the empty (missing) cell."""
    return ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in values]


def to_columns(dataset: Dataset, rows: np.ndarray) -> dict[str, list[str]]:
    """The raw cells of ``rows`` (feature columns, then the label), as ``read_csv`` would return them.

    Continuous values are written with ``repr`` (exact for float64), categories and
    classes as their strings, missing cells empty.
    """
    schema = dataset.schema
    columns = {}
    for j, feature in enumerate(schema.features):
        values = dataset.x[rows, j]
        if feature.kind == CONTINUOUS:
            columns[feature.name] = ["" if math.isnan(v) else repr(float(v)) for v in values]
        else:
            columns[feature.name] = ["" if math.isnan(v) else feature.categories[int(v)] for v in values]
    columns[schema.label] = [schema.classes[int(k)] for k in dataset.y[rows]]
    return columns


def format_csv(columns: dict[str, list[str]]) -> str:
    """Raw columns as comma-separated text with a header row."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(list(columns))
    writer.writerows(zip(*columns.values()))
    return stream.getvalue()


def write_csv(path, columns: dict[str, list[str]]) -> None:
    atomic_write_text(path, format_csv(columns))


def encode_features(schema: Schema, columns, *, source: str = "data") -> np.ndarray:
    """Standardized encoded features (m, d) of raw feature cells, for prediction.

    ``columns`` is ``{feature name: [cell, ...]}`` (extra columns such as the label
    are ignored), or an (m, d) array-like in the schema's feature order. Cells may
    be strings or numbers; None, NaN, ``""`` and ``?`` are missing.
    """
    names = schema.feature_names
    if isinstance(columns, dict):
        missing = [name for name in names if name not in columns]
        if missing:
            raise CRCError(f"{source}: missing column(s) {', '.join(map(repr, missing))}")
        cells = {name: raw_cells(columns[name]) for name in names}
    else:
        rows = np.asarray(columns, dtype=object)
        if rows.ndim != 2 or rows.shape[1] != len(names):
            raise CRCError(f"{source}: expected {len(names)} feature columns ({', '.join(names)}), got shape {rows.shape}")
        cells = {name: raw_cells(rows[:, j]) for j, name in enumerate(names)}
    x, _ = encode(schema, cells, labels=False, source=source)
    return standardize(schema, x)


def standardize(schema: Schema, x: np.ndarray) -> np.ndarray:
    """Apply the schema's standardization to the continuous columns of ``x`` (a copy)."""
    out = np.array(x, dtype=np.float64, copy=True)
    for j in schema.continuous:
        feature = schema.features[j]
        out[:, j] = (out[:, j] - feature.mean) / feature.std
    return out


def split_indices(m: int, n_train: int, test_size: float, *, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """Seeded disjoint training and test indices.

    ``test_size`` below 1 is a fraction of ``m``, otherwise a count. The training
    indices are ``n_train`` draws without replacement from what the test set
    leaves. Raises CRCError when the data are too few.
    """
    n_test = int(round(test_size * m)) if test_size < 1 else int(test_size)
    if n_test < 1:
        raise CRCError(f"test size {test_size} leaves no test instance out of {m}")
    if n_train + n_test > m:
        raise CRCError(
            f"data set has {m} instances, fewer than the {n_train} training (nodes x local size) plus {n_test} test instances needed"
        )
    order = np.random.default_rng(seed).permutation(m)
    return order[n_test:n_test + n_train], order[:n_test]
