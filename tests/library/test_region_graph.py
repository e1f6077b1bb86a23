"""The region-graph circuit's vectorized passes against a straightforward per-region reference."""

import numpy as np
import pytest

import crc.core.models.region_graph as region_graph_module
from crc.core import threads
from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.core.models.base import labelled_weights
from crc.core.numeric import normalise_exp
from crc.core.schema import infer_schema
from support.tables import mixed_columns, prepared


def _logsumexp(a, axis=-1):
    top = np.max(a, axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(a - top), axis=axis))


def reference_upward(model, theta, phi):
    """Per region, in log space: the products under each inner sum region by (repetition, region) and the top
    products of all repetitions (..., m, r, sum of top widths)."""
    below, tops = {}, []
    for t, regions in enumerate(model.trees):
        values = []
        for i, region in enumerate(regions):
            if region.children is None:
                cols = np.concatenate([model._feature_columns[j] for j in region.features])
                eta = theta["natural"][..., :, t, :, :][..., cols]  # (..., r, S, c)
                values.append(np.einsum("...mc,...rsc->...mrs", phi[..., cols], eta))
                continue
            a, b = (values[c] for c in region.children)
            products = (a[..., :, None] + b[..., None, :]).reshape(a.shape[:-1] + (-1,))
            if i == len(regions) - 1:
                values.append(products)
                continue
            below[(t, i)] = products
            log_w = theta["log_inner"][..., :, model._inner.index((t, i)), :, :]  # (..., r, S, S^2)
            values.append(_logsumexp(log_w[..., None, :, :, :] + products[..., None, :]))
        tops.append(values[-1])
    return below, np.concatenate(tops, axis=-1)


def reference_log_joint(model, theta, phi):
    _, tops = reference_upward(model, theta, phi)
    return theta["log_prior"][..., None, :] + _logsumexp(theta["log_top"][..., None, :, :] + tops)


def reference_labelled(model, theta, phi, weights):
    """``s(X, W; theta)`` region by region: the downward pass of the flows, each instance weighted by phi[..., 0]."""
    weights = weights * phi[..., :1]
    below, tops = reference_upward(model, theta, phi)
    scores = theta["log_top"][..., None, :, :] + tops
    top_flow = weights[..., None] * np.exp(scores - _logsumexp(scores)[..., None])
    sums, width = model.sums, model.leaves.layout.n_columns - 1
    inner = np.zeros(weights.shape[:-2] + (len(model._inner), model.n_classes, sums, sums * sums))
    leaves = np.zeros(weights.shape[:-2] + (model.n_classes, model.repetitions, sums, width))
    start = 0
    for t, regions in enumerate(model.trees):
        flows = {len(regions) - 1: top_flow[..., start:start + sums * sums]}
        start += sums * sums
        for i in range(len(regions) - 1, -1, -1):
            region, flow = regions[i], flows.pop(i)  # flow (..., m, r, channels)
            if region.children is None:
                cols = np.concatenate([model._feature_columns[j] for j in region.features])
                leaves[..., :, t, :, cols - 1] += np.moveaxis(np.einsum("...mrs,...mc->...rsc", flow, phi[..., cols]), -1, 0)
                continue
            if i != len(regions) - 1:
                n = model._inner.index((t, i))
                scores = theta["log_inner"][..., :, n, :, :][..., None, :, :, :] + below[(t, i)][..., None, :]
                edge = flow[..., None] * np.exp(scores - _logsumexp(scores)[..., None])  # (..., m, r, S, S^2)
                inner[..., n, :, :, :] = edge.sum(axis=-4)
                flow = edge.sum(axis=-2)
            grid = flow.reshape(flow.shape[:-1] + (sums, sums))
            flows[region.children[0]], flows[region.children[1]] = grid.sum(axis=-1), grid.sum(axis=-2)
    table = np.concatenate([weights.sum(axis=-2)[..., None], top_flow.sum(axis=-3),
                            np.moveaxis(inner, -4, -3).reshape(inner.shape[:-4] + (model.n_classes, -1)),
                            leaves.reshape(leaves.shape[:-3] + (-1,))], axis=-1)
    return table.reshape(table.shape[:-2] + (-1,))


def _case(seed, depth, repetitions, sums, missing):
    schema, x, y = prepared(mixed_columns(120, seed=seed, missing=missing))
    model = make_model("pc", schema, structure="region-graph", depth=depth, repetitions=repetitions, sums=sums,
                       structure_seed=seed)
    phi = model.features(x)
    rng = np.random.default_rng(seed)
    # three nodes' statistics: EM from the start, then moved by random calibration-like steps
    stats = model.fit_ml(phi, y, iterations=3)
    moved = stats + 0.3 * model.labelled(model.theta(stats), phi, rng.random((len(y), schema.n_classes)))
    stats = np.stack([stats, model.uniform(50.0), moved])
    return model, phi, y, stats


CASES = [(0, 1, 1, 1, 0.0), (1, 2, 2, 2, 0.1), (2, 3, 3, 3, 0.2), (3, 2, 4, 2, 0.0), (4, 4, 2, 3, 0.15)]


@pytest.mark.parametrize("seed, depth, repetitions, sums, missing", CASES)
def test_vectorized_passes_equal_the_per_region_reference(seed, depth, repetitions, sums, missing):
    model, phi, y, stats = _case(seed, depth, repetitions, sums, missing)
    theta = model.theta(stats)
    phis = np.stack([phi] * 3)
    weights = np.stack([labelled_weights(y, model.n_classes)] * 3)
    expected_joint = reference_log_joint(model, theta, phis)
    np.testing.assert_allclose(model.log_joint(theta, phis), expected_joint, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(model.log_joint(theta, phi), expected_joint, rtol=1e-11, atol=1e-9)  # shared phi
    expected = reference_labelled(model, theta, phis, weights)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(model.labelled(theta, phis, weights), expected, rtol=0, atol=1e-10 * scale)
    mask = (np.random.default_rng(seed).random(phis.shape[:2]) < 0.8).astype(float)[..., None]
    posteriors = normalise_exp(expected_joint.copy(), axis=-1)
    np.testing.assert_allclose(model.residual(theta, phis, weights * mask, mask[..., 0]),
                               reference_labelled(model, theta, phis, (weights - posteriors) * mask), rtol=0, atol=1e-10 * scale)


def test_blocks_of_instances_and_nodes_change_nothing(monkeypatch):
    model, phi, y, stats = _case(5, 2, 2, 2, 0.1)
    theta = model.theta(stats)
    phis, weights = np.stack([phi] * 3), np.stack([labelled_weights(y, model.n_classes)] * 3)
    whole = model.log_joint(theta, phis), model.residual(theta, phis, weights)
    monkeypatch.setattr(region_graph_module, "BLOCK_ELEMENTS", 1)
    monkeypatch.setattr(region_graph_module, "BLOCK_INSTANCES", 7)  # 18 blocks of instances, one node each
    np.testing.assert_allclose(model.log_joint(theta, phis), whole[0], rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(model.residual(theta, phis, weights), whole[1], rtol=0, atol=1e-11 * np.abs(whole[1]).max())


def test_threads_change_no_bit_of_the_passes(monkeypatch):
    """Blocks run on several threads (crc.core.threads) are added up in block order: the same numbers as one thread."""
    model, phi, y, stats = _case(7, 2, 2, 2, 0.1)
    theta = model.theta(stats)
    phis, weights = np.stack([phi] * 3), np.stack([labelled_weights(y, model.n_classes)] * 3)
    monkeypatch.setattr(region_graph_module, "BLOCK_ELEMENTS", 1)
    monkeypatch.setattr(region_graph_module, "BLOCK_INSTANCES", 7)
    runs, before = [], threads.threads()
    for count in (1, 3):
        threads.set_threads(count)
        try:
            runs.append((model.log_joint(theta, phis), *model.residual_and_posteriors(theta, phis, weights),
                         model.labelled(theta, phi, labelled_weights(y, model.n_classes))))
        finally:
            threads.set_threads(before)
    for one, many in zip(*runs):
        assert np.array_equal(one, many)


def test_padding_rows_add_nothing():
    """A zero feature map (the engine's padding) adds nothing to s(X, W - P), as in every other model."""
    model, phi, y, stats = _case(6, 2, 2, 2, 0.0)
    theta = model.theta(stats[0])
    weights = labelled_weights(y, model.n_classes)
    padded_phi = np.concatenate([phi, np.zeros((5, phi.shape[1]))])
    padded_weights = np.concatenate([weights, np.zeros((5, model.n_classes))])
    np.testing.assert_allclose(model.residual(theta, padded_phi, padded_weights), model.residual(theta, phi, weights),
                               rtol=0, atol=1e-12 * len(y))


def test_a_one_feature_table_is_refused_naming_the_circuit_that_takes_it():
    schema = infer_schema({"x": [str(i / 10) for i in range(12)], "y": list("pq" * 6)}, "y")
    with pytest.raises(CRCError, match=r"^a region-graph circuit needs at least two features, got n_features=1: the "
                                       r"mixture circuit \(--structure mixture\) or naive Bayes takes one$"):
        make_model("pc", schema, structure="region-graph")
