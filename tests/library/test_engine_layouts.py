"""The engine's fast paths (class-major step, feature-major naive Bayes, node blocks, one BLAS thread) give the
statistics of the plain formulas."""

import numpy as np
import pytest

import crc.core.engine as engine_module
from crc.core import metrics, threads
from crc.core.acceleration import MOMENTUM_PRESET, PAPER, PRESET, Acceleration
from crc.core.calibration import lrc
from crc.core.engine import CRCEngine, LocalData, class_major_weights
from crc.core.models import make_model
from crc.core.models.base import labelled_weights
from crc.core.numeric import normalise_exp
from crc.core.threads import blas_threads, single_threaded_blas
from crc.topologies import averaging_matrix, random_tree_graph
from support.tables import mixed_columns, prepared

PARTS = [slice(0, 30), slice(30, 100), slice(100, 130), slice(130, 200), slice(200, 260), slice(260, 300)]


@pytest.fixture
def missing():
    return prepared(mixed_columns(missing=0.1))


def _setup(kind, data):
    schema, x, y = data
    model = make_model(kind, schema)
    phi = model.features(x)
    parts = [np.arange(300)[p] for p in PARTS]  # unequal sizes: padding
    return model, phi, y, LocalData.from_parts(phi, y, parts), averaging_matrix(random_tree_graph(len(parts), seed=2))


def _plain_residual(model, theta, phi, weights, mask):
    """The calibration step as the unbatched formula writes it, row-major natural parameters."""
    eta = np.ascontiguousarray(model.natural(theta))
    posteriors = normalise_exp(np.matmul(eta, np.swapaxes(phi, -1, -2)), axis=-2)
    if mask is not None:
        posteriors *= mask[..., None, :]
    table = np.matmul(np.swapaxes(weights, -1, -2) - posteriors, phi)
    return table.reshape(table.shape[:-2] + (model.size,))


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_engine_equals_the_plain_rounds_run_with_default_threads(kind, mixed):
    model, phi, y, local, mixing = _setup(kind, mixed)
    weights = labelled_weights(local.y, model.n_classes, local.mask)
    stats = np.tile(model.uniform(500.0), (len(PARTS), 1))
    for _ in range(8):  # no thread limit here, plain layouts, the padding masked
        aggregated = mixing @ stats
        stats = aggregated + _plain_residual(model, model.theta(aggregated), local.phi, weights, local.mask)
    fast = CRCEngine(model, local, mixing, ess=500.0).run(8)
    np.testing.assert_allclose(fast, stats, rtol=1e-12, atol=1e-12 * np.abs(stats).max())


def test_the_thread_limit_changes_no_statistic(mixed):
    """The same rounds with BLAS on its default threads: equal to rounding, as BLAS promises no bits across thread
    counts (a threaded kernel may split a sum), and the limit is there for speed only."""
    model, _, _, local, mixing = _setup("nb", mixed)
    limited = CRCEngine(model, local, mixing, ess=500.0).run(6)
    unlimited = CRCEngine(model, local, mixing, ess=500.0)
    for _ in range(6):  # the same round without the limit
        unlimited.stats = lrc(model, unlimited.aggregate(), local.phi, unlimited.weights, unlimited._padding)
        unlimited.round += 1
    np.testing.assert_allclose(limited, unlimited.stats, rtol=1e-12, atol=1e-12 * np.abs(limited).max())


def test_the_thread_limit_holds_during_rounds_only(mixed):
    model, _, _, local, mixing = _setup("nb", mixed)
    default = blas_threads()
    seen = []
    CRCEngine(model, local, mixing, ess=500.0).run(2, callback=lambda *_: seen.append(blas_threads()))
    assert seen == [default, default]
    with single_threaded_blas():
        assert blas_threads() in (1, None)
    assert blas_threads() == default


MOMENTUM = Acceleration(**MOMENTUM_PRESET)


@pytest.mark.parametrize("speedup", [PAPER, PRESET, MOMENTUM], ids=["paper", "accelerated", "momentum"])
@pytest.mark.parametrize("kind", ["nb", "qda", "pc"])
def test_node_blocks_give_the_same_statistics(kind, speedup, missing, monkeypatch):
    model, _, _, local, mixing = _setup(kind, missing if kind != "qda" else prepared(mixed_columns()))
    whole = CRCEngine(model, local, mixing, ess=700.0, iterations=2, acceleration=speedup)
    assert whole._block >= whole.n_nodes
    expected = whole.run(5)
    monkeypatch.setattr(engine_module, "BLOCK_BYTES", 1)
    blocked = CRCEngine(model, local, mixing, ess=700.0, iterations=2, acceleration=speedup)
    assert blocked._block == 1
    history = []
    assert np.array_equal(blocked.run(5, callback=lambda _, s: history.append(s)), expected)
    assert np.array_equal(blocked.stats, whole.stats)
    assert len({id(s) for s in history}) == 5  # a new array every round
    stepped = CRCEngine(model, local, mixing, ess=700.0, iterations=2, acceleration=speedup)
    stepped._block = 4
    for _ in range(5):
        before = stepped.stats
        aggregated = stepped.step()
        np.testing.assert_array_equal(aggregated, mixing @ before)  # step's aggregate is kept
        if speedup.has_momentum:  # the memory is the aggregate itself: two statistics arrays, not three
            assert stepped.memory.previous is aggregated
    assert np.array_equal(stepped.classifiers, expected)


@pytest.mark.parametrize("speedup", [PAPER, PRESET, MOMENTUM], ids=["paper", "accelerated", "momentum"])
@pytest.mark.parametrize("kind", ["nb", "pc"])
def test_node_blocks_on_threads_give_the_same_statistics(kind, speedup, mixed, monkeypatch):
    model, _, _, local, mixing = _setup(kind, mixed)
    expected = CRCEngine(model, local, mixing, ess=700.0, acceleration=speedup).run(5)
    monkeypatch.setattr(engine_module, "MIN_THREAD_NODES", 1)
    before = threads.threads()
    threads.set_threads(3)
    try:
        engine = CRCEngine(model, local, mixing, ess=700.0, acceleration=speedup)
        assert [(b.start, b.stop) for b in engine._blocks()] == [(0, 2), (2, 4), (4, 6)]
        assert np.array_equal(engine.run(5), expected)
    finally:
        threads.set_threads(before)


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_batched_residual_equals_each_entry_alone(kind, mixed):
    model, _, _, local, _ = _setup(kind, mixed)
    rng = np.random.default_rng(3)
    stats = model.uniform(300.0) + rng.random((len(PARTS), model.size)) * 40
    theta = model.theta(stats)
    major = class_major_weights(local.y, model.n_classes, local.mask)
    plain = labelled_weights(local.y, model.n_classes, local.mask)
    for weights in (major, plain):
        for mask in (None, local.mask):
            batched = model.residual(theta, local.phi, weights, mask)
            one_by_one = np.array([model.residual(model.theta(stats[v]), local.phi[v], plain[v], None if mask is None else mask[v])
                                   for v in range(len(PARTS))])
            np.testing.assert_allclose(batched, one_by_one, rtol=1e-12, atol=1e-10)


def test_naive_bayes_feature_major_parameters_equal_the_one_vector_form(missing):
    schema, x, y = missing
    model = make_model("nb", schema)
    rng = np.random.default_rng(4)
    stats = np.abs(model.fit_ml(model.features(x), y)) * rng.uniform(0.5, 2.0, (3, 2, model.size))  # two batch axes
    theta, eta = model.theta(stats), model.natural(model.theta(stats))
    assert eta.shape == (3, 2, model.n_classes, model.layout.n_columns)
    for i in range(3):
        for j in range(2):
            one = model.theta(stats[i, j])
            for key in one:
                assert np.array_equal(theta[key][i, j], one[key]), key
            assert np.array_equal(eta[i, j], model.natural(one))


def test_local_data_zeroes_the_padding_and_the_engine_needs_no_mask(mixed):
    model, phi, y, local, mixing = _setup("nb", mixed)
    assert not local.phi[local.mask == 0].any() and (local.mask == 0).any()
    assert CRCEngine(model, local, mixing, ess=500.0)._padding is None
    dirty = LocalData(phi=local.phi + (local.mask == 0)[..., None], y=local.y, mask=local.mask)
    assert CRCEngine(model, dirty, mixing, ess=500.0)._padding is local.mask
    np.testing.assert_array_equal(CRCEngine(model, dirty, mixing, ess=500.0).run(3), CRCEngine(model, local, mixing, ess=500.0).run(3))


@pytest.mark.parametrize("kind, options", [("nb", {}), ("qda", {}), ("pc", {}), ("pc", {"structure": "region-graph"})])
def test_node_log_likelihood_is_the_mean_log_joint_of_the_labels(kind, options, mixed):
    schema, x, y = mixed
    model = make_model(kind, schema, **options)
    phi = model.features(x)
    stats = np.stack([model.fit_ml(phi[:150], y[:150]), model.fit_ml(phi[150:], y[150:]), model.uniform(50.0)])
    joints = [model.log_joint(model.theta(s), phi) for s in stats]
    direct = np.array([np.mean(joint[np.arange(len(y)), y]) for joint in joints])
    np.testing.assert_allclose(metrics.node_log_likelihood(model, stats, phi, y), direct, rtol=1e-12)
    errors, loglik = metrics.node_errors_and_log_likelihood(model, stats, phi, y)
    assert np.array_equal(errors, metrics.node_errors(model, stats, phi, y))
    assert np.array_equal(loglik, metrics.node_log_likelihood(model, stats, phi, y))
    # A node whose classes tie on an instance (the uniform statistics tie on all) may break the tie either way,
    # depending on the last bit of a product: the error must lie between every tie resolved right and every tie
    # resolved wrong, and equal the plain argmax's wherever nothing ties.
    for node_errors, joint in zip(errors, joints):
        best = joint.max(axis=1, keepdims=True)
        tied = np.isclose(joint, best, rtol=1e-12, atol=1e-12 * np.abs(best))
        surely_wrong = ~tied[np.arange(len(y)), y]
        surely_right = ~surely_wrong & (tied.sum(axis=1) == 1)
        wrong = round(node_errors * len(y))  # an error rate is a count of instances over len(y)
        assert np.sum(surely_wrong) <= wrong <= len(y) - np.sum(surely_right)
