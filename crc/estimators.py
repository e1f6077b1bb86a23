"""scikit-learn estimators: naive Bayes, QDA and probabilistic circuits learned by ML or RC, or by CRC over a network.

``NaiveBayesClassifier``, ``QDAClassifier`` and ``CircuitClassifier`` learn on
pooled data; ``FederatedClassifier`` simulates CRC over a graph of peers that
each hold one part of the data. Inputs are numpy arrays or pandas DataFrames of
numbers, strings and categoricals with missing values (None, NaN). Numbers are
continuous features and everything else is categorical, unless
``categorical_features`` says which features are categorical (the CLI's rule
for CSV files, where a numeric column of at most ten distinct values is
discrete, does not apply here). ``to_model`` gives a model file for ``crc
predict`` and peers; ``from_model`` turns one back into an estimator.

scikit-learn is an optional dependency: ``pip install 'crc-p2p[sklearn]'``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.utils import check_array, column_or_1d
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data
except ModuleNotFoundError as exc:
    raise ImportError("crc's estimators need scikit-learn: pip install 'crc-p2p[sklearn]' (or '.[sklearn]' from a clone)") from exc

from crc.core.acceleration import ALGORITHMS, DEFAULT_ALGORITHM, acceleration_of, resolve
from crc.core.calibration import DEFAULT_ITERATIONS, DEFAULT_LR, rc, soft_zero_one
from crc.core.columns import as_column
from crc.core.data import encode, encode_features, standardize
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.errors import CRCError
from crc.core.model_file import TrainedModel, label_dtype_of, load_model
from crc.core.models import GenerativeModel, make_model, model_kind, model_options
from crc.core.numeric import logsumexp
from crc.core.partition import local_sizes
from crc.core.schema import Schema, infer_schema, moments
from crc.topologies import Schedule

LEARNING = ("ml", "rc")
LABEL = "class"
"""Name of the label column in the schema (underscores are appended if a feature has that name)."""

_PC = {option.name: option.default for option in model_kind("pc").OPTIONS}
FROM_DTYPE = "from_dtype"


class _Classifier(ClassifierMixin, BaseEstimator):
    """Input validation and prediction from the fitted ``schema_``, ``model_``, ``stats_``, ``theta_``, ``classes_``."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        # No ``categorical`` tag: it makes the checks send integer codes, which are numbers (continuous) unless
        # ``categorical_features`` names them; strings and pandas categoricals are categorical (the ``string`` tag).
        return tags

    def _columns(self, X, *, reset: bool) -> list[np.ndarray]:
        """The feature columns of X, each an array of shape (n_samples,); sets or checks
        ``n_features_in_`` and ``feature_names_in_``."""
        if hasattr(X, "columns") and hasattr(X, "iloc"):
            validate_data(self, X, reset=reset, skip_check_array=True)
            if min(X.shape) < 1:
                raise ValueError(f"Found a DataFrame of shape {X.shape}: at least one sample and one feature are required.")
            return [X.iloc[:, j].to_numpy(dtype=object, na_value=None) for j in range(X.shape[1])]
        X = check_array(X, dtype=None, ensure_all_finite="allow-nan", estimator=self)
        validate_data(self, X, reset=reset, skip_check_array=True)
        return [X[:, j] for j in range(X.shape[1])]

    def _categorical(self, X) -> list[str]:
        """The names of the features ``categorical_features`` makes categorical; call after
        ``_columns(X, reset=True)``."""
        names, chosen = self._feature_names(), self.categorical_features
        if chosen is None or (isinstance(chosen, str) and chosen == FROM_DTYPE):
            dtypes = getattr(X, "dtypes", None)  # a DataFrame's; a numpy array has none
            return [] if dtypes is None else [name for name, dtype in zip(names, dtypes) if getattr(dtype, "name", "") == "category"]
        array = None if isinstance(chosen, str) else np.asarray(chosen)
        if array is None or array.ndim != 1:
            raise ValueError(f"categorical_features must be {FROM_DTYPE!r}, None, or an array-like of feature indices, "
                             f"booleans or feature names, got {chosen!r}")
        if array.size == 0:
            return []
        if array.dtype.kind == "b":
            if len(array) != len(names):
                raise ValueError(f"categorical_features as a boolean mask must have shape ({len(names)},), got {array.shape}")
            return [name for name, flag in zip(names, array.tolist()) if flag]
        if array.dtype.kind in "iu":
            outside = array[(array < 0) | (array >= len(names))]
            if outside.size:
                raise ValueError(f"categorical_features as indices must lie in [0, {len(names) - 1}], got {outside[0]}")
            return [names[j] for j in array.tolist()]
        if not all(isinstance(name, str) for name in array.tolist()):
            raise ValueError(f"categorical_features must hold feature indices, booleans or feature names, got {array.tolist()!r}")
        if not hasattr(self, "feature_names_in_"):
            raise ValueError("categorical_features as feature names needs X with feature names (a DataFrame); "
                             "give indices or a boolean mask")
        unknown = [name for name in array.tolist() if name not in names]
        if unknown:
            raise ValueError(f"categorical_features names {', '.join(map(repr, unknown))}, not among the features {', '.join(names)}")
        return array.tolist()

    def _feature_names(self) -> list[str]:
        """``feature_names_in_``, or ``x0 … x{d-1}``."""
        if hasattr(self, "feature_names_in_"):
            return [str(name) for name in self.feature_names_in_]
        return [f"x{j}" for j in range(self.n_features_in_)]

    def _fitted(self, schema: Schema, model: GenerativeModel, stats: np.ndarray, classes: np.ndarray) -> None:
        self.schema_, self.model_, self.classes_ = schema, model, classes
        self.stats_, self.theta_ = stats, model.theta(stats)

    def _log_posteriors(self, X, theta: dict) -> np.ndarray:
        cells = {name: _cells(column, name) for name, column in zip(self.schema_.feature_names, self._columns(X, reset=False))}
        joint = self.model_.log_joint(theta, self.model_.features(encode_features(self.schema_, cells, source="X")))
        return joint - logsumexp(joint)[:, None]

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        return self._log_posteriors(X, self.theta_)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, ndarray of shape (n_samples, n_classes), columns in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """The most probable labels, ndarray of shape (n_samples,) and the dtype of ``classes_``."""
        best = self.predict_log_proba(X).argmax(axis=1)
        return self.classes_[best]

    def to_model(self) -> TrainedModel:
        """The fitted classifier as a model file (``.save(path)``) that ``crc predict`` and ``from_model`` read."""
        check_is_fitted(self)
        return _trained_model(self.schema_, self.model_, self.stats_, self.classes_)


class _GenerativeClassifier(_Classifier):
    """A model kind learned on pooled data by ML or RC; subclasses set ``_kind`` and their structure options."""

    _kind = ""

    def __init__(self, *, categorical_features=FROM_DTYPE, learning="rc", lr=DEFAULT_LR, iterations=DEFAULT_ITERATIONS):
        self.categorical_features = categorical_features
        self.learning = learning
        self.lr = lr
        self.iterations = iterations

    def _model_options(self) -> dict:
        return {}

    def _check_learning(self) -> None:
        if self.learning not in LEARNING:
            raise CRCError(f"learning must be one of {LEARNING}, got {_shown(self.learning)}")
        _check_positive("lr", self.lr)
        _check_integer("iterations", self.iterations, 0)

    def fit(self, X, y, sample_weight=None):
        """Learn the classifier's statistics from (X, y).

        The schema (classes, feature kinds, categories, standardization) is
        inferred from the samples of positive weight (the feature kinds from
        ``categorical_features``); the standardization uses their weighted mean
        and standard deviation.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numbers, strings or categories; None or NaN for a missing value.
        y : array-like of shape (n_samples,)
            Class labels of any one type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights: they multiply each sample's one-hot label in
            the statistics, RC's posteriors and its soft 0-1 loss.

        Returns
        -------
        self : object
        """
        self._check_learning()
        columns = self._columns(X, reset=True)
        y = _labels(y, len(columns[0]))
        weight = _sample_weight(sample_weight, len(y))
        if weight is not None:
            keep = weight > 0
            columns, y, weight = [column[keep] for column in columns], y[keep], weight[keep]
        classes, codes = _classes(y)
        schema, x = _infer(self._feature_names(), columns, classes, codes, self._categorical(X))
        schema = _standardized(schema, x, weight)
        model = make_model(self._kind, schema, **self._model_options())
        phi = model.features(standardize(schema, x))
        if self.learning == "rc":
            stats = rc(model, phi, codes, lr=self.lr, iterations=self.iterations, sample_weight=weight).stats
        else:
            stats = model.fit_ml(phi, codes, mask=weight)
        self._fitted(schema, model, stats, classes)
        self.training_soft_loss_ = soft_zero_one(model.posteriors(self.theta_, phi), codes, weight)
        return self


class NaiveBayesClassifier(_GenerativeClassifier):
    """Naive Bayes (Gaussian continuous, categorical discrete features) learned by ML or RC.

    A missing value adds nothing to its feature's statistics and is marginalised at prediction.

    Parameters
    ----------
    categorical_features : "from_dtype", None or array-like of int, bool or str, default="from_dtype"
        Which features are categorical. ``"from_dtype"`` (or None): pandas
        categorical columns and columns holding anything but numbers; numbers
        (and strings that spell numbers) are continuous features. An array:
        the indices, a boolean mask of shape (n_features,), or the names (X a
        DataFrame) of the categorical features. A column holding anything but
        numbers is categorical in any case.
    learning : {"rc", "ml"}, default="rc"
        Risk-based calibration from the ML statistics, keeping the iterate of
        lowest (weighted) training soft 0-1 loss, or maximum likelihood.
    lr : float, default=0.05
        RC's learning rate.
    iterations : int, default=64
        RC's iterations.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted as ``np.unique`` sorts them, of the dtype of ``y``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when X was a DataFrame with string column names.
    schema_ : Schema
        Classes, feature kinds, categories and standardization.
    model_ : GenerativeModel
    stats_ : ndarray of shape (size,)
        The sufficient statistics learned.
    theta_ : dict of ndarray
        Parameters of ``stats_``.
    training_soft_loss_ : float
        Weighted soft 0-1 loss on the training data.
    """

    _kind = "nb"


class QDAClassifier(_GenerativeClassifier):
    """QDA (one full-covariance Gaussian per class over the continuous features) learned by ML or RC.

    Discrete features are categorical and independent of the rest given the
    class; a missing discrete value is marginalised, a missing continuous one
    (NaN in a number column) is an error. Parameters and attributes are those
    of ``NaiveBayesClassifier``.
    """

    _kind = "qda"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False  # in numbers, the continuous features; missing categories are marginalised
        return tags


class CircuitClassifier(_GenerativeClassifier):
    """A probabilistic circuit per class learned by ML (EM) or RC.

    Its attributes are those of ``NaiveBayesClassifier``.

    Parameters
    ----------
    structure : {"mixture", "region-graph"}, default="mixture"
        A sum over ``components`` fully factorized products, or a random region
        graph of ``depth``, ``repetitions`` and ``sums``.
    components : int, default=2
    depth : int, default=2
    repetitions : int, default=2
    sums : int, default=2
    structure_seed : int, default=0
        Seed of the structure and of the symmetry breaking of the start.
    categorical_features, learning, lr, iterations
        As in ``NaiveBayesClassifier``; ``learning="ml"`` runs EM.
    """

    _kind = "pc"

    def __init__(self, *, structure=_PC["structure"], components=_PC["components"], depth=_PC["depth"],
                 repetitions=_PC["repetitions"], sums=_PC["sums"], structure_seed=_PC["structure_seed"],
                 categorical_features=FROM_DTYPE, learning="rc", lr=DEFAULT_LR, iterations=DEFAULT_ITERATIONS):
        super().__init__(categorical_features=categorical_features, learning=learning, lr=lr, iterations=iterations)
        self.structure = structure
        self.components = components
        self.depth = depth
        self.repetitions = repetitions
        self.sums = sums
        self.structure_seed = structure_seed

    def _model_options(self) -> dict:
        return model_options(self._kind, {name: _python(getattr(self, name)) for name in _PC})


ESTIMATORS = {cls._kind: cls for cls in (NaiveBayesClassifier, QDAClassifier, CircuitClassifier)}
"""The pooled-data estimator of each model kind."""


class FederatedClassifier(_Classifier):
    """Collaborative risk-based calibration (CRC) of peers that each hold one part of the data, simulated.

    ``fit(X, y)`` shares the samples out over ``n_peers`` peers at random
    (seeded by ``seed``); ``fit(X, y, peers=p)`` gives each sample's peer
    instead. In a ``Pipeline``, ``GridSearchCV`` or ``cross_val_score``, route
    ``peers`` as metadata: ``set_fit_request(peers=True)`` under
    ``sklearn.set_config(enable_metadata_routing=True)``, or without routing
    as a fit parameter (``fit(X, y, federatedclassifier__peers=p)``,
    ``params={"peers": p}``); it is split with the samples.

    Every peer starts from the statistics of ESS ``ess`` its algorithm gives (the
    uniform ones; under the accelerated algorithm naive Bayes takes its own category counts); each round it
    averages its statistics with its neighbours' and takes ``iters`` local RC
    steps on its own part (``crc.core.engine.CRCEngine``), by the recommended
    algorithm (exact diffusion, two local steps, three for naive Bayes) unless ``algorithm="paper"``,
    as ``crc simulate`` does. The schema every peer
    shares is inferred from the pooled samples, which also give the
    standardization of the continuous features (as ``crc schema`` does).

    The network's classifier (``predict`` and the other methods without
    ``peer``, ``stats_``) is the one of the mean of the peers' final
    statistics; ``peer=i`` gives the ``i``-th peer's own (the peer
    ``peers_[i]``). With ``algorithm="paper"``, on a complete graph, the
    network's statistics after ``t`` rounds are those of centralized RC's
    ``t``-th iterate from the uniform start, scaled (the paper's Theorem 1);
    every peer holds them after one more averaging.

    Parameters
    ----------
    model : {"nb", "qda", "pc"}, default="nb"
    model_options : dict, default=None
        The model kind's structure options (``crc.core.models.model_options``), e.g. ``{"components": 3}``.
    categorical_features : "from_dtype", None or array-like, default="from_dtype"
        As in ``NaiveBayesClassifier``.
    n_peers : int, default=10
        Peers of the seeded split when ``fit`` has no ``peers``; each gets at least one sample.
    topology : str, default="tree"
        A graph spec of ``crc.topologies`` (``"complete"``, ``"tree+2"``, ``"er:0.2"``, …).
    period : int, default=None
        Redraw the graph every ``period`` rounds; None keeps one graph.
    rounds : int, default=64
    algorithm : {"accelerated", "paper"}, default="accelerated"
        The recommended algorithm, or the paper's Algorithm 2 (``crc.core.acceleration``).
    iters : int, default=None
        Local RC steps per round; None for the algorithm's (accelerated: 3 for naive Bayes, 2 for the other models;
        the paper's: 1).
    lr : float, default=0.05
        Enters only through the default ESS.
    ess : float, default=None
        Every peer's equivalent sample size; None for Eq. 5's ``m / (lr n)``.
    seed : int, default=0
        Seed of the split over ``n_peers`` and of the graph draws.

    Attributes
    ----------
    classes_, n_features_in_, feature_names_in_, schema_, model_
        As in ``NaiveBayesClassifier``.
    peers_ : ndarray of shape (n_peers_,)
        The peers, sorted as ``np.unique`` sorts them (``0 … n_peers - 1`` for the seeded split).
    peer_stats_ : ndarray of shape (n_peers_, size)
        Every peer's final statistics, in the order of ``peers_``.
    stats_ : ndarray of shape (size,)
        Their mean: the network's classifier.
    theta_ : dict of ndarray
        Parameters of ``stats_``.
    ess_ : float
        The equivalent sample size used.
    """

    def __init__(self, *, model="nb", model_options=None, categorical_features=FROM_DTYPE, n_peers=10, topology="tree",
                 period=None, rounds=64, algorithm=DEFAULT_ALGORITHM, iters=None, lr=DEFAULT_LR, ess=None, seed=0):
        self.model = model
        self.model_options = model_options
        self.categorical_features = categorical_features
        self.n_peers = n_peers
        self.topology = topology
        self.period = period
        self.rounds = rounds
        self.algorithm = algorithm
        self.iters = iters
        self.lr = lr
        self.ess = ess
        self.seed = seed

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.model != "qda"  # as QDAClassifier's
        return tags

    def fit(self, X, y, peers=None):
        """Run CRC over the peers' parts of (X, y).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numbers, strings or categories; None or NaN for a missing value.
        y : array-like of shape (n_samples,)
            Class labels of any one type.
        peers : array-like of shape (n_samples,), default=None
            The peer that holds each sample (any labels; one peer per distinct
            label). None shares the samples out over ``n_peers`` peers at
            random, as evenly as possible.

        Returns
        -------
        self : object
        """
        _check_integer("n_peers", self.n_peers, 1)
        _check_integer("rounds", self.rounds, 0)
        if self.algorithm not in ALGORITHMS:
            raise CRCError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.iters is not None:
            _check_integer("iters", self.iters, 1)
        _check_positive("lr", self.lr)
        columns = self._columns(X, reset=True)
        y = _labels(y, len(columns[0]))
        classes, codes = _classes(y)
        labels, parts = self._parts(peers, len(y))
        schema, x = _infer(self._feature_names(), columns, classes, codes, self._categorical(X))
        schema = schema.standardized(x[:, schema.continuous])
        model = make_model(self.model, schema, **(self.model_options or {}))
        local = LocalData.from_parts(model.features(standardize(schema, x)), codes, parts)
        mixing = Schedule(self.topology, len(parts), period=math.inf if self.period is None else self.period, seed=self.seed)
        ess = default_ess(len(codes), len(parts), self.lr) if self.ess is None else self.ess
        settings = resolve({"algorithm": self.algorithm, "iters": self.iters, "model": self.model,
                            "structure": (self.model_options or {}).get("structure", _PC["structure"]) if self.model == "pc" else None})
        engine = CRCEngine(model, local, mixing, ess=ess, iterations=settings["iters"], acceleration=acceleration_of(settings))
        self.peer_stats_, self.ess_, self.peers_ = engine.run(self.rounds), engine.ess, labels
        self._fitted(schema, model, self.peer_stats_.mean(axis=0), classes)
        return self

    def _parts(self, peers, n_samples: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """The peers' labels (n_peers_,) and each one's sample indices, ascending: from ``peers``, or from the
        seeded split (a random permutation cut into ``n_peers`` parts of near-equal sizes)."""
        if peers is None:
            peers = np.empty(n_samples, dtype=np.int64)
            peers[np.random.default_rng(self.seed).permutation(n_samples)] = np.repeat(
                np.arange(self.n_peers), local_sizes(n_samples, self.n_peers))
        peers = column_or_1d(peers)
        check_consistent_length(np.empty(n_samples), peers)
        missing = np.flatnonzero(as_column(peers).codes < 0)
        if missing.size:
            raise ValueError(f"peers has {missing.size} missing entries (first at index {missing[0]})")
        labels, inverse = np.unique(peers, return_inverse=True)
        inverse = inverse.reshape(-1)
        return labels, np.split(np.argsort(inverse, kind="stable"), np.cumsum(np.bincount(inverse))[:-1])

    def _theta(self, peer: int | None) -> dict:
        check_is_fitted(self)
        return self.theta_ if peer is None else self.model_.theta(self._peer_stats(peer))

    def _peer_stats(self, peer: int) -> np.ndarray:
        if not 0 <= peer < len(self.peer_stats_):
            raise CRCError(f"peer must lie in [0, {len(self.peer_stats_) - 1}], got {peer}")
        return self.peer_stats_[peer]

    def predict_log_proba(self, X, *, peer=None) -> np.ndarray:
        """Log class probabilities (n_samples, n_classes) of the network, or of the ``peer``-th peer."""
        return self._log_posteriors(X, self._theta(peer))

    def predict_proba(self, X, *, peer=None) -> np.ndarray:
        """Class probabilities (n_samples, n_classes) of the network, or of the ``peer``-th peer."""
        return np.exp(self.predict_log_proba(X, peer=peer))

    def predict(self, X, *, peer=None) -> np.ndarray:
        """Labels (n_samples,) predicted by the network, or by the ``peer``-th peer."""
        best = self.predict_log_proba(X, peer=peer).argmax(axis=1)
        return self.classes_[best]

    def score(self, X, y, sample_weight=None, *, peer=None) -> float:
        """Accuracy of the network, or of the ``peer``-th peer, on (X, y)."""
        predicted = self.predict(X, peer=peer)
        return float(np.average(predicted == column_or_1d(y), weights=sample_weight))

    def to_model(self, *, peer=None) -> TrainedModel:
        """The network's classifier, or the ``peer``-th peer's, as a model file."""
        check_is_fitted(self)
        stats = self.stats_ if peer is None else self._peer_stats(peer)
        return _trained_model(self.schema_, self.model_, stats, self.classes_)


def from_model(model) -> _Classifier:
    """A fitted estimator that predicts as a model file does.

    Parameters
    ----------
    model : TrainedModel or path
        A model written by ``to_model().save(path)`` or by ``crc node``.

    Returns
    -------
    NaiveBayesClassifier, QDAClassifier or CircuitClassifier
        Its ``classes_`` have the dtype of the labels it was fitted on when the
        file records it (``to_model`` does for boolean, integer, float and numpy
        string labels that are their own canonical spellings). Otherwise they
        are the schema's class strings (object dtype) in the schema's order,
        which for a peer's file is numeric order if all are numbers: labels
        such as ``" a"`` or ``"1.0"`` come back as ``"a"`` and ``"1"``. Its
        parameters are the defaults but for the circuit structure and
        ``categorical_features``, the indices of the file's discrete features
        (so a refit keeps the feature kinds); ``feature_names_in_`` is set
        unless the features are named ``x0 … x{d-1}``.
    """
    if not isinstance(model, TrainedModel):
        model = load_model(model)
    estimator = ESTIMATORS[model.kind](categorical_features=model.schema.discrete, **model.model.options)
    names = model.schema.feature_names
    estimator.n_features_in_ = len(names)
    if names != [f"x{j}" for j in range(len(names))]:
        estimator.feature_names_in_ = np.array(names, dtype=object)
    estimator._fitted(model.schema, model.model, model.stats, model.labels)
    return estimator


def _trained_model(schema: Schema, model: GenerativeModel, stats: np.ndarray, classes: np.ndarray) -> TrainedModel:
    return TrainedModel(schema, model.kind, stats, label_dtype=label_dtype_of(classes), **model.options)


def _labels(y, n_samples: int) -> np.ndarray:
    """Validated class labels of shape (n_samples,); a missing label is an error."""
    if y is None:
        raise ValueError("requires y to be passed, but the target y is None")
    y = column_or_1d(y, warn=True)
    check_consistent_length(np.empty(n_samples), y)
    if y.dtype.kind in "fc":
        y = check_array(y, ensure_2d=False, dtype=None, input_name="y")
    missing = np.flatnonzero(as_column(y).codes < 0)
    if missing.size:
        raise CRCError(f"y has {missing.size} missing labels (first at index {missing[0]})")
    check_classification_targets(y)
    return y


def _sample_weight(sample_weight, n_samples: int) -> np.ndarray | None:
    """Validated weights of shape (n_samples,), or None."""
    if sample_weight is None:
        return None
    weight = np.asarray(sample_weight, dtype=np.float64)
    if weight.ndim == 0:
        weight = np.full(n_samples, float(weight))
    if weight.shape != (n_samples,):
        raise ValueError(f"sample_weight.shape == {weight.shape}, expected {(n_samples,)}!")
    if not np.all(np.isfinite(weight)) or np.any(weight < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if not weight.sum() > 0:
        raise ValueError("sample_weight is zero for every sample")
    return weight


def _classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_inverse=True)``: the classes (at least two) and each label's code."""
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise CRCError(f"y has one class ({_shown(classes[0])}) among the samples of positive weight; a classifier needs two")
    return classes, codes.reshape(-1).astype(np.int64)


def _infer(names: list[str], columns: list[np.ndarray], classes: np.ndarray, codes: np.ndarray,
           categorical: list[str]) -> tuple[Schema, np.ndarray]:
    """The schema of the columns (classes in the order of ``classes``, not standardized; the ``categorical``
    features and those holding anything but numbers discrete, the others continuous) and the encoded (m, d) matrix."""
    spellings = tuple(as_column(classes).cells())
    if len(set(spellings)) != len(spellings):
        raise CRCError(f"the classes {', '.join(map(repr, classes.tolist()))} do not have distinct spellings as strings")
    cells = {name: _cells(column, name) for name, column in zip(names, columns)}
    label = LABEL
    while label in cells:
        label += "_"
    schema = infer_schema({**cells, label: [spellings[code] for code in codes]}, label, max_discrete_distinct=0,
                          categorical=categorical)
    schema = replace(schema, classes=spellings)
    x, _ = encode(schema, cells, labels=False, source="X")
    return schema, x


def _cells(column: np.ndarray, name: str):
    """One feature column as ``as_column`` takes it; an infinite number is an error."""
    if column.dtype.kind == "f":
        if np.isinf(column).any():
            raise ValueError(f"feature {name!r} holds an infinite value")
        return column
    if any(isinstance(v, (float, np.floating)) and math.isinf(v) for v in column.tolist()):
        raise ValueError(f"feature {name!r} holds an infinite value")
    return column


def _standardized(schema: Schema, x: np.ndarray, weight: np.ndarray | None) -> Schema:
    """The schema with each continuous feature's (weighted) mean and standard deviation over ``x`` (m, d).

    Every row has a positive weight, and every feature a value in some row (``infer_schema`` checks it).
    """
    if weight is None:
        return schema.standardized(x[:, schema.continuous])
    features = list(schema.features)
    for j in schema.continuous:
        present = ~np.isnan(x[:, j])
        mean, std = moments(x[present, j], weight[present])
        features[j] = replace(features[j], mean=mean, std=std if std > 0 else 1.0)
    return replace(schema, features=tuple(features))


def _python(value):
    """A numpy scalar as the Python number it holds (model options are checked as Python types)."""
    return value.item() if isinstance(value, np.generic) else value


def _shown(value) -> str:
    """A parameter or label as a message shows it: ``0.35`` and ``'a'``, never ``np.float64(0.35)``."""
    return repr(_python(value))


def _check_integer(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise CRCError(f"{name} must be an integer of at least {minimum}, got {_shown(value)}")


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating) or not value > 0:
        raise CRCError(f"{name} must be a positive number, got {_shown(value)}")
