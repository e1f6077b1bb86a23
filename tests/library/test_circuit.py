import numpy as np
import pytest
from scipy.integrate import trapezoid
from scipy.special import logsumexp

from crc.core.acceleration import DEFAULT_ALGORITHM, algorithm_settings
from crc.core.data import dataset_from_columns, standardize
from crc.core.engine import CRCEngine, LocalData
from crc.core.models import make_model, one_hot
from crc.protocol import SimulationConfig, simulate
from crc.protocol.baseline import mixture_of_nodes
from crc.protocol.repeat import prepare_repeat
from crc.tables.datasets import load_bundled
from crc.topologies import averaging_matrix, network_factory, random_tree_graph
from support.tables import mixed_columns, prepared


def circuit(schema, components=3, seed=0):
    return make_model("pc", schema, components=components, structure_seed=seed)


def test_one_component_is_exactly_naive_bayes(mixed):
    schema, x, y = mixed
    nb, pc = make_model("nb", schema), circuit(schema, components=1)
    phi = nb.features(x)
    np.testing.assert_array_equal(pc.features(x), phi)
    np.testing.assert_array_equal(pc.uniform(77.0), nb.uniform(77.0))
    np.testing.assert_allclose(pc.fit_ml(phi, y), nb.fit_ml(phi, y), rtol=1e-13)
    stats = nb.fit_ml(phi, y)
    np.testing.assert_allclose(pc.posteriors(pc.theta(stats), phi), nb.posteriors(nb.theta(stats), phi), rtol=1e-12)
    parts = np.array_split(np.arange(len(y)), 5)
    mixing = averaging_matrix(random_tree_graph(5, seed=0))
    runs = [CRCEngine(m, LocalData.from_parts(phi, y, parts), mixing, ess=600.0).run(10) for m in (nb, pc)]
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12, atol=1e-9)


def test_simulate_with_one_component_matches_nb():
    base = dict(data="twonorm", nodes=6, local_size=30, rounds=5)
    mixture_settings = algorithm_settings(DEFAULT_ALGORITHM, "pc")  # naive Bayes' own differ: run it with these
    nb = simulate(SimulationConfig.from_settings(**base, start=mixture_settings["start"], iters=mixture_settings["iters"]),
                  network_factory("tree"))
    pc = simulate(SimulationConfig.from_settings(**base, model="pc", components=1), network_factory("tree"))
    for name in ("ml", "rc", "crc"):
        assert pc[name] == pytest.approx(nb[name], abs=1e-12)


def one_feature(columns_fn, m=400, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=m)
    return {**columns_fn(rng, y, m), "label": [f"k{v}" for v in y]}


def _class_conditional(model, theta, phi):
    """log p(x | y) of shape (m, r)."""
    log_prior = np.log(np.exp(theta["log_prior"].reshape(model.n_classes, model.components)).sum(axis=-1))
    return model.log_joint(theta, phi) - log_prior


def test_continuous_class_conditionals_integrate_to_one():
    def bimodal(rng, y, m):
        values = np.where(rng.random(m) < 0.5, -2.0, 2.0) + 0.5 * rng.normal(size=m) + y
        return {"a": [f"{v:.6f}" for v in values], "b": [f"{v:.6f}" for v in rng.normal(size=m) * (1 + y)]}

    ds = dataset_from_columns(one_feature(bimodal), "label")
    schema = ds.schema.standardized(ds.x[:, ds.schema.continuous])
    x = standardize(schema, ds.x)
    model = circuit(schema)
    theta = model.theta(model.fit_ml(model.features(x), ds.y))
    # 1-D: marginalise feature b (missing), integrate over a.
    grid = np.linspace(-12, 12, 6001)
    cells = np.column_stack([grid, np.full_like(grid, np.nan)])
    density = np.exp(_class_conditional(model, theta, model.features(cells)))
    np.testing.assert_allclose(trapezoid(density, grid, axis=0), 1.0, atol=1e-3)
    # 2-D over (a, b).
    axis = np.linspace(-10, 10, 401)
    a, b = np.meshgrid(axis, axis, indexing="ij")
    density = np.exp(_class_conditional(model, theta, model.features(np.column_stack([a.ravel(), b.ravel()]))))
    integral = trapezoid(trapezoid(density.reshape(401, 401, 2), axis, axis=1), axis, axis=0)
    np.testing.assert_allclose(integral, 1.0, atol=1e-3)


def test_categorical_class_conditionals_sum_to_one():
    def two_discrete(rng, y, m):
        return {"c": list(rng.choice(["p", "q", "r"], size=m)), "d": [str(v) for v in (rng.integers(4, size=m) + y) % 4]}

    ds = dataset_from_columns(one_feature(two_discrete), "label")
    model = circuit(ds.schema)
    theta = model.theta(model.fit_ml(model.features(ds.x), ds.y))
    every = np.array([[c, d] for c in range(3) for d in range(4)], dtype=np.float64)
    total = np.exp(_class_conditional(model, theta, model.features(every))).sum(axis=0)
    np.testing.assert_allclose(total, 1.0, rtol=1e-12)


def test_em_never_decreases_the_training_log_likelihood(mixed):
    schema, x, y = mixed
    model = circuit(schema, components=4)
    phi = model.features(x)
    weights = one_hot(y, schema.n_classes)
    stats = model.uniform(float(len(y)))
    likelihoods = []
    for _ in range(30):
        theta = model.theta(stats)
        likelihoods.append(np.take_along_axis(model.log_joint(theta, phi), y[:, None], axis=1).sum())
        stats = model.labelled(theta, phi, weights)
    assert np.all(np.diff(likelihoods) >= -1e-8 * abs(likelihoods[0]))
    assert likelihoods[-1] > likelihoods[0] + 1.0


def test_sum_node_counts_match_class_counts_and_posteriors(mixed):
    schema, x, y = mixed
    model = circuit(schema, components=3)
    phi = model.features(x)
    theta = model.theta(model.fit_ml(phi, y))
    counts = model.table(model.labelled(theta, phi, one_hot(y, schema.n_classes)))[:, 0].reshape(schema.n_classes, 3).sum(axis=1)
    np.testing.assert_allclose(counts, np.bincount(y, minlength=schema.n_classes), rtol=1e-12)
    expected = model.table(model.labelled(theta, phi, model.posteriors(theta, phi)))[:, 0].reshape(schema.n_classes, 3).sum(axis=1)
    np.testing.assert_allclose(expected, model.posteriors(theta, phi).sum(axis=0), rtol=1e-10)


def test_structure_seed_fixes_the_circuit():
    schema, _, _ = prepared(mixed_columns(50))
    same = [circuit(schema, seed=7) for _ in range(2)]
    other = circuit(schema, seed=8)
    assert same[0].schema_id == same[1].schema_id != other.schema_id
    np.testing.assert_array_equal(same[0].uniform(10.0), same[1].uniform(10.0))
    assert not np.allclose(same[0].uniform(10.0), other.uniform(10.0))
    assert circuit(schema, components=2).schema_id != circuit(schema, components=3).schema_id


@pytest.mark.parametrize("model", ["nb", "pc"])
def test_mixture_of_one_node_is_that_nodes_ml_model(model):
    config = SimulationConfig.from_settings(data="twonorm", model=model, components=2, nodes=1, local_size=200, rounds=2, baseline=True)
    out = simulate(config, network_factory("tree"))
    assert out["mixture_of_nodes"]["test_error"] == pytest.approx(out["ml"]["test_error"], abs=1e-12)
    assert out["mixture_of_nodes"]["test_loglik"] == pytest.approx(out["ml"]["test_loglik"], rel=1e-9)


def test_mixture_of_nodes_weights_nodes_by_local_size():
    config = SimulationConfig.from_settings(data="twonorm", model="pc", components=2, nodes=5, local_size=40, rounds=2,
                                            baseline=True, size_skew=1.0)
    rep = prepare_repeat(load_bundled("twonorm"), config, 0)
    got = mixture_of_nodes(rep)
    split, model = rep.split, rep.split.model
    phi, y = split.phi_test[rep.test_idx], split.y_test[rep.test_idx]
    sizes = np.array([len(p) for p in split.parts])
    assert sizes.max() > sizes.min()
    scores = [np.log(len(p) / sizes.sum()) + model.log_joint(model.theta(model.fit_ml(split.phi_train[p], split.y_train[p])), phi)
              for p in split.parts]
    expected = logsumexp(np.stack(scores), axis=0)
    assert got["test_error"] == pytest.approx(np.mean(expected.argmax(axis=1) != y), abs=1e-12)
    assert got["test_loglik"] == pytest.approx(np.take_along_axis(expected, y[:, None], axis=1).mean(), rel=1e-9)


def region_graph(schema, seed=0, depth=2, repetitions=2, sums=2):
    return make_model("pc", schema, structure="region-graph", depth=depth, repetitions=repetitions, sums=sums,
                      structure_seed=seed)


def test_region_graph_class_conditionals_integrate_to_one():
    rng = np.random.default_rng(1)
    y = rng.integers(2, size=300)
    columns = {"a": [f"{v:.6f}" for v in rng.normal(size=300) + 2 * y], "b": [f"{v:.6f}" for v in rng.normal(size=300) * (1 + y)],
               "label": [f"k{v}" for v in y]}
    ds = dataset_from_columns(columns, "label")
    schema = ds.schema.standardized(ds.x[:, ds.schema.continuous])
    model = region_graph(schema, depth=1, repetitions=3, sums=3)
    theta = model.theta(model.fit_ml(model.features(standardize(schema, ds.x)), ds.y, iterations=10))
    axis = np.linspace(-10, 10, 401)
    a, b = np.meshgrid(axis, axis, indexing="ij")
    log_prior = theta["log_prior"]
    density = np.exp(model.log_joint(theta, model.features(np.column_stack([a.ravel(), b.ravel()]))) - log_prior)
    integral = trapezoid(trapezoid(density.reshape(401, 401, 2), axis, axis=1), axis, axis=0)
    np.testing.assert_allclose(integral, 1.0, atol=1e-3)


def test_region_graph_em_ess_and_uniform_start(mixed):
    schema, x, y = mixed
    model = region_graph(schema, seed=3)
    phi = model.features(x)
    start = model.uniform(123.0)
    assert model.ess(start) == pytest.approx(123.0)
    np.testing.assert_allclose(model.posteriors(model.theta(start), phi), 1 / schema.n_classes, atol=1e-12)
    weights = one_hot(y, schema.n_classes)
    stats, likelihoods = model.uniform(1.0), []
    for _ in range(15):
        theta = model.theta(stats)
        likelihoods.append(np.take_along_axis(model.log_joint(theta, phi), y[:, None], axis=1).sum())
        stats = model.labelled(theta, phi, weights)
        assert model.ess(stats) == pytest.approx(len(y))
    assert np.all(np.diff(likelihoods) >= -1e-8 * abs(likelihoods[0])) and likelihoods[-1] > likelihoods[0] + 1.0
    batched = model.labelled(model.theta(np.stack([start, stats])), np.stack([phi, phi]), np.stack([weights, weights]))
    np.testing.assert_allclose(batched[1], model.labelled(model.theta(stats), phi, weights), rtol=1e-10)


def test_region_graph_structure_follows_its_seed():
    schema, _, _ = prepared(mixed_columns(50))
    assert region_graph(schema, seed=1).schema_id == region_graph(schema, seed=1).schema_id
    assert region_graph(schema, seed=1).schema_id != region_graph(schema, seed=2).schema_id
    assert [r.features for r in region_graph(schema, seed=1).trees[0]] != [r.features for r in region_graph(schema, seed=2).trees[0]]
    assert region_graph(schema).schema_id != circuit(schema).schema_id
