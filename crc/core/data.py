"""Tables of raw cells, their encoding under a schema, and seeded splits.

Encoded matrices have shape (m, d) and dtype float64: a continuous feature
holds its standardized value, a discrete one its category code; NaN marks a
missing cell. Labels are int64 class codes.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np

from crc.core.columns import MISSING_NAMED, Column, as_column, headerless_hint
from crc.core.errors import CRCError, named_errors
from crc.core.files import atomic_write_text
from crc.core.schema import CONTINUOUS, Feature, Schema, infer_features, infer_schema

MAX_LISTED = 12
"""Known categories or classes an error names at most."""


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


def encode(schema: Schema, columns: dict, *, labels: bool = True,
           source: str = "data") -> tuple[np.ndarray, np.ndarray | None]:
    """Encode a table's columns under a schema (no standardization).

    ``columns`` maps names to cells (a ``Column``, or anything ``as_column`` takes). Returns ``x`` of shape
    (m, d) and ``y`` of shape (m,) (None when ``labels`` is False). Raises CRCError for a missing or unexpected
    column, an unknown category or class, or an unparsable number, naming the column and the data row.
    """
    allowed = set(schema.feature_names) | {schema.label}
    missing_cols = [c for c in schema.feature_names + ([schema.label] if labels else []) if c not in columns]
    if missing_cols:
        raise CRCError(f"{source}: missing column(s) {', '.join(map(repr, missing_cols))}{headerless_hint(columns)}")
    extra = [c for c in columns if c not in allowed]
    if extra:
        raise CRCError(f"{source}: column(s) not in the schema: {', '.join(map(repr, extra))}: drop them, or make the "
                       f"schema from a table that has them")
    m = len(as_column(columns[schema.features[0].name if schema.features else schema.label]))
    x = np.empty((m, len(schema.features)))
    for j, feature in enumerate(schema.features):
        column = as_column(columns[feature.name])
        if feature.kind == CONTINUOUS:
            x[:, j] = _numbers(column, feature.name, source)
        else:
            x[:, j] = column.gather(_codes(column, feature.categories, source, f"column {feature.name!r} has unknown category",
                                           "correct the cell, or leave it empty (a missing value, which the model goes without)"))
    if not labels:
        return x, None
    column = as_column(columns[schema.label])
    missing = np.flatnonzero(column.codes < 0)
    if missing.size:
        raise CRCError(f"{source}: missing label in data row {missing[0] + 1} ({MISSING_NAMED})")
    y = column.gather(_codes(column, schema.classes, source, "unknown class")).astype(np.int64)
    return x, y


def _numbers(column: Column, name: str, source: str) -> np.ndarray:
    """(m,) each row's number, NaN where missing; a cell that is not a finite number is an error."""
    rows, bad = column.number_rows()
    if bad is not None:
        raise CRCError(f"{source}: column {name!r} is continuous but holds {column.shown(bad)} "
                       f"(not a finite number) in data row {column.first_row(bad) + 1} ({MISSING_NAMED})")
    return rows


def _codes(column: Column, known: tuple[str, ...], source: str, what: str, fix: str = "") -> np.ndarray:
    """(u,) the index in ``known`` of each of the column's values (by canonical spelling); an unknown one is an error
    naming at most ``MAX_LISTED`` known values, then ``fix`` (what to do)."""
    index = {value: k for k, value in enumerate(known)}
    codes = np.empty(len(column.values))
    for i, spelling in enumerate(column.canonical):
        code = index.get(spelling)
        if code is None:
            listed = ", ".join(known[:MAX_LISTED]) + (f", ... ({len(known)} in all)" if len(known) > MAX_LISTED else "")
            raise CRCError(f"{source}: {what} {column.shown(i)} in data row {column.first_row(i) + 1}; known: {listed}"
                           + (f": {fix}" if fix else ""))
        codes[i] = code
    return codes


def dataset_from_columns(columns: dict, label: str, name: str = "", *, categorical=(), source: str = "") -> Dataset:
    """Infer the schema of a table (columns as ``encode`` takes them; the features named in ``categorical``
    discrete whatever their values) and encode it; a CRCError names ``source`` (the path given), else ``name``."""
    columns = {key: as_column(cells) for key, cells in columns.items()}
    source = source or name or "data"
    with named_errors(source):
        schema = infer_schema(columns, label, categorical=categorical)
    x, y = encode(schema, columns, source=source)
    return Dataset(schema, x, y, name)


def own_features(columns: dict, *, source: str = "data", categorical=()) -> tuple[Feature, ...]:
    """The features of a vertical party's own ``columns`` (as ``encode`` takes them, without the label): inferred by
    ``infer_features``, with the standardization (mean, std) of their continuous columns (encoded as a schema of these
    features alone, which is never written); a CRCError names ``source``."""
    with named_errors(source):
        features = infer_features(columns, categorical=categorical)
    alone = Schema(label="", classes=(), features=features)
    x, _ = encode(alone, columns, labels=False, source=source)
    return alone.standardized(x[:, alone.continuous]).features


def to_columns(dataset: Dataset, rows: np.ndarray) -> dict[str, list[str]]:
    """The raw cells of ``rows`` (feature columns, then the label), as they would be written to a CSV file.

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

    ``columns`` is ``{feature name: cells}`` or a DataFrame (extra columns such as
    the label are ignored), or an (m, d) array-like in the schema's feature order.
    Cells may be strings or numbers; None, NaN, ``""`` and ``?`` are missing.
    """
    names = schema.feature_names
    if hasattr(columns, "keys"):  # a dict or a DataFrame
        missing = [name for name in names if name not in columns]
        if missing:
            raise CRCError(f"{source}: missing column(s) {', '.join(map(repr, missing))}{headerless_hint(columns)}")
        cells = {name: columns[name] for name in names}
    else:
        rows = np.asarray(columns)
        if rows.ndim != 2 or rows.shape[1] != len(names):
            raise CRCError(f"{source}: expected {len(names)} feature columns ({', '.join(names)}), got shape {rows.shape}")
        cells = {name: rows[:, j] for j, name in enumerate(names)}
    x, _ = encode(schema, cells, labels=False, source=source)
    out = standardize(schema, x)
    far = np.argwhere(np.abs(out) > MAX_STANDARDIZED)
    if far.size:
        row, j = far[0]
        raise CRCError(f"{source}: instance {row + 1} has a value too large for the schema's standardization "
                       f"({x[row, j]:.3g} in column {schema.features[j].name!r}): correct the cell, or leave it empty")
    return out


MAX_STANDARDIZED = 1e150
"""Largest standardized value ``encode_features`` accepts: the models square it (naive Bayes' statistics, a Gaussian's
exponent), which would be infinite."""


def standardize(schema: Schema, x: np.ndarray) -> np.ndarray:
    """Apply the schema's standardization to the continuous columns of ``x`` (a copy)."""
    out = np.array(x, dtype=np.float64, copy=True)
    with np.errstate(over="ignore"):
        for j in schema.continuous:
            feature = schema.features[j]
            out[:, j] = (out[:, j] - feature.mean) / feature.std
    return out


def split_counts(m: int, n_train: int, test_size: float, *, source: str = "") -> tuple[int, int]:
    """``(test instances, what test_size asks for)`` out of ``m`` beside ``n_train`` training instances.

    ``test_size`` below 1 is a fraction of ``m``; when ``m`` is too small for it and the training set, the test set
    is the instances the training set leaves (fewer than asked). At least 1 is a count, given in full. Raises a
    CRCError when no test instance is left, or a count does not fit (naming the data set's ``source``, if given).
    """
    fraction = test_size < 1
    wanted = int(round(test_size * m)) if fraction else int(test_size)
    if wanted < 1:
        raise CRCError(f"test size {test_size} leaves no test instance out of {m}")
    n_test = min(wanted, m - n_train) if fraction else wanted
    if n_test < 1 or n_train + n_test > m:
        raise CRCError(f"{source + ': ' if source else ''}data set has {m} instances, fewer than the {n_train} training "
                       f"(nodes x local size) plus "
                       f"{n_test if n_test >= 1 else 'at least 1'} test instance{'s' if n_test > 1 else ''} needed: at "
                       f"most {m - max(n_test, 1)} training instances fit, so give fewer peers or fewer instances each"
                       + ("" if fraction or m <= n_train else f", or a test size of at most {m - n_train} (it is a count)"))
    return n_test, wanted


def split_indices(m: int, n_train: int, test_size: float, *, seed=None, source: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Seeded disjoint training and test indices.

    The test set has ``split_counts(m, n_train, test_size)[0]`` instances (a fraction of ``m``, or what the
    training set leaves, or a count). The training indices are ``n_train`` draws without replacement from
    what the test set leaves. Raises CRCError when the data are too few (naming ``source``, if given).
    """
    n_test, _ = split_counts(m, n_train, test_size, source=source)
    order = np.random.default_rng(seed).permutation(m)
    return order[n_test:n_test + n_train], order[:n_test]
