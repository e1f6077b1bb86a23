"""A trained peer's model file: schema, model kind, statistics, parameters and metrics, as JSON.

``load_model(path)`` returns a ``TrainedModel`` that predicts from raw cells,
so a peer's output can be used without the network or the training data.
Statistics are stored as JSON numbers, which round-trip float64 exactly.
"""

from __future__ import annotations

import math

import numpy as np

from crc.core.data import encode_features
from crc.core.errors import CRCError
from crc.core.files import atomic_write_json, read_json
from crc.core.models import MODELS, make_model
from crc.core.schema import Schema

FORMAT = "crc-model/1"
MAX_MODEL_BYTES = 512 * 2**20


class TrainedModel:
    """A classifier given by a schema, a model kind and its statistics.

    Attributes: ``schema``, ``model`` (a GenerativeModel), ``stats`` (size,),
    ``theta`` (the parameters), ``classes`` (label strings), ``metrics`` (dict).
    """

    def __init__(self, schema: Schema, kind: str, stats: np.ndarray, metrics: dict | None = None, **model_options):
        self.schema, self.kind = schema, kind
        self.model = make_model(kind, schema, **model_options)
        stats = np.asarray(stats, dtype=np.float64)
        if stats.shape != (self.model.size,) or not np.all(np.isfinite(stats)):
            raise CRCError(f"statistics must be {self.model.size} finite numbers for this schema and model, got shape {stats.shape}")
        self.stats, self.theta = stats, self.model.theta(stats)
        self.classes = np.array(schema.classes, dtype=object)
        self.metrics = metrics or {}
        self.model_options = model_options

    def predict_proba(self, columns, *, source: str = "data") -> np.ndarray:
        """Class probabilities (m, n_classes).

        ``columns`` is ``{feature name: [raw cell, ...]}`` (extra columns ignored), or an
        (m, d) array of values in the schema's feature order (None or NaN for missing).
        """
        return self.model.posteriors(self.theta, self.model.features(encode_features(self.schema, columns, source=source)))

    def predict(self, columns, *, source: str = "data") -> np.ndarray:
        """Predicted class labels (m,) as strings."""
        return self.classes[self.predict_proba(columns, source=source).argmax(axis=1)]

    def to_json(self) -> dict:
        return {"format": FORMAT, "schema": self.schema.to_json(), "model": self.kind, "options": self.model_options,
                "schema_id": self.model.schema_id, "ess": float(self.model.ess(self.stats)),
                "statistics": self.stats.tolist(), "parameters": _jsonable(self.theta), "metrics": self.metrics}

    def save(self, path) -> None:
        atomic_write_json(path, self.to_json())


def _jsonable(theta: dict) -> dict:
    return {key: np.asarray(value).tolist() for key, value in theta.items()}


def load_model(path) -> TrainedModel:
    """Read a model file written by ``crc node`` (or ``TrainedModel.save``), validating it."""
    obj = read_json(path, max_bytes=MAX_MODEL_BYTES, what="model file")
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CRCError(f"{path}: not a crc model file (expected format {FORMAT!r})")
    if obj.get("model") not in MODELS:
        raise CRCError(f"{path}: unknown model kind {obj.get('model')!r}")
    statistics = obj.get("statistics")
    if not isinstance(statistics, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                                   for v in statistics):
        raise CRCError(f"{path}: 'statistics' must be a list of finite numbers")
    options = obj.get("options") or {}
    if not isinstance(options, dict):
        raise CRCError(f"{path}: 'options' must be an object")
    schema = Schema.from_json(obj.get("schema"))
    model = TrainedModel(schema, obj["model"], np.array(statistics, dtype=np.float64), obj.get("metrics") or {}, **options)
    if obj.get("schema_id") not in (None, model.model.schema_id):
        raise CRCError(f"{path}: schema id does not match its schema and model (file edited or damaged)")
    return model
