import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from crc.core.calibration import rc
from crc.core.data import encode_features
from crc.core.engine import CRCEngine, LocalData
from crc.core.errors import CRCError
from crc.estimators import FederatedClassifier, NaiveBayesClassifier, from_model
from crc.tables.datasets import load_bundled
from crc.topologies import Schedule
from support.tables import mixed_columns, prepared


def table(m=300, seed=0, missing=0.0):
    """Object arrays of the shared mixed table (3 continuous, 2 discrete features; labels k0, k1, k2)."""
    columns = mixed_columns(m, seed=seed, missing=missing)
    y = np.array(columns.pop("label"), dtype=object)
    X = np.array(list(columns.values()), dtype=object).T
    return np.where(X == "", None, X), y


def label_sorted_parts(X, y, n):
    """Non-i.i.d. parts: instances sorted by class, cut into n contiguous chunks."""
    return [(X[part], y[part]) for part in np.array_split(np.argsort(y, kind="stable"), n)]


@pytest.mark.parametrize("model, options", [("nb", None), ("qda", None), ("pc", {"components": 3}),
                                            ("pc", {"structure": "region-graph", "structure_seed": 5})])
def test_theorem_1_on_a_complete_graph_the_network_is_rc_from_the_uniform_start(model, options):
    X, y = table()
    parts = label_sorted_parts(X, y, 6)
    rounds = 30
    fed = FederatedClassifier(model=model, model_options=options, topology="complete", rounds=rounds, iters=1).fit(parts)
    pooled_X, pooled_y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    phi = fed.model_.features(encode_features(fed.schema_, pooled_X))
    codes = np.searchsorted(fed.classes_, pooled_y)
    central = rc(fed.model_, phi, codes, lr=0.05, iterations=rounds, init=fed.model_.uniform(len(y)), select_best=False)
    expected = fed.model_.posteriors(fed.model_.theta(central.stats), phi)
    # The network's statistics (the peers' mean, which every peer holds after one more averaging) are RC's, scaled.
    np.testing.assert_allclose(fed.stats_ * len(y) / fed.ess_, central.stats, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fed.predict_proba(pooled_X), expected, rtol=0, atol=1e-9)
    assert np.max(np.abs(expected - 1 / 3)) > 0.1  # and the run moved away from the uniform start


def test_peers_are_a_direct_engine_run_on_the_same_parts():
    X, y = table(missing=0.1)
    parts = [(X[p], y[p]) for p in np.split(np.random.default_rng(0).permutation(len(y)), [30, 100, 130, 200, 260])]
    fed = FederatedClassifier(model="pc", topology="tree+1", period=4, rounds=12, iters=2, ess=500.0, seed=3).fit(parts)
    model, schema = fed.model_, fed.schema_
    phi = np.concatenate([model.features(encode_features(schema, part_X)) for part_X, _ in parts])
    codes = np.searchsorted(fed.classes_, np.concatenate([part_y for _, part_y in parts]))
    index = np.split(np.arange(len(codes)), np.cumsum([len(part_y) for _, part_y in parts])[:-1])
    engine = CRCEngine(model, LocalData.from_parts(phi, codes, index), Schedule("tree+1", 6, period=4, seed=3),
                       ess=500.0, iterations=2)
    np.testing.assert_allclose(fed.peer_stats_, engine.run(12), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(fed.stats_, fed.peer_stats_.mean(axis=0))
    for peer in (0, 5):
        expected = model.posteriors(model.theta(fed.peer_stats_[peer]), model.features(encode_features(schema, X)))
        np.testing.assert_allclose(fed.predict_proba(X, peer=peer), expected, rtol=0, atol=1e-12)


def test_the_schema_is_the_pooled_one_and_the_ess_eq_5():
    X, y = table(missing=0.1)
    fed = FederatedClassifier(rounds=2).fit(label_sorted_parts(X, y, 5))
    schema, _, _ = prepared(mixed_columns(missing=0.1))
    assert [f.categories for f in fed.schema_.features] == [f.categories for f in schema.features]
    np.testing.assert_allclose([f.std for f in fed.schema_.features], [f.std for f in schema.features], rtol=1e-12)
    assert fed.ess_ == pytest.approx(len(y) / (0.05 * 5)) and fed.classes_.tolist() == ["k0", "k1", "k2"]


def test_accuracy_is_close_to_centralized_rc():
    data = load_bundled("twonorm")
    order = np.random.default_rng(1).permutation(len(data.y))
    train, test = order[:1000], order[1000:3000]
    parts = [(data.x[p], data.y[p]) for p in np.array_split(train, 10)]
    fed = FederatedClassifier(topology="tree", rounds=64).fit(parts)
    central = NaiveBayesClassifier(learning="rc").fit(data.x[train], data.y[train])
    fed_accuracy, central_accuracy = fed.score(data.x[test], data.y[test]), central.score(data.x[test], data.y[test])
    assert central_accuracy > 0.95 and abs(fed_accuracy - central_accuracy) < 0.02
    assert min(fed.score(data.x[test], data.y[test], peer=i) for i in range(10)) > 0.9


def test_dataframe_parts_and_a_peer_model_file(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = table(missing=0.1)
    df = pd.DataFrame(X, columns=["c0", "c1", "c2", "d0", "d1"]).astype({"c0": float, "c1": float, "c2": float})
    codes = np.searchsorted(["k0", "k1", "k2"], y)
    parts = [(df.iloc[p], codes[p]) for p in np.array_split(np.arange(len(y)), 4)]
    fed = FederatedClassifier(model="pc", model_options={"components": 2}, rounds=8).fit(parts)
    assert fed.feature_names_in_.tolist() == ["c0", "c1", "c2", "d0", "d1"] and fed.classes_.dtype == codes.dtype
    fed.to_model(peer=2).save(tmp_path / "peer-2.json")
    back = from_model(tmp_path / "peer-2.json")
    np.testing.assert_allclose(back.predict_proba(df), fed.predict_proba(df, peer=2), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(back.predict(df), fed.predict(df, peer=2))
    with pytest.raises(ValueError, match="feature names"):
        FederatedClassifier(rounds=1).fit([parts[0], (df.iloc[:50, ::-1], codes[:50])])


def test_errors_and_parameters():
    X, y = table()
    parts = label_sorted_parts(X, y, 3)
    with pytest.raises(NotFittedError):
        FederatedClassifier().predict(X)
    with pytest.raises(CRCError, match="at least one peer"):
        FederatedClassifier().fit([])
    with pytest.raises(ValueError, match="Mix of label input types"):
        FederatedClassifier(rounds=1).fit([parts[0], (parts[1][0], np.arange(len(parts[1][1])) % 3)])
    with pytest.raises(CRCError, match="peer must lie in \\[0, 2\\], got 3"):
        FederatedClassifier(rounds=1).fit(parts).predict(X, peer=3)
    fed = FederatedClassifier(model="pc", model_options={"components": 3}, topology="ring", seed=7)
    assert clone(fed).get_params() == fed.get_params()
