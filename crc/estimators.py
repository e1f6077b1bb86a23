"""scikit-learn-style estimators for centralized use: NB and QDA learned by ML or RC."""

from __future__ import annotations

import numpy as np

from crc.core.calibration import DEFAULT_ITERATIONS, DEFAULT_LR, rc, soft_zero_one
from crc.core.data import encode, encode_features, raw_cells, standardize
from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.core.schema import infer_schema

LEARNING = ("ml", "rc")


def _columns(X, names) -> dict[str, list[str]]:
    X = np.asarray(X, dtype=object)
    if X.ndim != 2:
        raise CRCError(f"X must be 2-dimensional, got shape {X.shape}")
    return {name: raw_cells(X[:, j]) for j, name in enumerate(names)}


class _GenerativeClassifier:
    """Shared fit/predict of the estimators; subclasses set ``model_kind``."""

    model_kind = ""

    def __init__(self, *, learning: str = "rc", lr: float = DEFAULT_LR, iterations: int = DEFAULT_ITERATIONS):
        self.learning = learning
        self.lr = lr
        self.iterations = iterations

    def fit(self, X, y):
        """Fit on X of shape (m, d) (numbers, strings, NaN/None for missing) and labels y of shape (m,).

        Feature kinds follow the schema rule (non-numeric or at most 10 distinct
        values: discrete); continuous features are standardized on X.
        """
        if self.learning not in LEARNING:
            raise CRCError(f"learning must be one of {LEARNING}, got {self.learning!r}")
        X = np.asarray(X, dtype=object)
        self.feature_names_ = [f"x{j}" for j in range(X.shape[1])] if X.ndim == 2 else []
        columns = _columns(X, self.feature_names_)
        labels = raw_cells(np.asarray(y, dtype=object))
        if len(labels) != X.shape[0]:
            raise CRCError(f"X has {X.shape[0]} rows but y has {len(labels)} labels")
        schema = infer_schema({**columns, "__label__": labels}, "__label__")
        x, y_codes = encode(schema, {**columns, "__label__": labels})
        self.schema_ = schema.standardized(x[:, schema.continuous])
        self.model_ = make_model(self.model_kind, self.schema_)
        phi = self.model_.features(standardize(self.schema_, x))
        if self.learning == "rc":
            self.stats_ = rc(self.model_, phi, y_codes, lr=self.lr, iterations=self.iterations).stats
        else:
            self.stats_ = self.model_.fit_ml(phi, y_codes)
        self.theta_ = self.model_.theta(self.stats_)
        self.classes_ = np.array(self.schema_.classes, dtype=object)
        self.training_soft_loss_ = soft_zero_one(self.model_.posteriors(self.theta_, phi), y_codes)
        return self

    def _phi(self, X):
        if not hasattr(self, "model_"):
            raise CRCError("this estimator is not fitted yet: call fit first")
        return self.model_.features(encode_features(self.schema_, X, source="X"))

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of shape (m, n_classes), columns in ``classes_`` order."""
        phi = self._phi(X)
        return self.model_.posteriors(self.theta_, phi)

    def predict(self, X) -> np.ndarray:
        """Predicted labels of shape (m,), as the strings of ``classes_``."""
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

    def score(self, X, y) -> float:
        """Accuracy on (X, y)."""
        return float(np.mean(self.predict(X) == np.asarray([str(v) for v in y], dtype=object)))


class NaiveBayesClassifier(_GenerativeClassifier):
    """Naive Bayes (Gaussian continuous, categorical discrete features) learned by ML or RC."""

    model_kind = "nb"


class QDAClassifier(_GenerativeClassifier):
    """QDA (full-covariance Gaussian classes) learned by ML or RC; discrete features categorical."""

    model_kind = "qda"
