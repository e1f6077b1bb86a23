import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from sklearn.base import clone, is_classifier
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import make_column_transformer
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError
from sklearn.impute import SimpleImputer
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import crc
from crc.cli.main import main
from crc.core.calibration import rc
from crc.core.data import write_csv
from crc.core.errors import CRCError
from crc.core.model_file import TrainedModel, load_model
from crc.core.models import make_model, model_kind
from crc.estimators import CircuitClassifier, FederatedClassifier, NaiveBayesClassifier, QDAClassifier, from_model
from crc.tables.reader import read_csv
from support.tables import mixed_columns, prepared

ESTIMATORS = [
    NaiveBayesClassifier(), NaiveBayesClassifier(learning="ml"), QDAClassifier(), QDAClassifier(learning="ml"),
    CircuitClassifier(), CircuitClassifier(structure="region-graph", learning="ml"),
]
FEDERATED = [  # few peers and rounds: the checks fit dozens of times on small data
    FederatedClassifier(n_peers=4, rounds=8), FederatedClassifier(model="qda", topology="complete", n_peers=3, rounds=8),
    FederatedClassifier(model="pc", model_options={"structure": "region-graph"}, n_peers=2, rounds=4),
]
CLASSES = [NaiveBayesClassifier, QDAClassifier, CircuitClassifier, FederatedClassifier]


@parametrize_with_checks(ESTIMATORS + FEDERATED)  # no expected failures: every check passes
def test_scikit_learn_checks(estimator, check, monkeypatch):
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")  # else scikit-learn skips its array API check (on NumPy input): run it
    check(estimator)


def data(seed=0, m=400):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=m)
    x = rng.normal(size=(m, 3)) + y[:, None]
    cat = np.where(rng.random(m) < 0.7, y, 1 - y)
    X = np.column_stack([x, np.array(["a", "b"], dtype=object)[cat]]).astype(object)
    return X, np.array(["neg", "pos"], dtype=object)[y]


@pytest.fixture
def pd():
    return pytest.importorskip("pandas")


def frame(pd, seed=0, m=400):
    """A DataFrame of a float, a categorical, a string and a nullable-integer column with missing cells; int labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(3, size=m)
    df = pd.DataFrame({
        "num": rng.normal(size=m) + y,
        "cat": pd.Categorical(np.array(["a", "b", "c"])[np.where(rng.random(m) < 0.7, y, rng.integers(3, size=m))]),
        "word": pd.Series(np.array(["u", "v"])[rng.integers(2, size=m)], dtype=object),
        "count": pd.array(np.where(rng.random(m) < 0.6, y, rng.integers(4, size=m)), dtype="Int64"),
    })
    df.loc[::7, "num"] = np.nan
    df.loc[::11, "cat"] = np.nan
    df.loc[::13, "word"] = None
    df.loc[::5, "count"] = pd.NA
    return df, y


@pytest.mark.parametrize("cls", [NaiveBayesClassifier, QDAClassifier, CircuitClassifier])
@pytest.mark.parametrize("learning", ["ml", "rc"])
def test_fit_predict_score(cls, learning):
    X, y = data()
    clf = cls(learning=learning).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (400, 2) and np.allclose(proba.sum(axis=1), 1)
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(proba), rtol=1e-12)
    assert set(clf.predict(X)) <= {"neg", "pos"}
    Xt, yt = data(seed=1)
    assert clf.score(Xt, yt) > 0.75


def test_rc_training_soft_loss_not_above_ml():
    X, y = data()
    rc_, ml = NaiveBayesClassifier(learning="rc").fit(X, y), NaiveBayesClassifier(learning="ml").fit(X, y)
    assert rc_.training_soft_loss_ <= ml.training_soft_loss_


def test_integer_labels_stay_integers():
    X, y = load_iris(return_X_y=True)
    clf = NaiveBayesClassifier().fit(X, y)
    assert clf.classes_.dtype == y.dtype and clf.classes_.tolist() == [0, 1, 2]
    predicted = clf.predict(X)
    assert predicted.dtype == y.dtype
    assert (y == predicted).mean() == clf.score(X, y) == accuracy_score(y, predicted) > 0.9


@pytest.mark.parametrize("labels", [
    np.array([3, 10, 7], dtype=np.int32), np.array([False, True, True]), np.array([2.0, -1.0, 0.5 * 4]),
    np.array(["b", "a", "c"]), np.array(["b", "a", "c"], dtype=object), np.array([2, 1, 0], dtype=np.uint8),
])
def test_classes_have_the_labels_dtype_and_order(labels):
    X, codes = load_iris(return_X_y=True)
    y = labels[codes]
    clf = NaiveBayesClassifier().fit(X, y)
    np.testing.assert_array_equal(clf.classes_, np.unique(y))
    assert clf.classes_.dtype == np.unique(y).dtype and clf.predict(X).dtype == y.dtype
    assert set(clf.predict(X)) == set(y)


def test_scikit_learn_tools_on_integer_labels():
    X, y = load_iris(return_X_y=True)
    clf = CircuitClassifier(components=1)
    assert is_classifier(clf) and clone(clf).get_params() == clf.get_params()
    assert cross_val_score(clf, X, y, cv=3).mean() > 0.85
    search = GridSearchCV(clf, {"components": [1, 2], "learning": ["ml", "rc"]}, cv=3).fit(X, y)
    assert search.best_score_ > 0.85 and accuracy_score(y, search.predict(X)) > 0.85
    calibrated = CalibratedClassifierCV(NaiveBayesClassifier(), cv=3).fit(X, y)
    assert calibrated.predict_proba(X).shape == (150, 3) and accuracy_score(y, calibrated.predict(X)) > 0.85


def test_pipeline_on_a_dataframe(pd):
    df, y = frame(pd)
    impute = make_column_transformer((SimpleImputer(strategy="median"), ["num"]), remainder="passthrough",
                                     verbose_feature_names_out=False).set_output(transform="pandas")
    # QDA rejects missing continuous values: impute them, or say the column is categorical
    pipeline = make_pipeline(impute, QDAClassifier(categorical_features=["count"]))
    assert cross_val_score(pipeline, df, y, cv=3).mean() > 0.7
    with pytest.raises(CRCError, match="missing continuous values"):
        QDAClassifier(categorical_features=["count"]).fit(df, y)
    with pytest.raises(CRCError, match="missing continuous values .* feature 'count'"):
        make_pipeline(impute, QDAClassifier()).fit(df, y)


def test_dataframe_with_mixed_columns_and_missing_values(pd):
    df, y = frame(pd)
    assert [f.kind for f in NaiveBayesClassifier().fit(df, y).schema_.features] == [
        "continuous", "discrete", "discrete", "continuous"]  # the nullable integers are numbers
    clf = NaiveBayesClassifier(categorical_features=["count"]).fit(df, y)
    assert clf.feature_names_in_.tolist() == ["num", "cat", "word", "count"] and clf.n_features_in_ == 4
    assert [f.kind for f in clf.schema_.features] == ["continuous", "discrete", "discrete", "discrete"]
    assert clf.schema_.features[3].categories == ("0", "1", "2", "3")
    assert clf.score(df, y) > 0.7
    cells = df.astype(object).where(df.notna(), None).to_numpy()  # the same cells as an object array
    np.testing.assert_array_equal(NaiveBayesClassifier(categorical_features=[3]).fit(cells, y).predict_proba(cells),
                                  clf.predict_proba(df))
    everything_missing = pd.DataFrame({name: [None] for name in df.columns})
    np.testing.assert_allclose(clf.predict_proba(everything_missing)[0], np.exp(clf.theta_["log_prior"]), rtol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(df[["cat", "num", "word", "count"]])


@pytest.mark.parametrize("estimator", [NaiveBayesClassifier(), NaiveBayesClassifier(learning="ml"), QDAClassifier(),
                                       CircuitClassifier(), CircuitClassifier(structure="region-graph")], ids=repr)
def test_sample_weight_is_repetition(estimator):
    rng = np.random.default_rng(0)
    y = rng.integers(3, size=200)
    X = np.column_stack([rng.normal(size=(200, 3)) + y[:, None], rng.integers(0, 3, size=200)])
    estimator = clone(estimator).set_params(categorical_features=[3])  # three continuous features, one categorical
    weight = rng.integers(0, 4, size=200)
    weighted = clone(estimator).fit(X, y, sample_weight=weight)
    repeated = clone(estimator).fit(np.repeat(X, weight, axis=0), np.repeat(y, weight))
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), rtol=0, atol=1e-9)
    assert weighted.training_soft_loss_ == pytest.approx(repeated.training_soft_loss_, abs=1e-12)
    halved = clone(estimator).fit(X, y, sample_weight=weight / 2)
    np.testing.assert_allclose(halved.predict_proba(X), weighted.predict_proba(X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_a_feature_in_far_units_learns_as_at_scale_one_weighted_or_not(scale):
    """Its squares underflow or overflow: the standard deviation was 0 (the feature dropped) or infinite (refused)."""
    X, y = load_iris(return_X_y=True)
    weight = np.random.default_rng(0).integers(1, 4, size=len(y))
    for sample_weight in (None, weight):
        plain = NaiveBayesClassifier().fit(X, y, sample_weight=sample_weight)
        far = NaiveBayesClassifier().fit(X * scale, y, sample_weight=sample_weight)
        np.testing.assert_allclose(far.predict_proba(X * scale), plain.predict_proba(X), rtol=0, atol=1e-9)


def test_rc_sample_weight_is_repetition_and_none_is_unweighted(mixed):
    schema, x, y = mixed
    model = make_model("pc", schema)
    phi = model.features(x)
    weight = np.random.default_rng(1).integers(0, 3, size=len(y))
    weighted = rc(model, phi, y, iterations=10, sample_weight=weight)
    repeated = rc(model, np.repeat(phi, weight, axis=0), np.repeat(y, weight), iterations=10)
    np.testing.assert_allclose(weighted.stats, repeated.stats, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weighted.losses, repeated.losses, rtol=0, atol=1e-12)
    ones = rc(model, phi, y, iterations=10, sample_weight=np.ones(len(y)))
    np.testing.assert_allclose(ones.stats, rc(model, phi, y, iterations=10).stats, rtol=1e-12)


def small(cls, **params):
    """An estimator of class ``cls`` for a few dozen samples (few peers and rounds for the federated one)."""
    return cls(n_peers=2, rounds=16, **params) if cls is FederatedClassifier else cls(**params)


@pytest.mark.parametrize("cls", CLASSES)
def test_numbers_stay_continuous(cls):
    X, y = np.array([[0.1], [0.2], [0.3], [0.4], [0.5], [0.6]]), np.array([0, 0, 0, 1, 1, 1])
    clf = small(cls).fit(X, y)
    assert clf.schema_.features[0].kind == "continuous"
    proba = clf.predict_proba([[0.15], [0.35], [0.55]])[:, 1]
    assert proba[0] < proba[1] < proba[2] and clf.predict([[0.15], [0.55]]).tolist() == [0, 1]
    told = small(cls, categorical_features=[0]).fit(X, y)
    with pytest.raises(ValueError, match=r"^X: column 'x0' has unknown category 0\.35 in data row 1; known: 0\.1, 0\.2"):
        told.predict([[0.35]])


@pytest.mark.parametrize("cls", CLASSES)
def test_a_rating_column_with_a_rare_value_cross_validates(cls):
    rng = np.random.default_rng(0)
    y = rng.integers(2, size=300)
    rating = np.minimum(rng.integers(0, 8, size=300) + 2 * y, 9)
    rating[17] = 10  # ratings 0-9, and one 10: the first fold trains without it
    X = np.column_stack([rating, rng.normal(size=300) + y])
    assert cross_val_score(small(cls), X, y, cv=5, error_score="raise").mean() > 0.75
    with pytest.raises(ValueError, match=r"column 'x0' has unknown category 10 in data row 18; known: 0, 1, 2"):
        cross_val_score(small(cls, categorical_features=[0]), X, y, cv=5, error_score="raise")


def test_categorical_features_says_which_features_are_categorical(pd):
    df, y = frame(pd)  # a float, a pandas categorical, a string and a nullable-integer column
    df["level"] = pd.Categorical(y % 2 + 1)  # a categorical of numbers
    df = df.drop(index=df.index[df["count"].isna()])
    y = y[df.index]

    def kinds(**params):
        return "".join(f.kind[0] for f in NaiveBayesClassifier(**params).fit(df, y).schema_.features)

    assert kinds() == kinds(categorical_features=None) == "cddcd"  # pandas categoricals and strings
    assert kinds(categorical_features=[]) == "cddcc"  # strings can only be categorical
    for chosen in ([3, 4], np.array([3, 4], dtype=np.int8), [False, False, False, True, True], ["count", "level"]):
        assert kinds(categorical_features=chosen) == "cdddd"
    clf = NaiveBayesClassifier(categorical_features=["count"]).fit(df, y)
    assert clf.schema_.features[3].categories == ("0", "1", "2", "3")
    X = df.astype(object).where(df.notna(), None).to_numpy()
    for chosen, message in [
        (["count"], "as feature names needs X with feature names"), ([5], r"must lie in \[0, 4\], got 5"),
        ([-1], r"must lie in \[0, 4\], got -1"), ([True, False], r"boolean mask must have shape \(5,\), got \(2,\)"),
        ("auto", "must be 'from_dtype', None, or an array-like"), ([[0, 1]], "must be 'from_dtype'"),
        ([0.5], r"must hold feature indices, booleans or feature names, got \[0.5\]"),
    ]:
        with pytest.raises(ValueError, match=message):
            NaiveBayesClassifier(categorical_features=chosen).fit(X, y)
    with pytest.raises(ValueError, match="categorical_features names 'nope', not among the features num, cat"):
        NaiveBayesClassifier(categorical_features=["count", "nope"]).fit(df, y)


@pytest.mark.parametrize("cls", CLASSES)
def test_empty_sparse_nan_label_and_regression_targets_are_refused(cls):
    """With scikit-learn's usual errors (matched on their key words, which do not change between releases)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 2
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        small(cls).fit(np.empty((0, 3)), [])
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        small(cls).fit(np.empty((40, 0)), y)
    for sparse in (sp.csr_array(X), sp.csr_matrix(X)):
        with pytest.raises(TypeError, match="Sparse data was passed.*dense data is required"):
            small(cls).fit(sparse, y)
    with pytest.raises(ValueError, match="y contains NaN"):
        small(cls).fit(X, np.where(y == 1, np.nan, 0.0))
    with pytest.raises(ValueError, match="y has 2 missing labels"):
        small(cls).fit(X, np.where(np.isin(np.arange(40), [3, 8]), None, y.astype(object)))
    with pytest.raises(ValueError, match="[Uu]nknown label type.*continuous"):
        small(cls).fit(X, X[:, 0])
    with pytest.raises(ValueError, match=r"y has one class \(1\)"):
        small(cls).fit(X, np.ones(40, dtype=int))
    with pytest.raises(ValueError, match="inconsistent numbers of samples.*40, 39"):
        small(cls).fit(X, y[:-1])
    fitted = small(cls).fit(X, y)
    with pytest.raises(TypeError, match="Sparse data was passed"):
        fitted.predict(sp.csr_array(X))


def test_errors():
    X, y = data()
    with pytest.raises(NotFittedError):
        NaiveBayesClassifier().predict(X)
    with pytest.raises(CRCError, match="learning must be"):
        NaiveBayesClassifier(learning="em").fit(X, y)
    with pytest.raises(CRCError, match="lr must be a positive number, got 0.0"):
        NaiveBayesClassifier(lr=np.float64(0.0)).fit(X, y)
    with pytest.raises(CRCError, match="iterations must be an integer of at least 0, got 2.5"):
        QDAClassifier(iterations=np.float64(2.5)).fit(X, y)
    with pytest.raises(CRCError, match="model option 'components' must lie in"):
        CircuitClassifier(components=0).fit(X, y)
    fitted = NaiveBayesClassifier().fit(X, y)
    with pytest.raises(CRCError, match="unknown category 'c'"):
        bad = X.copy()
        bad[0, 3] = "c"
        fitted.predict(bad)
    with pytest.raises(ValueError, match="X has 3 features, but NaiveBayesClassifier is expecting 4"):
        fitted.predict(X[:, :3])
    with pytest.raises(CRCError, match="y has one class \\('neg'\\)"):
        NaiveBayesClassifier().fit(X, y, sample_weight=(y == "neg").astype(float))
    with pytest.raises(CRCError, match="y has 2 missing labels \\(first at index 3\\)"):
        NaiveBayesClassifier().fit(X, np.where(np.isin(np.arange(400), [3, 8]), None, y))
    with pytest.raises(ValueError, match="feature 'x0' holds an infinite value"):
        bad = X.copy()
        bad[5, 0] = np.inf
        NaiveBayesClassifier().fit(bad, y)
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        NaiveBayesClassifier().fit(X, y, sample_weight=-np.ones(400))


def test_circuit_parameters_are_the_declared_options():
    params = CircuitClassifier().get_params()
    declared = {option.name: option.default for option in model_kind("pc").OPTIONS}
    assert params == {**declared, "categorical_features": "from_dtype", "learning": "rc", "lr": 0.05, "iterations": 64}
    clf = CircuitClassifier(structure="region-graph", depth=np.int64(1), sums=3).fit(*data())
    assert clf.model_.options == {"structure": "region-graph", "depth": 1, "repetitions": 2, "sums": 3, "structure_seed": 0}


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
@pytest.mark.parametrize("labels", [np.array([0, 1, 2]), np.array([-1.0, 0.0, 2.0]), np.array(["x", "yy", "z"]),
                                    np.array(["x", "yy", "z"], dtype=object), np.array([True, False, True])])
def test_model_file_round_trip(estimator, labels, tmp_path):
    X, codes = load_iris(return_X_y=True)
    y = labels[codes]
    clf = clone(estimator).fit(X, y)
    clf.to_model().save(tmp_path / "model.json")
    back = from_model(load_model(tmp_path / "model.json"))
    assert type(back) is type(clf) and back.get_params() == clf.get_params() | {"learning": "rc", "categorical_features": []}
    assert back.classes_.dtype == clf.classes_.dtype and not hasattr(back, "feature_names_in_")
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    np.testing.assert_allclose(back.predict_proba(X), clf.predict_proba(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(load_model(tmp_path / "model.json").predict_proba(X), clf.predict_proba(X), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(from_model(tmp_path / "model.json").predict(X), clf.predict(X))


def test_model_file_of_a_dataframe_predicts_raw_cells_by_name(pd, tmp_path):
    df, y = frame(pd)
    clf = CircuitClassifier(components=3).fit(df, y)
    clf.to_model().save(tmp_path / "model.json")
    trained = crc.load_model(tmp_path / "model.json")
    columns = {name: ["" if v is None else str(v) for v in df[name].astype(object).where(df[name].notna(), None)]
               for name in df.columns}
    np.testing.assert_allclose(trained.predict_proba(columns), clf.predict_proba(df), rtol=0, atol=1e-12)
    assert trained.predict(columns).tolist() == [str(v) for v in clf.predict(df)]
    back = crc.from_model(trained)
    assert back.feature_names_in_.tolist() == clf.feature_names_in_.tolist()
    np.testing.assert_array_equal(back.predict(df), clf.predict(df))


def test_crc_predict_reads_an_estimator_model(tmp_path):
    X, y = data()
    clf = NaiveBayesClassifier().fit(X, y)
    clf.to_model().save(tmp_path / "model.json")
    write_csv(tmp_path / "test.csv", {**{f"x{j}": [str(v) for v in X[:, j]] for j in range(4)}, "class": list(y)})
    result = CliRunner().invoke(main, ["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "test.csv"),
                                       "--out", str(tmp_path / "out.csv")])
    assert result.exit_code == 0, result.output
    out = read_csv(tmp_path / "out.csv")
    assert out["prediction"].cells() == clf.predict(X).tolist()
    proba = np.array([out["p(neg)"].cells(), out["p(pos)"].cells()], dtype=float).T
    np.testing.assert_allclose(proba, clf.predict_proba(X), rtol=0, atol=1e-12)


def test_labels_that_are_not_their_spelling_come_back_spelled(tmp_path):
    X, codes = load_iris(return_X_y=True)
    clf = NaiveBayesClassifier().fit(X, np.array([" a", "1.0", "b"])[codes])
    assert clf.to_model().label_dtype is None
    back = from_model(clf.to_model())
    assert back.classes_.dtype == object and back.classes_.tolist() == ["a", "1", "b"]
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


def test_a_peer_model_file_gives_string_classes_and_its_feature_kinds(mixed):
    schema, x, y = mixed
    model = make_model("qda", schema)
    back = from_model(TrainedModel(schema, "qda", model.fit_ml(model.features(x), y)))
    assert back.classes_.tolist() == list(schema.classes) and back.classes_.dtype == object
    assert back.feature_names_in_.tolist() == schema.feature_names
    assert back.categorical_features == [3, 4]  # d0 (the numbers 0, 1, 2) and d1, discrete by the CSV rule
    columns = mixed_columns()
    labels = columns.pop("label")
    refit = clone(back).fit(np.array(list(columns.values()), dtype=object).T, labels)
    assert [f.kind for f in refit.schema_.features] == [f.kind for f in schema.features]


@pytest.mark.parametrize("label_dtype, message", [("<i8", "does not spell the classes"), ("V8", "not a boolean"),
                                                  (["<i8"], "not a boolean"), ("|b1", "does not spell")])
def test_a_damaged_label_dtype_is_rejected(label_dtype, message, tmp_path):
    X, y = data()
    obj = NaiveBayesClassifier().fit(X, y).to_model().to_json()
    obj["label_dtype"] = label_dtype
    (tmp_path / "model.json").write_text(json.dumps(obj))
    with pytest.raises(CRCError, match=message):
        load_model(tmp_path / "model.json")


def test_lazy_exports():
    import crc.estimators

    assert crc.NaiveBayesClassifier is crc.estimators.NaiveBayesClassifier and crc.from_model is from_model
    assert {"CircuitClassifier", "FederatedClassifier", "QDAClassifier"} <= set(dir(crc))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        crc.nothing  # noqa: B018


def test_crc_imports_without_scikit_learn():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "import crc\n"
            "assert crc.load_model and crc.Schema\n"
            "try:\n    crc.NaiveBayesClassifier\n"
            "except ImportError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ("crc's estimators need scikit-learn: pip install 'crc-p2p[sklearn]' "
                                     "(or '.[sklearn]' from a clone)")


def test_prepared_tables_fit_like_the_estimator():
    """The estimator's schema on a table equals the project's (``infer_schema`` + ``standardized``) once told which
    numeric column the CSV rule (at most ten distinct values) makes discrete; untold, numbers stay continuous."""
    columns = mixed_columns(missing=0.1)
    schema, _, _ = prepared(columns)
    label = np.array(columns.pop("label"))
    X = np.array([columns[name] for name in columns], dtype=object).T
    X = np.where(X == "", None, X)
    assert [f.kind for f in schema.features] == ["continuous"] * 3 + ["discrete"] * 2  # d0 holds 0, 1, 2
    clf = NaiveBayesClassifier(categorical_features=[name == "d0" for name in columns]).fit(X, label)
    assert [f.kind for f in clf.schema_.features] == [f.kind for f in schema.features]
    assert [f.categories for f in clf.schema_.features] == [f.categories for f in schema.features]
    np.testing.assert_allclose([f.mean for f in clf.schema_.features], [f.mean for f in schema.features], rtol=1e-12)
    assert [f.kind for f in NaiveBayesClassifier().fit(X, label).schema_.features] == ["continuous"] * 4 + ["discrete"]
