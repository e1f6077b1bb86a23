"""What all peers must agree on: classes, feature kinds, categories, standardization.

A `Schema` is inferred once from a table of raw string cells (the rule of the
paper: a non-numeric column, or one with at most ten distinct values, is
discrete; ``infer_schema`` takes the limit and the columns that are discrete
whatever their values), serialized to JSON, and shared. Its `fingerprint` is a stable hash
of that JSON; together with a model's statistics layout it gives the schema id
that every network message carries.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from crc.core import fields
from crc.core.columns import MISSING_NAMED, as_column, as_number, headerless_hint, separator_hint
from crc.core.errors import CRCError
from crc.core.files import atomic_write_text, read_json
from crc.core.suspect_columns import (
    median_and_spread,
    warn_header_of_data,
    warn_label_copy,
    warn_missing_code,
    warn_missing_in_class,
    warn_numeric_target,
    warn_rare_categories,
    warn_row_number,
    warn_swamping_value,
    warn_values_alike,
)

CONTINUOUS = "continuous"
DISCRETE = "discrete"
MAX_DISCRETE_DISTINCT = 10
STRAY_TEXT_MAX = 2
"""A column of more than ``MAX_DISCRETE_DISTINCT`` distinct numbers and at most this many distinct other values
(R's ``NA``, ``n/a``, a typo) is refused: read as discrete, it would silently become hundreds of categories."""
COMMA_NUMBER = re.compile(r"[+-]?\d+(,\d+)+")
"""Digits with commas: a decimal comma (``3,11``) or thousands separators (``1,234``)."""
UNIT_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*(?P<unit>%|[^\W\d_][\w/.]*)")
"""A number followed by a unit: ``12%``, ``5 mg``, ``3.5kg``, ``80/min``."""
SCHEMA_FORMAT = "crc-schema/1"
FEATURES_FORMAT = "crc-features/1"
"""A features file: the kinds, categories and standardization of one vertical party's own columns, without label or
classes (``features_to_json``); the label holder joins the members' into the group's schema (``joined``)."""
MAX_SCHEMA_BYTES = 16 * 2**20
MAX_SPREADS = 1e140
"""Most interquartile ranges a continuous feature's value may lie from the column's median: standardized, it is about
as many standard deviations, and the models square it (past 1e280, near float64's largest, 1.8e308)."""


def _sorted_values(values: set[str]) -> list[str]:
    """Numeric values in numeric order, otherwise lexicographic."""
    numbers = {v: as_number(v) for v in values}
    if all(n is not None for n in numbers.values()):
        return sorted(values, key=lambda v: numbers[v])
    return sorted(values)


@dataclass(frozen=True)
class Feature:
    """One input column.

    ``categories`` is set for discrete features (canonical spellings, in code
    order); ``mean`` and ``std`` for continuous ones (the standardization).
    """

    name: str
    kind: str
    categories: tuple[str, ...] = ()
    mean: float = 0.0
    std: float = 1.0

    def to_json(self) -> dict:
        if self.kind == DISCRETE:
            return {"name": self.name, "kind": self.kind, "categories": list(self.categories)}
        return {"name": self.name, "kind": self.kind, "mean": self.mean, "std": self.std}


@dataclass(frozen=True)
class Schema:
    """Class labels and features of a classification problem.

    Attributes
    ----------
    label : str
        Name of the label column.
    classes : tuple of str
        Class labels in code order (code ``k`` is ``classes[k]``).
    features : tuple of Feature
        Input columns in the order of the columns of the encoded matrix.
    """

    label: str
    classes: tuple[str, ...]
    features: tuple[Feature, ...] = field(default_factory=tuple)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def continuous(self) -> list[int]:
        """Column indices of the continuous features."""
        return [j for j, f in enumerate(self.features) if f.kind == CONTINUOUS]

    @property
    def discrete(self) -> list[int]:
        """Column indices of the discrete features."""
        return [j for j, f in enumerate(self.features) if f.kind == DISCRETE]

    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    def to_json(self) -> dict:
        return {
            "format": SCHEMA_FORMAT,
            "label": self.label,
            "classes": list(self.classes),
            "features": [f.to_json() for f in self.features],
        }

    @classmethod
    def from_json(cls, obj: object) -> Schema:
        """Validate and build a schema from parsed JSON (an untrusted object), field by field."""
        if not isinstance(obj, dict) or obj.get("format") != SCHEMA_FORMAT:
            raise CRCError(f"not a schema: expected an object with format {SCHEMA_FORMAT!r}")
        missing = [key for key in ("label", "classes", "features") if key not in obj]
        if missing:
            raise CRCError(f"malformed schema: missing or invalid field {', '.join(map(repr, missing))}")
        try:
            label = fields.string(obj["label"], "label")
            classes = tuple(fields.strings(obj["classes"], "classes"))
            features = _features_from_list(obj["features"])
        except CRCError as exc:
            raise CRCError(f"malformed schema: {exc}") from None
        if len(classes) < 2 or len(set(classes)) != len(classes):
            raise CRCError("malformed schema: need at least two distinct classes")
        if not features:  # as ``infer_schema`` refuses a table without one: the rows could not even be counted
            raise CRCError("malformed schema: no feature (a classifier needs one at least)")
        names = [f.name for f in features]
        if len(set(names)) != len(names) or label in names:
            raise CRCError("malformed schema: feature names must be distinct and differ from the label")
        return cls(label=label, classes=classes, features=features)

    def dumps(self) -> str:
        """Canonical JSON text (sorted keys, no spaces)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @property
    def fingerprint(self) -> str:
        """SHA-256 hex digest of the canonical JSON."""
        return hashlib.sha256(self.dumps().encode()).hexdigest()

    def save(self, path) -> None:
        atomic_write_text(path, json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def load(cls, path, *, max_bytes: int = MAX_SCHEMA_BYTES) -> Schema:
        """The schema file ``path``, read with the bounded JSON reader and validated; a CRCError names the file."""
        obj = read_json(path, max_bytes=max_bytes, what="schema file")
        try:
            return cls.from_json(obj)
        except CRCError as exc:
            raise CRCError(f"{path}: {exc}") from None

    def standardized(self, x_continuous: np.ndarray) -> Schema:
        """A copy whose continuous features carry the mean and std of the given data.

        Parameters
        ----------
        x_continuous : ndarray of shape (m, n_continuous)
            Raw (unstandardized) values of the continuous features, NaN for missing.
        """
        features = list(self.features)
        for col, j in enumerate(self.continuous):
            values = x_continuous[:, col]
            values = values[~np.isnan(values)]
            mean, std = moments(values) if values.size else (0.0, 0.0)
            std = std if std > 0 else 1.0  # a constant column carries no information; std 1 keeps it finite
            with np.errstate(over="ignore", invalid="ignore"):
                standardized = (values - mean) / std
            if not (np.isfinite(std) and np.isfinite(standardized).all()):
                raise CRCError(f"feature column {features[j].name!r} holds numbers too large to standardize (up to "
                               f"{np.abs(values).max():.3g}): rescale it")
            features[j] = replace(features[j], mean=mean, std=std)
        return replace(self, features=tuple(features))


def moments(values: np.ndarray, weight: np.ndarray | None = None) -> tuple[float, float]:
    """Mean and standard deviation of ``values`` (n,) (weighted by ``weight`` (n,) if given); computed on
    ``values / max |values|`` when the squares underflow to a deviation of 0 or overflow (units of 1e-200 or 1e200)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        mean, std = _plain_moments(values, weight)
        if not np.isfinite(std) or (std == 0 and values.min() != values.max()):
            scale = float(np.abs(values).max())
            mean, std = _plain_moments(values / scale, weight)
            mean, std = mean * scale, std * scale
    return mean, std


def _plain_moments(values: np.ndarray, weight: np.ndarray | None) -> tuple[float, float]:
    if weight is None:
        return float(values.mean()), float(values.std())
    mean = float(np.average(values, weights=weight))
    return mean, math.sqrt(np.average((values - mean) ** 2, weights=weight))


def features_to_json(features: tuple[Feature, ...]) -> dict:
    """A features file's JSON (``FEATURES_FORMAT``): one party's columns, no label or classes."""
    return {"format": FEATURES_FORMAT, "features": [f.to_json() for f in features]}


def load_features(path, *, max_bytes: int = MAX_SCHEMA_BYTES) -> tuple[Feature, ...]:
    """The features of the features file ``path`` (bounded read, validated: distinct names, at least one); a CRCError
    names the file."""
    obj = read_json(path, max_bytes=max_bytes, what="features file")
    if not isinstance(obj, dict) or obj.get("format") != FEATURES_FORMAT or "features" not in obj:
        raise CRCError(f"{path}: not a features file: expected an object with format {FEATURES_FORMAT!r} and its "
                       "features (`crc schema --features-only` writes one)")
    try:
        features = _features_from_list(obj["features"])
    except CRCError as exc:
        raise CRCError(f"{path}: malformed features file: {exc}") from None
    names = [f.name for f in features]
    if not features or len(set(names)) != len(names):
        raise CRCError(f"{path}: malformed features file: feature names must be distinct, and one at least")
    return features


def joined(schema: Schema, blocks: list[tuple[Feature, ...]], sources: list[str]) -> Schema:
    """``schema`` (the label holder's: the label, the classes and its own columns) with the features of every other
    party's ``blocks`` after its own, in order; a CRCError naming the ``sources`` of a feature named twice or named as
    the label."""
    seen = {f.name: "the label holder's columns" for f in schema.features}
    for block, source in zip(blocks, sources):
        for feature in block:
            if feature.name == schema.label:
                raise CRCError(f"{source}: feature {feature.name!r} is the label column's name")
            if feature.name in seen:
                raise CRCError(f"{source}: feature {feature.name!r} is also in {seen[feature.name]}: every column "
                               "belongs to one party")
            seen[feature.name] = source
    return replace(schema, features=schema.features + tuple(f for block in blocks for f in block))


def _features_from_list(obj) -> tuple[Feature, ...]:
    if not isinstance(obj, list):
        raise CRCError(f"features must be a list, got {fields.shown(obj)}")
    return tuple(_feature_from_json(f, f"features[{j}]") for j, f in enumerate(obj))


def _feature_from_json(obj, name: str) -> Feature:
    fields.mapping(obj, name)
    feature = fields.string(obj.get("name"), f"{name}.name")
    kind = obj.get("kind")
    if kind == DISCRETE:
        categories = fields.strings(obj.get("categories"), f"{name}.categories")
        if not categories or len(set(categories)) != len(categories):
            raise CRCError(f"feature {feature!r} needs distinct categories")
        return Feature(feature, DISCRETE, categories=tuple(categories))
    if kind == CONTINUOUS:
        mean = fields.number(obj.get("mean"), f"{name}.mean")
        try:
            std = fields.number(obj.get("std"), f"{name}.std", positive=True)
        except CRCError as exc:
            raise CRCError(f"feature {feature!r} needs a positive std ({exc})") from None
        return Feature(feature, CONTINUOUS, mean=mean, std=std)
    raise CRCError(f"{name}.kind: the feature kind must be {CONTINUOUS!r} or {DISCRETE!r}, got {fields.shown(kind)}")


def _close_name(label: str, columns: dict) -> str:
    """`` (did you mean 'class'?)`` for a column name like ``label`` (another case, spaces, a typo), else ""."""
    names = {name.strip().lower(): name for name in columns}
    close = difflib.get_close_matches(label.strip().lower(), list(names), n=1)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


def _header_hint(columns: dict) -> str:
    """A hint when the header is one column whose name holds a semicolon or a tab (not a comma-separated file), or
    names that are all numbers (a file without a header)."""
    return separator_hint(columns) or headerless_hint(columns)


def _spells_non_finite(spelling: str) -> bool:
    """True for a spelling of infinity or NaN that is not a missing token (``inf``, ``-Infinity``, ``-nan``)."""
    try:
        return not math.isfinite(float(spelling))
    except ValueError:
        return False


def _refuse_non_finite(name: str, column) -> None:
    """Raise if ``column`` (a ``Column``) holds more than ``MAX_DISCRETE_DISTINCT`` distinct numbers and an infinity
    or NaN spelling: a value no model can use, which would make the column discrete, every number a category."""
    text = np.flatnonzero(np.isnan(column.numbers))
    infinite = [k for k in text if _spells_non_finite(column.canonical[k])]
    if not infinite or len(column.canonical) - len(text) <= MAX_DISCRETE_DISTINCT:
        return
    first = min(infinite, key=column.first_row)
    raise CRCError(f"feature column {name!r} holds {column.shown(first)} in data row {column.first_row(first) + 1}, not "
                   f"a finite number: correct the cell, or leave it missing ({MISSING_NAMED})")


def _check_far_values(name: str, column) -> None:
    """Raise if a value of the continuous ``column`` lies more than ``MAX_SPREADS`` interquartile ranges (the smallest
    gap between its values, if that range is 0) from its median: 1e308 among ages, an overflow or a unit error.
    Standardized by a training set without it, its square overflows (an infinite log-likelihood, NaN scores); with it,
    every other value standardizes to about 0. Nearer, but still far enough to swamp the standardization, it is warned
    about (``warn_swamping_value``)."""
    rows = column.number_rows()[0]
    centre = median_and_spread(rows[~np.isnan(rows)])
    if centre is None:  # Schema.standardized says if the numbers are too large
        return
    median, spread = centre
    with np.errstate(all="ignore"):
        distance = np.abs(rows - median)
    far = np.flatnonzero(distance > MAX_SPREADS * spread)
    if far.size:
        row = int(far[0])
        raise CRCError(f"feature column {name!r} holds {rows[row]:.3g} in data row {row + 1}, more than {MAX_SPREADS:.0e} "
                       f"times the spread of its values (interquartile range {spread:.3g}) from their median "
                       f"{median:.3g}: an overflow or a unit error? Correct the cell, or leave it missing")
    warn_swamping_value(name, rows, distance, median, spread)


def _refuse_stray_text(name: str, column) -> None:
    """Raise if ``column`` (a ``Column``) is numbers but for a few distinct values (see ``STRAY_TEXT_MAX``)."""
    text = np.isnan(column.numbers)
    spellings = [column.canonical[k] for k in np.flatnonzero(text)]
    if not 0 < len(set(spellings)) <= STRAY_TEXT_MAX:
        return
    if len({column.canonical[k] for k in np.flatnonzero(~text)}) <= MAX_DISCRETE_DISTINCT:
        return
    first = min(np.flatnonzero(text), key=column.first_row)
    raise CRCError(f"feature column {name!r} holds numbers but also {column.shown(first)} in data row "
                   f"{column.first_row(first) + 1}: correct the cell or leave it missing ({MISSING_NAMED}); or name the "
                   f"column categorical (--categorical, in Python categorical_features) to keep it discrete")


def _refuse_comma_numbers(name: str, column) -> None:
    """Raise if ``column``'s values are numbers, some written with a comma (``COMMA_NUMBER``), more than
    ``MAX_DISCRETE_DISTINCT`` of them: read as text they would be that many categories."""
    text = np.isnan(column.numbers)
    values = column.canonical
    if len(values) <= MAX_DISCRETE_DISTINCT or not all(COMMA_NUMBER.fullmatch(values[k]) for k in np.flatnonzero(text)):
        return
    first = min(np.flatnonzero(text), key=column.first_row)
    raise CRCError(f"feature column {name!r} holds numbers written with a comma, such as {column.shown(first)} in data "
                   f"row {column.first_row(first) + 1}: crc reads a decimal point and no thousands separator (3.11, "
                   f"1234); rewrite the column, else its {len(values)} values would be as many categories")


def _refuse_unit_numbers(name: str, column) -> None:
    """Raise if ``column`` holds more than ``MAX_DISCRETE_DISTINCT`` distinct values, every one a number or a number
    followed by one and the same unit (``UNIT_NUMBER``): read as text they would be that many categories."""
    text = np.flatnonzero(np.isnan(column.numbers))
    values = column.canonical
    matches = [UNIT_NUMBER.fullmatch(values[k]) for k in text]
    if len(set(values)) <= MAX_DISCRETE_DISTINCT or not all(matches) or len({m["unit"] for m in matches}) != 1:
        return
    first = min(text, key=column.first_row)
    raise CRCError(f"feature column {name!r} holds numbers written with a unit, such as {column.shown(first)} in data row "
                   f"{column.first_row(first) + 1}: crc reads plain numbers; write the column's numbers without "
                   f"{matches[0]['unit']!r} (the unit in its name), else its {len(set(values))} values would be as many "
                   "categories (or name it categorical, --categorical, if they are)")


def _refuse_identifier(name: str, column) -> None:
    """Raise if ``column`` holds text, none of it a number, different in every one of more than ``MAX_DISCRETE_DISTINCT``
    rows: an identifier, whose categories, each seen once, would drown the other features."""
    present = int((column.codes >= 0).sum())
    if present > MAX_DISCRETE_DISTINCT and np.isnan(column.numbers).all() and len(set(column.canonical)) == present:
        raise CRCError(f"feature column {name!r} holds a different value in each of its {present} rows: an identifier, "
                       f"not a feature; drop the column")


def _seen_once(column) -> int:
    """How many of ``column``'s classes (canonical values) occur in one row only."""
    rows = np.bincount(column.codes, minlength=len(column.canonical))
    per_class: dict[str, int] = {}
    for value, count in zip(column.canonical, rows):
        per_class[value] = per_class.get(value, 0) + int(count)
    return sum(count == 1 for count in per_class.values())


def infer_schema(columns: dict, label: str, *, max_discrete_distinct: int = MAX_DISCRETE_DISTINCT,
                 categorical=()) -> Schema:
    """Infer a schema from a table's columns.

    A feature is discrete if it is named in ``categorical``, if some value is
    not a number, or if it has at most ``max_discrete_distinct`` distinct
    values; otherwise it is continuous. A column of many numbers with one or
    two other values (``NA``, a typo), or of text different in every row (an
    identifier), is an error unless named ``categorical``.

    Parameters
    ----------
    columns : dict of str to column
        Column name to its cells (a ``Column``, or anything ``as_column`` takes), all of equal length.
    label : str
        Name of the label column.
    max_discrete_distinct : int, default=10
        The paper's rule (CSV files); 0 keeps every numeric column continuous (the estimators).
    categorical : collection of str, default=()
        Features that are discrete whatever their values.

    The standardization of continuous features is left at (0, 1); call
    `Schema.standardized` with the training data to set it.
    """
    if label not in columns:
        raise CRCError(f"label column {label!r} not found{_close_name(label, columns)}; columns are {', '.join(columns)}"
                       f"{_header_hint(columns)}")
    label_column = as_column(columns[label])
    missing = np.flatnonzero(label_column.codes < 0)
    if missing.size:
        raise CRCError(f"label column {label!r} has {missing.size} missing values (first at data row {missing[0] + 1}; "
                       f"{MISSING_NAMED}): drop those rows, or write their class")
    classes = _sorted_values(set(label_column.canonical))
    if len(classes) < 2:
        raise CRCError(f"label column {label!r} has a single class {classes[0]!r}: nothing to classify")
    warn_values_alike(f"label column {label!r}", classes, "classes")
    warn_header_of_data(label, classes, columns)
    warn_numeric_target(label, classes, len(label_column), MAX_DISCRETE_DISTINCT)
    rows = len(label_column)
    if rows > MAX_DISCRETE_DISTINCT and len(classes) > rows / 2:
        raise CRCError(f"label column {label!r} has {len(classes)} classes in {rows} rows ({_seen_once(label_column)} "
                       f"seen once): a class column repeats its classes (a numeric target or an identifier is not one); "
                       f"--label names the class column, and a numeric target cut into ranges makes one")
    features = infer_features({name: cells for name, cells in columns.items() if name != label}, label=label,
                              label_column=label_column, max_discrete_distinct=max_discrete_distinct,
                              categorical=categorical)
    return Schema(label=label, classes=tuple(classes), features=features)


def infer_features(columns: dict, *, label: str | None = None, label_column=None,
                   max_discrete_distinct: int = MAX_DISCRETE_DISTINCT, categorical=()) -> tuple[Feature, ...]:
    """The features of a table's feature ``columns`` (name -> cells, the label left out), by ``infer_schema``'s rule;
    with the ``label`` and its ``label_column``, a feature that copies the label is warned of. A vertical party
    without the label infers its own columns so (``crc schema --features-only``)."""
    if label is not None and label in categorical:
        raise CRCError(f"--categorical names {label!r}, the label column: the classes are categories already; "
                       "--categorical is for feature columns")
    unknown = [name for name in categorical if name not in columns]
    if unknown:
        raise CRCError(f"categorical feature(s) {', '.join(map(repr, unknown))} not among the feature columns "
                       f"({', '.join(columns)})")
    features = []
    for name, cells in columns.items():
        column = as_column(cells)
        if not column.has_values():
            raise CRCError(f"feature column {name!r} has no values: drop it")
        if name not in categorical and not column.all_numbers():
            _refuse_non_finite(name, column)
            _refuse_stray_text(name, column)
            _refuse_comma_numbers(name, column)
            _refuse_unit_numbers(name, column)
            _refuse_identifier(name, column)
        elif name not in categorical:
            warn_row_number(name, column, label_column)
        if name in categorical or column.distinct_at_most(max_discrete_distinct) or not column.all_numbers():
            features.append(Feature(name, DISCRETE, categories=tuple(_sorted_values(set(column.canonical)))))
            warn_rare_categories(name, len(features[-1].categories), int((column.codes >= 0).sum()))
            warn_values_alike(f"feature column {name!r}", features[-1].categories, "categories")
            if label_column is not None:
                warn_label_copy(name, column, label, label_column)
        else:
            _check_far_values(name, column)
            warn_missing_code(name, column)
            features.append(Feature(name, CONTINUOUS))
        if label_column is not None:
            warn_missing_in_class(name, column, label, label_column)
    if not features:
        raise CRCError("the table has no feature columns" + (" besides the label" if label else ""))
    return tuple(features)
