"""A trained peer's model file: schema, model kind, statistics, parameters and metrics, as JSON.

``load_model(path)`` returns a ``TrainedModel`` that predicts from raw cells,
so a peer's output can be used without the network or the training data.
Statistics are stored as JSON numbers, which round-trip float64 exactly.

Class labels are the schema's strings. A file written from a scikit-learn
estimator (``to_model``) also records the labels' numpy dtype
(``label_dtype``) when their strings give them back, so that
``TrainedModel.labels`` returns them typed; a peer's file has none.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from crc.core import fields
from crc.core.columns import canonical_value
from crc.core.data import encode_features
from crc.core.errors import CRCError, named_errors
from crc.core.files import atomic_write_json, read_json
from crc.core.models import MODELS, make_model
from crc.core.schema import Schema

FORMAT = "crc-model/1"
MAX_MODEL_BYTES = 512 * 2**20
MAX_LABEL_ITEMSIZE = 4 * 2**16
ESS_RTOL = 1e-9
GROUP_PARTITIONS = ("vertical", "hybrid")
LOG = logging.getLogger("crc.model")
"""Relative tolerance between a file's ``ess`` field and the ESS of its statistics (the sum of the class counts)."""
PARAMETERS_RTOL = 1e-9
"""Relative tolerance between a file's ``parameters`` and the parameters of its statistics (the same arithmetic: equal
but for the last bits of another numpy's logarithms)."""


def label_dtype_of(classes: np.ndarray) -> str | None:
    """The ``label_dtype`` that gives ``classes`` back from their canonical spellings, or None if none does.

    Booleans, integers, floats and numpy strings give their dtype (``"<i8"``),
    unless a string is not its own canonical spelling (``" a"``, ``"1.0"``).
    """
    if classes.dtype.kind not in "biufU":
        return None
    spellings = tuple(canonical_value(str(c)) for c in classes)
    try:
        back = typed_labels(spellings, classes.dtype.str)
    except CRCError:
        return None
    return classes.dtype.str if np.array_equal(back, classes) else None


def typed_labels(classes: tuple[str, ...], label_dtype: str | None) -> np.ndarray:
    """The class strings as an array of ``label_dtype``; object strings when it is None.

    Raises CRCError when ``label_dtype`` (an untrusted file field) is not a
    boolean, integer, float or string dtype or does not spell the classes back.
    """
    if label_dtype is None:
        return np.array(classes, dtype=object)
    try:
        dtype = np.dtype(label_dtype) if isinstance(label_dtype, str) else None
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind not in "biufU" or dtype.itemsize > MAX_LABEL_ITEMSIZE:
        raise CRCError(f"label_dtype {label_dtype!r} is not a boolean, integer, float or string dtype")
    parse = {"b": {"True": True, "False": False}.__getitem__, "i": int, "u": int, "f": float, "U": str}[dtype.kind]
    try:
        labels = np.array([parse(c) for c in classes], dtype=dtype)
    except (KeyError, ValueError, OverflowError):
        labels = None
    if labels is None or [canonical_value(str(v)) for v in labels] != list(classes):
        raise CRCError(f"label_dtype {label_dtype!r} does not spell the classes {', '.join(classes)}")
    return labels


class TrainedModel:
    """A classifier given by a schema, a model kind and its statistics.

    Attributes: ``schema``, ``model`` (a GenerativeModel), ``stats`` (size,),
    ``theta`` (the parameters), ``classes`` (label strings), ``metrics`` (dict),
    ``label_dtype`` (str or None) and ``labels`` (the classes typed by it).
    """

    def __init__(self, schema: Schema, kind: str, stats: np.ndarray, metrics: dict | None = None, *,
                 label_dtype: str | None = None, **model_options):
        self.schema, self.kind = schema, kind
        self.model = make_model(kind, schema, **model_options)
        stats = np.asarray(stats, dtype=np.float64)
        if stats.shape != (self.model.size,) or not np.all(np.isfinite(stats)):
            raise CRCError(f"statistics must be {self.model.size} finite numbers for this schema and model, got shape {stats.shape}")
        with np.errstate(all="ignore"):  # extreme statistics: refused below rather than warned about
            theta = self.model.theta(stats)
        if not all(np.all(np.isfinite(value)) for value in theta.values()):
            raise CRCError("statistics give non-finite parameters (values too extreme for this model)")
        self.stats, self.theta = stats, theta
        self.classes = np.array(schema.classes, dtype=object)
        self.label_dtype, self.labels = label_dtype, typed_labels(schema.classes, label_dtype)
        self.metrics = metrics or {}
        self.model_options = model_options
        self._warned_block = False

    @property
    def group_block(self) -> int | None:
        """The block this model holds when a peer of a vertical or hybrid group wrote it (its metrics say so), else
        None: then it is one block's model, and ``crc.load_group`` with every block's file is the group's classifier."""
        partition, block = self.metrics.get("partition"), self.metrics.get("block")
        if isinstance(partition, str) and partition.split(":")[0] in GROUP_PARTITIONS and isinstance(block, int):
            return block
        return None

    def predict_proba(self, columns, *, source: str = "data") -> np.ndarray:
        """Class probabilities (m, n_classes).

        ``columns`` is ``{feature name: [raw cell, ...]}`` (extra columns ignored), or an
        (m, d) array of values in the schema's feature order (None or NaN for missing). A group's block model
        predicts from its block's features alone, and warns so once.
        """
        if self.group_block is not None and not self._warned_block:
            self._warned_block = True
            LOG.warning(f"this model holds block {self.group_block} of a {self.metrics['partition']} group: it predicts "
                        "from that block's features alone; the group's classifier takes every block's model file "
                        "(crc.load_group, or crc predict with every --model-file)")
        return self.model.posteriors(self.theta, self.features(columns, source=source))

    def features(self, columns, *, source: str = "data") -> np.ndarray:
        """The model's features phi (m, k) of ``columns`` (as ``predict_proba`` takes them); a CRCError naming
        ``source`` for a cell the schema or the model refuses (QDA: a missing continuous value)."""
        x = encode_features(self.schema, columns, source=source)
        with named_errors(source):
            return self.model.features(x)

    def predict(self, columns, *, source: str = "data") -> np.ndarray:
        """Predicted class labels (m,) as strings."""
        return self.classes[self.predict_proba(columns, source=source).argmax(axis=1)]

    def to_json(self) -> dict:
        obj = {"format": FORMAT, "schema": self.schema.to_json(), "model": self.kind, "options": self.model_options,
               "schema_id": self.model.schema_id, "ess": float(self.model.ess(self.stats)),
               "statistics": self.stats.tolist(), "parameters": _jsonable(self.theta), "metrics": self.metrics}
        if self.label_dtype is not None:
            obj["label_dtype"] = self.label_dtype
        return obj

    def save(self, path) -> None:
        atomic_write_json(path, self.to_json())


def _jsonable(theta: dict) -> dict:
    return {key: np.asarray(value).tolist() for key, value in theta.items()}


def load_model(path) -> TrainedModel:
    """Read a model file written by ``crc node`` (or ``TrainedModel.save``), validating it field by field.

    Nothing is built before the fields that size it are checked: the schema, then the model kind and its
    options against their declared bounds, then the statistics' length against the model's. Any problem is
    a one-line CRCError naming the file.
    """
    obj = read_json(path, max_bytes=MAX_MODEL_BYTES, what="model file")
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CRCError(f"{path}: not a crc model file (expected format {FORMAT!r})")
    try:
        return _model_from_json(obj)
    except CRCError as exc:
        raise CRCError(f"{path}: {exc}") from None


def _model_from_json(obj: dict) -> TrainedModel:
    kind = obj.get("model")
    if not isinstance(kind, str) or kind not in MODELS:
        raise CRCError(f"unknown model kind {fields.shown(kind)}; known: {', '.join(MODELS)}")
    options = fields.mapping(obj.get("options", {}), "'options'")
    metrics = fields.mapping(obj.get("metrics", {}), "'metrics'")
    label_dtype = obj.get("label_dtype")  # checked by typed_labels
    schema = Schema.from_json(obj.get("schema"))
    model = make_model(kind, schema, **options)
    statistics = fields.numbers(obj.get("statistics"), "'statistics'", length=model.size)
    trained = TrainedModel(schema, kind, statistics, metrics, label_dtype=label_dtype, **options)
    if obj.get("schema_id") not in (None, model.schema_id):
        raise CRCError("schema id does not match its schema and model (file edited or damaged)")
    if "ess" in obj:
        ess = fields.number(obj["ess"], "'ess'")
        if not math.isclose(ess, float(model.ess(statistics)), rel_tol=ESS_RTOL):
            raise CRCError(f"'ess' {ess!r} is not the equivalent sample size of its statistics ({float(model.ess(statistics))!r})")
    if "parameters" in obj:
        _check_parameters(obj["parameters"], trained.theta)
    return trained


def _check_parameters(recorded, theta: dict) -> None:
    """Raise CRCError unless a file's ``recorded`` parameters are ``theta``, its statistics' (to ``PARAMETERS_RTOL``):
    predictions come from the statistics, so parameters that say otherwise (a negative variance, another model's)
    mean an edited or damaged file."""
    recorded = fields.mapping(recorded, "'parameters'")
    if set(recorded) != set(theta):
        raise CRCError(f"'parameters' hold {fields.shown(sorted(recorded))[:80]}, this model's are {', '.join(theta)}")
    for name, value in theta.items():
        try:
            found = np.asarray(recorded[name], dtype=np.float64)
        except (TypeError, ValueError):
            found = None
        if found is not None and found.size == 0 == np.size(value) and found.shape == np.shape(value)[:found.ndim]:
            continue  # JSON keeps no shape past an empty list: (r, 0, 0) precisions, of no continuous feature, read (r, 0)
        if found is None or found.shape != np.shape(value) or not np.allclose(found, value, rtol=PARAMETERS_RTOL, atol=0):
            raise CRCError(f"'parameters' {name!r} are not what its statistics give (file edited or damaged, or written "
                           "by a crc version that computed them otherwise)")
