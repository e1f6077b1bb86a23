import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from scipy.stats import multivariate_normal

import crc.core.models.base as base_module
from crc.core import threads
from crc.core.errors import CRCError
from crc.core.models import MAX_STATISTICS, MODELS, ModelTooLarge, make_model, one_hot
from crc.core.models.base import GenerativeModel, labelled_weights
from support.tables import mixed_columns, prepared

KINDS = sorted(MODELS)


@pytest.mark.parametrize("kind", KINDS)
def test_statistics_are_additive(kind, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    w = np.random.default_rng(0).random((len(y), schema.n_classes))
    theta = model.theta(model.uniform(100.0))  # circuits' statistics hold an E-step under fixed parameters
    whole = model.labelled(theta, phi, w)
    parts = model.labelled(theta, phi[:100], w[:100]) + model.labelled(theta, phi[100:], w[100:])
    np.testing.assert_allclose(whole, parts, rtol=1e-12, atol=1e-9)
    if kind != "pc":  # without hidden variables, ML statistics are the plain one-hot statistics
        np.testing.assert_allclose(model.fit_ml(phi, y), model.statistics(phi, one_hot(y, schema.n_classes)))


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=25, deadline=None)
@given(scale=st.floats(min_value=1e-3, max_value=1e3))
def test_theta_is_scale_invariant(kind, scale):
    schema, x, y = prepared(mixed_columns(120, seed=5))
    model = make_model(kind, schema)
    phi = model.features(x)
    s = model.fit_ml(phi, y)
    np.testing.assert_allclose(model.log_joint(model.theta(scale * s), phi), model.log_joint(model.theta(s), phi), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_uniform_has_ess_m0_and_uniform_posterior(kind, mixed):
    schema, x, _ = mixed
    model = make_model(kind, schema)
    s = model.uniform(1234.0)
    assert model.ess(s) == pytest.approx(1234.0, rel=1e-15)
    np.testing.assert_allclose(model.posteriors(model.theta(s), model.features(x)), 1 / schema.n_classes, atol=1e-12)


def _ml_posteriors(kind: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """p(y | x) (m, r) of the maximum-likelihood Gaussian classifier of (x, y), computed directly with scipy: class
    frequencies, class means, and the classes' biased covariances (QDA) or their diagonals (naive Bayes). scikit-learn
    is no reference for QDA: its releases up to 1.7 divide the covariance by n - 1."""
    log_joint = []
    for k in np.unique(y):
        xk = x[y == k]
        cov = np.cov(xk, rowvar=False, bias=True)
        cov = np.diag(np.diag(cov)) if kind == "nb" else cov
        log_joint.append(np.log(len(xk) / len(x)) + multivariate_normal(xk.mean(axis=0), cov).logpdf(x))
    return softmax(np.column_stack(log_joint), axis=1)


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_ml_posteriors_are_those_of_the_ml_gaussians(kind, continuous):
    schema, x, y = continuous
    model = make_model(kind, schema)
    phi = model.features(x)
    ours = model.posteriors(model.theta(model.fit_ml(phi, y)), phi)
    np.testing.assert_allclose(ours, _ml_posteriors(kind, x, y), atol=1e-9)


def test_categorical_nb_matches_hand_computation():
    # Two classes, two discrete features; every (class, category) pair occurs.
    rows = [("a", "u", "p"), ("a", "v", "p"), ("b", "u", "q"), ("a", "u", "q"), ("b", "v", "q"), ("b", "v", "p"), ("b", "v", "q")]
    columns = {"f": [r[0] for r in rows], "g": [r[1] for r in rows], "cls": [r[2] for r in rows]}
    schema, x, y = prepared(columns, "cls")
    model = make_model("nb", schema)
    theta = model.theta(model.fit_ml(model.features(x), y))
    # p: 3 rows (f: a,a,b; g: u,v,v); q: 4 rows (f: b,a,b,b; g: u,u,v,v)
    # p(p) p(f=a|p) p(g=u|p) = 3/7 * 2/3 * 1/3 ; p(q) p(f=a|q) p(g=u|q) = 4/7 * 1/4 * 2/4
    joint_p, joint_q = 3 / 7 * 2 / 3 * 1 / 3, 4 / 7 * 1 / 4 * 2 / 4
    query = model.features(np.array([[0.0, 0.0]]))
    expected = [joint_p / (joint_p + joint_q), joint_q / (joint_p + joint_q)]
    np.testing.assert_allclose(model.posteriors(theta, query)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(np.exp(theta["log_cat"][0]), [2 / 3, 1 / 3, 1 / 3, 2 / 3], rtol=1e-12)


def test_nb_with_missing_values_trains_predicts_and_marginalises():
    columns = mixed_columns(400, seed=2, missing=0.2)
    schema, x, y = prepared(columns)
    model = make_model("nb", schema)
    phi = model.features(x)
    assert np.isnan(x).mean() == pytest.approx(0.2, abs=0.03)
    theta = model.theta(model.fit_ml(phi, y))
    post = model.posteriors(theta, phi)
    assert np.all(np.isfinite(post)) and (post.argmax(1) == y).mean() > 0.5
    for j, name in enumerate(schema.feature_names):
        rows = np.flatnonzero(np.isnan(x[:, j]))
        reduced_cols = {k: v for k, v in columns.items() if k != name}
        reduced_schema, reduced_x, _ = prepared(reduced_cols)
        reduced = make_model("nb", reduced_schema)
        reduced_phi = reduced.features(reduced_x)
        reduced_theta = reduced.theta(reduced.fit_ml(reduced_phi, y))
        np.testing.assert_allclose(post[rows], reduced.posteriors(reduced_theta, reduced_phi[rows]), atol=1e-12)


def test_qda_rejects_missing_continuous_but_marginalises_missing_discrete():
    columns = mixed_columns(300, seed=3)
    columns["c1"][5] = ""
    schema, x, y = prepared(columns)
    with pytest.raises(CRCError, match="QDA does not handle missing continuous values .* feature 'c1'"):
        make_model("qda", schema).features(x)
    columns = mixed_columns(300, seed=3)
    columns["d1"][7] = ""
    schema, x, y = prepared(columns)
    qda = make_model("qda", schema)
    phi = qda.features(x)
    full = qda.posteriors(qda.theta(qda.fit_ml(phi, y)), phi[7:8])
    # the discrete part is independent of the rest given the class, so dropping d1 is exact
    reduced_schema, reduced_x, _ = prepared({k: v for k, v in columns.items() if k != "d1"})
    reduced = make_model("qda", reduced_schema)
    rphi = reduced.features(reduced_x)
    np.testing.assert_allclose(full, reduced.posteriors(reduced.theta(reduced.fit_ml(rphi, y)), rphi[7:8]), atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_theta_rejects_bad_statistics(kind, mixed):
    model = make_model(kind, mixed[0])
    with pytest.raises(CRCError, match="length"):
        model.theta(np.zeros(model.size + 1))
    bad = model.uniform(10.0)
    bad[1] = np.nan
    with pytest.raises(CRCError, match="non-finite"):
        model.theta(bad)
    with pytest.raises(CRCError, match="non-positive equivalent sample size"):
        model.theta(-model.uniform(10.0))


def test_theta_safeguards_do_not_modify_statistics(mixed):
    schema, x, y = mixed
    model = make_model("nb", schema)
    s = model.fit_ml(model.features(x), y)
    s[model.layout.n_columns + 1] = -5.0  # a negative count after calibration is legal
    before = s.copy()
    theta = model.theta(s)
    assert np.array_equal(s, before)
    assert all(np.all(np.isfinite(v)) for v in theta.values())


def test_schema_id_depends_on_model_and_schema(mixed):
    schema = mixed[0]
    assert make_model("nb", schema).schema_id == make_model("nb", schema).schema_id
    assert make_model("nb", schema).schema_id != make_model("qda", schema).schema_id
    other = prepared(mixed_columns(300, seed=9))[0]
    assert make_model("nb", other).schema_id != make_model("nb", schema).schema_id


@pytest.mark.parametrize("kind", ["nb", "qda"])
@pytest.mark.parametrize("with_mask", [False, True])
def test_a_pooled_residual_by_blocks_of_instances_is_the_whole_one_on_any_threads(kind, with_mask, mixed, monkeypatch):
    """A large pooled phi goes by blocks of instances (``POOLED_BLOCK_ELEMENTS``), on threads: the same posteriors
    and, up to the order of the additions, the same residual as one product; bit for bit on 1 and 3 threads."""
    schema, x, y = mixed
    model = make_model(kind, schema)
    phi = model.features(x)
    weights = labelled_weights(y, schema.n_classes)
    theta = model.theta(model.fit_ml(phi, y))
    mask = np.random.default_rng(1).random(len(y)) if with_mask else None
    whole = GenerativeModel.residual_and_posteriors(model, theta, phi, weights, mask)
    monkeypatch.setattr(base_module, "POOLED_BLOCK_ELEMENTS", 7 * phi.shape[1])  # blocks of 7 instances
    starts = []

    def recording_map(work, items):
        items = list(items)
        starts.append(items)
        return threads.ordered_map(work, items)

    monkeypatch.setattr(base_module, "ordered_map", recording_map)
    runs, before = [], threads.threads()
    for count in (1, 3):
        threads.set_threads(count)
        try:
            runs.append(model.residual_and_posteriors(theta, phi, weights, mask))
        finally:
            threads.set_threads(before)
    assert all(np.array_equal(one, many) for one, many in zip(*runs))
    residual, posteriors = runs[0]
    np.testing.assert_allclose(posteriors, whole[1], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(residual, whole[0], rtol=0, atol=1e-12 * np.abs(whole[0]).max())
    assert starts == 2 * [list(range(0, len(y), 7))]


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_larger_than_the_limit_is_refused_before_it_is_built(kind, mixed, monkeypatch):
    """A schema file of under a megabyte (50,000 classes, 2,000 categories a feature) asked a peer for 16 GiB."""
    schema = mixed[0]
    size = make_model(kind, schema).size
    monkeypatch.setattr(base_module, "MAX_STATISTICS", size)
    assert make_model(kind, schema).size == size
    monkeypatch.setattr(base_module, "MAX_STATISTICS", size - 1)
    with pytest.raises(ModelTooLarge, match=rf"^the schema's model would hold {size:,} statistics or more, more than {size - 1:,}: "):
        make_model(kind, schema)


def test_a_schema_of_huge_lists_is_refused_at_the_real_limit_in_a_fraction_of_a_second(mixed):
    schema = mixed[0]
    huge = replace(schema, classes=tuple(f"c{i}" for i in range(50_000)),
                   features=tuple(replace(f, categories=tuple(f"k{i}" for i in range(2_000))) if f.categories else f
                                  for f in schema.features))
    started = time.monotonic()
    for kind in KINDS:
        with pytest.raises(ModelTooLarge, match=f"more than {MAX_STATISTICS:,}"):
            make_model(kind, huge)
    assert time.monotonic() - started < 5
