"""Data sets by name: the bundled KEEL copies, a seeded synthetic one, or a CSV path. The CSV reader (pandas) is
imported when a file is read: the names here are light for the command line's options."""

from __future__ import annotations

import difflib
import os
from importlib import resources

import numpy as np

from crc.core.data import MAX_LISTED, Dataset, dataset_from_columns
from crc.core.errors import CRCError
from crc.core.schema import CONTINUOUS, Feature, Schema

BUNDLED = (
    "banana", "chess", "letter", "magic", "marketing", "mushroom", "optdigits", "penbased",
    "phoneme", "ring", "satimage", "spambase", "splice", "texture", "twonorm", "wdbc", "german",
)
BUNDLED_LABEL = "class"
SYNTHETIC = "synthetic"
SYNTHETIC_FEATURES = 20
SYNTHETIC_CLASSES = 3
SYNTHETIC_MEAN_SCALE = 0.3


def bundled_path(name: str):
    """Path of a bundled KEEL file (package data)."""
    return resources.files("crc.keel").joinpath(f"{name}.dat.gz")


def load_bundled(name: str) -> Dataset:
    """Load a bundled KEEL data set; its features are ``x1 … xd``, the label ``class``."""
    if name not in BUNDLED:
        raise CRCError(f"unknown bundled data set {name!r}; known: {', '.join(BUNDLED)}")
    from crc.tables.reader import read_csv

    with resources.as_file(bundled_path(name)) as path:
        columns = read_csv(path, header=False)
    return dataset_from_columns(columns, BUNDLED_LABEL, name)


def synthetic_dataset(m: int, *, seed=None) -> Dataset:
    """Seeded Gaussian classes: 3 equiprobable classes, 20 continuous features.

    Class ``k`` has mean ``mu_k ~ N(0, 0.3^2 I)`` and diagonal covariance with standard
    deviations drawn uniformly from [0.5, 1.5]; both are fixed by ``seed``, the
    instances too. Returns ``m`` instances.
    """
    rng = np.random.default_rng(seed)
    means = SYNTHETIC_MEAN_SCALE * rng.normal(size=(SYNTHETIC_CLASSES, SYNTHETIC_FEATURES))
    scales = rng.uniform(0.5, 1.5, size=(SYNTHETIC_CLASSES, SYNTHETIC_FEATURES))
    y = rng.integers(SYNTHETIC_CLASSES, size=m)
    x = means[y] + scales[y] * rng.standard_normal((m, SYNTHETIC_FEATURES))
    features = tuple(Feature(f"x{j + 1}", CONTINUOUS) for j in range(SYNTHETIC_FEATURES))
    schema = Schema(label=BUNDLED_LABEL, classes=tuple(str(k) for k in range(SYNTHETIC_CLASSES)), features=features)
    return Dataset(schema, x, y.astype(np.int64), SYNTHETIC)


def load_dataset(source: str, *, label: str | None = None, categorical=(), synthetic_size: int = 10_000,
                 seed=None) -> Dataset:
    """Load ``source``: a bundled name, ``synthetic`` (``label`` None or ``BUNDLED_LABEL``), or a CSV path (``label``
    required; the features named in ``categorical`` discrete whatever their values).

    ``synthetic_size`` and ``seed`` are used only for the synthetic data set.
    """
    bundled = source == SYNTHETIC or (source in BUNDLED and not os.path.exists(source))
    if bundled and label not in (None, BUNDLED_LABEL):
        raise CRCError(f"{source}: a bundled data set, whose class column is {BUNDLED_LABEL!r}: --label {label} "
                       f"is for CSV files")
    if bundled and categorical:
        raise CRCError(f"{source}: a bundled data set, whose feature kinds are fixed: --categorical is for CSV files")
    if source == SYNTHETIC:
        return synthetic_dataset(synthetic_size, seed=seed)
    if bundled:
        return load_bundled(source)
    if not os.path.exists(source):
        close = difflib.get_close_matches(source, (*BUNDLED, SYNTHETIC), n=1)
        raise CRCError(f"{source}: no such file, and not a bundled data set "
                       + (f"(did you mean {close[0]!r}?)" if close else f"({', '.join(BUNDLED)}, {SYNTHETIC})"))
    if label is None:
        raise CRCError(f"{source}: a CSV file needs --label naming its class column{_one_of(source)}")
    from crc.tables.reader import read_csv

    return dataset_from_columns(read_csv(source), label, os.path.basename(source), categorical=categorical, source=source)


def _one_of(path) -> str:
    """``, one of a, b, ...`` naming the file's columns (at most ``MAX_LISTED``), or "" if its header is unreadable."""
    from crc.tables.reader import column_names

    try:
        names = column_names(path)
    except CRCError:
        return ""
    return ", one of " + ", ".join(names[:MAX_LISTED]) + (f", ... ({len(names)} in all)" if len(names) > MAX_LISTED else "")
