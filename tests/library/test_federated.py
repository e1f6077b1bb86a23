import numpy as np
import pytest
from sklearn import config_context
from sklearn.base import clone
from sklearn.compose import make_column_transformer
from sklearn.exceptions import NotFittedError, UnsetMetadataPassedError
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_score, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from crc.core.acceleration import acceleration_of, resolve
from crc.core.calibration import rc
from crc.core.data import encode_features
from crc.core.engine import CRCEngine, LocalData
from crc.core.errors import CRCError
from crc.estimators import FederatedClassifier, NaiveBayesClassifier, from_model
from crc.tables.datasets import load_bundled
from crc.topologies import Schedule
from support.tables import mixed_columns, prepared

DISCRETE_NUMBERS = [3]
"""The column of ``table`` that holds the numbers 0, 1, 2 and is categorical (d0)."""


def table(m=300, seed=0, missing=0.0):
    """Object arrays of the shared mixed table (3 continuous, 2 discrete features; labels k0, k1, k2)."""
    columns = mixed_columns(m, seed=seed, missing=missing)
    y = np.array(columns.pop("label"), dtype=object)
    X = np.array(list(columns.values()), dtype=object).T
    return np.where(X == "", None, X), y


def label_sorted_peers(y, n):
    """Non-i.i.d. peers (n_samples,): instances sorted by class, cut into n contiguous chunks."""
    peers = np.empty(len(y), dtype=np.int64)
    for peer, rows in enumerate(np.array_split(np.argsort(y, kind="stable"), n)):
        peers[rows] = peer
    return peers


@pytest.mark.parametrize("model, options", [("nb", None), ("qda", None), ("pc", {"components": 3}),
                                            ("pc", {"structure": "region-graph", "structure_seed": 5})])
def test_theorem_1_on_a_complete_graph_the_network_is_rc_from_the_uniform_start(model, options):
    X, y = table()
    rounds = 30
    fed = FederatedClassifier(model=model, model_options=options, categorical_features=DISCRETE_NUMBERS,
                              topology="complete", rounds=rounds, algorithm="paper").fit(X, y, peers=label_sorted_peers(y, 6))
    phi = fed.model_.features(encode_features(fed.schema_, X))
    codes = np.searchsorted(fed.classes_, y)
    central = rc(fed.model_, phi, codes, lr=0.05, iterations=rounds, init=fed.model_.uniform(len(y)), select_best=False)
    expected = fed.model_.posteriors(fed.model_.theta(central.stats), phi)
    # The network's statistics (the peers' mean, which every peer holds after one more averaging) are RC's, scaled.
    np.testing.assert_allclose(fed.stats_ * len(y) / fed.ess_, central.stats, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fed.predict_proba(X), expected, rtol=0, atol=1e-9)
    assert np.max(np.abs(expected - 1 / 3)) > 0.1  # and the run moved away from the uniform start


def test_peers_are_a_direct_engine_run_on_the_same_parts():
    X, y = table(missing=0.1)
    cuts = np.split(np.random.default_rng(0).permutation(len(y)), [30, 100, 130, 200, 260])
    peers = np.empty(len(y), dtype=object)
    names = np.array(["f", "e", "d", "c", "b", "a"])  # the peers' labels, in np.unique's order a ... f
    for name, rows in zip(names, cuts):
        peers[rows] = name
    fed = FederatedClassifier(model="pc", topology="tree+1", period=4, rounds=12, algorithm="paper", iters=2, ess=500.0,
                              seed=3)
    fed.fit(X, y, peers=peers)
    assert fed.peers_.tolist() == ["a", "b", "c", "d", "e", "f"]
    model, schema = fed.model_, fed.schema_
    phi, codes = model.features(encode_features(schema, X)), np.searchsorted(fed.classes_, y)
    parts = [np.sort(cuts[list(names).index(name)]) for name in fed.peers_]
    engine = CRCEngine(model, LocalData.from_parts(phi, codes, parts), Schedule("tree+1", 6, period=4, seed=3),
                       ess=500.0, iterations=2)
    np.testing.assert_allclose(fed.peer_stats_, engine.run(12), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(fed.stats_, fed.peer_stats_.mean(axis=0))
    for peer in (0, 5):
        expected = model.posteriors(model.theta(fed.peer_stats_[peer]), phi)
        np.testing.assert_allclose(fed.predict_proba(X, peer=peer), expected, rtol=0, atol=1e-12)


def test_by_default_the_peers_run_the_recommended_algorithm():
    X, y = table()
    peers = label_sorted_peers(y, 4)
    fed = FederatedClassifier(categorical_features=DISCRETE_NUMBERS, topology="ring", rounds=10, seed=2).fit(X, y, peers=peers)
    model, parts = fed.model_, [np.flatnonzero(peers == p) for p in range(4)]
    phi, codes = model.features(encode_features(fed.schema_, X)), np.searchsorted(fed.classes_, y)
    settings = resolve({"model": "nb"})  # the accelerated algorithm's settings for naive Bayes
    engine = CRCEngine(model, LocalData.from_parts(phi, codes, parts), Schedule("ring", 4, seed=2), ess=fed.ess_,
                       iterations=settings["iters"], acceleration=acceleration_of(settings))
    np.testing.assert_allclose(fed.peer_stats_, engine.run(10), rtol=1e-12, atol=1e-12)
    paper = clone(fed).set_params(algorithm="paper").fit(X, y, peers=peers)
    assert not np.allclose(paper.peer_stats_, fed.peer_stats_)


def test_without_peers_the_samples_are_shared_out_at_random_by_the_seed():
    X, y = table()
    fed = FederatedClassifier(categorical_features=DISCRETE_NUMBERS, n_peers=7, rounds=5, seed=4).fit(X, y)
    assert fed.peers_.tolist() == list(range(7)) and fed.peer_stats_.shape[0] == 7
    parts = np.array_split(np.random.default_rng(4).permutation(len(y)), 7)  # 43 or 42 samples each
    peers = np.empty(len(y), dtype=np.int64)
    for peer, rows in enumerate(parts):
        peers[rows] = peer
    explicit = clone(fed).fit(X, y, peers=peers)
    np.testing.assert_array_equal(fed.peer_stats_, explicit.peer_stats_)
    assert not np.allclose(fed.peer_stats_, clone(fed).set_params(seed=5).fit(X, y).peer_stats_)
    with pytest.raises(CRCError, match="cannot share 5 training instances over 7 nodes"):
        clone(fed).fit(X[:5], y[:5])


def test_the_schema_is_the_pooled_one_and_the_ess_eq_5():
    X, y = table(missing=0.1)
    fed = FederatedClassifier(categorical_features=DISCRETE_NUMBERS, rounds=2).fit(X, y, peers=label_sorted_peers(y, 5))
    schema, _, _ = prepared(mixed_columns(missing=0.1))
    assert [f.categories for f in fed.schema_.features] == [f.categories for f in schema.features]
    np.testing.assert_allclose([f.std for f in fed.schema_.features], [f.std for f in schema.features], rtol=1e-12)
    assert fed.ess_ == pytest.approx(len(y) / (0.05 * 5)) and fed.classes_.tolist() == ["k0", "k1", "k2"]


def test_accuracy_is_close_to_centralized_rc():
    data = load_bundled("twonorm")
    order = np.random.default_rng(1).permutation(len(data.y))
    train, test = order[:1000], order[1000:3000]
    fed = FederatedClassifier(topology="tree", rounds=64).fit(data.x[train], data.y[train], peers=np.arange(1000) % 10)
    central = NaiveBayesClassifier(learning="rc").fit(data.x[train], data.y[train])
    fed_accuracy, central_accuracy = fed.score(data.x[test], data.y[test]), central.score(data.x[test], data.y[test])
    assert central_accuracy > 0.95 and abs(fed_accuracy - central_accuracy) < 0.02
    assert min(fed.score(data.x[test], data.y[test], peer=i) for i in range(10)) > 0.9


def test_a_dataframe_and_a_peer_model_file(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = table(missing=0.1)
    df = pd.DataFrame(X, columns=["c0", "c1", "c2", "d0", "d1"]).astype({"c0": float, "c1": float, "c2": float})
    codes = np.searchsorted(["k0", "k1", "k2"], y)
    fed = FederatedClassifier(model="pc", model_options={"components": 2}, n_peers=4, rounds=8).fit(df, codes)
    assert fed.feature_names_in_.tolist() == ["c0", "c1", "c2", "d0", "d1"] and fed.classes_.dtype == codes.dtype
    assert [f.kind for f in fed.schema_.features] == ["continuous"] * 4 + ["discrete"]
    fed.to_model(peer=2).save(tmp_path / "peer-2.json")
    back = from_model(tmp_path / "peer-2.json")
    np.testing.assert_allclose(back.predict_proba(df), fed.predict_proba(df, peer=2), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(back.predict(df), fed.predict(df, peer=2))
    with pytest.raises(ValueError, match="feature names"):
        fed.predict(df.iloc[:, ::-1])


def frame(m=400, seed=0):
    """A DataFrame of a float, a 0-9 rating and a string column; binary labels; 5 peers holding 80 rows each."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=m)
    df = pd.DataFrame({"income": rng.lognormal(3 + 0.4 * y, 0.3), "rating": np.minimum(rng.integers(0, 8, m) + 2 * y, 9),
                       "city": np.where(rng.random(m) < 0.7, np.array(["Bilbao", "Porto"])[y], "Lyon")})
    return df, y, np.repeat(np.arange(5), m // 5)


def pipeline(fed):
    log_income = make_column_transformer((FunctionTransformer(np.log), ["income"]), remainder="passthrough",
                                         verbose_feature_names_out=False).set_output(transform="pandas")
    return make_pipeline(log_income, fed)


def test_grid_search_over_a_pipeline_with_the_peers_routed_as_metadata():
    df, y, peers = frame()
    with config_context(enable_metadata_routing=True):
        fed = FederatedClassifier(rounds=16).set_fit_request(peers=True)
        grid = {"federatedclassifier__topology": ["tree", "complete"], "federatedclassifier__categorical_features":
                ["from_dtype", ["rating"]]}
        search = GridSearchCV(pipeline(fed), grid, cv=3).fit(df, y, peers=peers)
        assert search.best_score_ > 0.85 and search.score(df, y) > 0.85
        assert search.best_estimator_[-1].peers_.tolist() == [0, 1, 2, 3, 4]  # the refit on every row, 5 peers
        folds = cross_validate(pipeline(fed), df, y, cv=GroupKFold(5), params={"peers": peers, "groups": peers},
                               return_estimator=True)
        held_out = [sorted(set(range(5)) - set(fitted[-1].peers_.tolist())) for fitted in folds["estimator"]]
        assert sorted(held_out) == [[0], [1], [2], [3], [4]] and folds["test_score"].mean() > 0.85
        with pytest.raises(UnsetMetadataPassedError, match="peers"):
            cross_val_score(pipeline(FederatedClassifier(rounds=16)), df, y, params={"peers": peers}, error_score="raise")


def test_cross_validation_with_the_seeded_split_or_peers_as_a_fit_parameter():
    df, y, peers = frame()
    assert cross_val_score(pipeline(FederatedClassifier(rounds=16)), df, y, cv=4).mean() > 0.8
    scores = cross_val_score(pipeline(FederatedClassifier(rounds=16)), df, y, cv=4,
                             params={"federatedclassifier__peers": peers})
    assert scores.mean() > 0.8
    fitted = pipeline(FederatedClassifier(rounds=16)).fit(df, y, federatedclassifier__peers=peers)
    assert fitted[-1].peers_.tolist() == [0, 1, 2, 3, 4]


def test_errors_and_parameters():
    X, y = table()
    with pytest.raises(NotFittedError):
        FederatedClassifier().predict(X)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        FederatedClassifier(rounds=1).fit(X, y, peers=np.zeros(len(y) - 1))
    with pytest.raises(ValueError, match=r"peers has 2 missing entries \(first at index 4\)"):
        FederatedClassifier(rounds=1).fit(X, y, peers=np.where(np.isin(np.arange(len(y)), [4, 9]), np.nan, 1.0))
    for name, value, message in [("n_peers", 0, "n_peers must be an integer of at least 1, got 0"),
                                 ("rounds", 2.0, "rounds must be an integer of at least 0, got 2.0"),
                                 ("iters", np.int64(0), "iters must be an integer of at least 1, got 0"),
                                 ("lr", -1, "lr must be a positive number, got -1"),
                                 ("algorithm", "fast", "algorithm must be one of accelerated, paper, got 'fast'")]:
        with pytest.raises(CRCError, match=message):
            FederatedClassifier(**{name: value}).fit(X, y)
    fitted = FederatedClassifier(rounds=1).fit(X, y, peers=label_sorted_peers(y, 3))
    with pytest.raises(CRCError, match="peer must lie in \\[0, 2\\], got 3"):
        fitted.predict(X, peer=3)
    fed = FederatedClassifier(model="pc", model_options={"components": 3}, topology="ring", seed=7)
    assert clone(fed).get_params() == fed.get_params()
