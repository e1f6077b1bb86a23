"""Robust aggregation (crc.core.aggregation) and the attacks it is studied with (crc.core.attacks)."""

import numpy as np
import pytest
import scipy.sparse as sp

from crc.core.aggregation import CLIP_FACTOR, count_index, neighbourhood_average, peer_average
from crc.core.attacks import DISSENSUS_EPSILON, PEER_ATTACKS, byzantine_messages, byzantine_nodes, byzantine_sender, poison
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.models import MODELS, make_model
from crc.core.plausibility import plausible
from crc.topologies import averaging_matrix, random_tree_graph
from support.tables import mixed_columns, prepared


@pytest.fixture(scope="module")
def network():
    """A trained-for-a-few-rounds network: (model, statistics (n, size), mixing)."""
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    n = 12
    mixing = averaging_matrix(random_tree_graph(n, seed=3))
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), n)
    engine = CRCEngine(model, LocalData.from_parts(model.features(x), y, parts), mixing, ess=default_ess(len(y), n))
    engine.run(6)
    return model, engine.stats, mixing


def test_mean_hook_is_the_mixing_product_and_sent_rows_only_change_neighbours(network):
    model, stats, mixing = network
    assert np.array_equal(neighbourhood_average(mixing, stats), np.asarray(mixing @ stats))
    np.testing.assert_allclose(neighbourhood_average(mixing, stats, stats.copy()), mixing @ stats, rtol=1e-13)
    sent = stats.copy()
    sent[0] += 1.0
    got = neighbourhood_average(mixing, stats, sent)
    touched = np.flatnonzero(mixing.toarray()[:, 0])
    untouched = np.setdiff1d(np.arange(len(stats)), np.append(touched, 0))
    np.testing.assert_allclose(got[untouched], (mixing @ stats)[untouched], rtol=1e-13)
    np.testing.assert_allclose(got[0], (mixing @ stats)[0], rtol=1e-13)  # a node's own term is its own statistics


def test_clipped_equals_mean_without_outliers_and_keeps_the_ess(network):
    model, stats, mixing = network
    clipped = neighbourhood_average(mixing, stats, rule="clipped")
    np.testing.assert_allclose(clipped, mixing @ stats, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(model.ess(clipped), model.ess(stats), rtol=1e-12)


@pytest.mark.parametrize("attack", PEER_ATTACKS)
def test_attacks_keep_the_ess_and_finite_values_and_change_the_statistics(network, attack):
    model, stats, _ = network
    poisoned = poison(model, stats, attack, np.random.default_rng(0))
    assert poisoned.shape == stats.shape and np.all(np.isfinite(poisoned))
    np.testing.assert_allclose(model.ess(poisoned), model.ess(stats), rtol=1e-12)
    assert np.all(np.abs(poisoned - stats).max(axis=1) > 1e-3 * np.abs(stats).max(axis=1))


def test_permute_rotates_classes_so_r_rotations_are_the_identity(mixed):
    schema, _, _ = mixed
    for kind in sorted(MODELS):
        model = make_model(kind, schema)
        s = np.random.default_rng(1).normal(size=model.size)
        for _ in range(schema.n_classes):
            s_next = poison(model, s, "permute", None)
            assert not np.allclose(s_next, s)
            s = s_next
        np.testing.assert_array_equal(s, np.random.default_rng(1).normal(size=model.size))


@pytest.mark.parametrize("attack", PEER_ATTACKS)
def test_clipping_bounds_a_poisoned_neighbours_pull_where_the_mean_follows_it(network, attack):
    model, stats, mixing = network
    dense = mixing.toarray()
    hub = int(np.argmax((dense > 0).sum(axis=1)))  # the node with most neighbours (at least 3 in this tree)
    bad = int(np.flatnonzero(dense[hub])[0] if np.flatnonzero(dense[hub])[0] != hub else np.flatnonzero(dense[hub])[1])
    sent = stats.copy()
    poisoned = poison(model, stats[bad], attack, np.random.default_rng(0))
    sent[bad] = poisoned + 1e6 * (poisoned - stats[bad])  # far beyond the honest spread; the ESS is kept
    clean = neighbourhood_average(mixing, stats, rule="clipped")[hub]
    clipped = neighbourhood_average(mixing, stats, sent, rule="clipped")[hub]
    mean = neighbourhood_average(mixing, stats, sent)[hub]
    honest = [np.linalg.norm(stats[j] - stats[hub]) for j in np.flatnonzero(dense[hub]) if j not in (hub, bad)]
    radius = CLIP_FACTOR * sorted(honest + [np.inf])[len(honest) // 2]  # the lower median of the hub's distances
    bound = dense[hub, bad] * (radius + np.linalg.norm(stats[bad] - stats[hub]))  # its clean pull and its clipped one
    assert np.linalg.norm(clipped - clean) <= bound * (1 + 1e-9) + 1e-9
    assert np.linalg.norm(mean - clean) > 100 * bound
    np.testing.assert_allclose(model.ess(clipped), model.ess(stats[hub]), rtol=1e-12)


def test_peer_average_is_the_network_rule_for_one_node(network):
    model, stats, mixing = network
    dense = mixing.toarray()
    hub = int(np.argmax((dense > 0).sum(axis=1)))
    neighbours = [j for j in np.flatnonzero(dense[hub]) if j != hub]
    received = [stats[j] * (1 + 50 * (j == neighbours[0])) for j in neighbours]
    sent = stats.copy()
    sent[neighbours[0]] = received[0]
    for rule in ("mean", "clipped"):
        np.testing.assert_allclose(peer_average(stats[hub], received, rule=rule),
                                   neighbourhood_average(mixing, stats, sent, rule=rule)[hub], rtol=1e-12)
    assert np.array_equal(peer_average(stats[hub], [], rule="clipped"), stats[hub])


def test_byzantine_sender_poisons_only_its_nodes():
    nodes = byzantine_nodes(10, 3, np.random.default_rng(4))
    assert len(set(nodes.tolist())) == 3 and np.array_equal(nodes, byzantine_nodes(10, 3, np.random.default_rng(4)))
    with pytest.raises(ValueError, match="at least one must be honest"):
        byzantine_nodes(3, 3, np.random.default_rng(0))


def test_byzantine_sender_rows(network):
    model, stats, _ = network
    nodes = np.array([1, 4])
    sent = byzantine_sender(model, nodes, "scale", np.random.default_rng(0))(stats)
    honest = np.setdiff1d(np.arange(len(stats)), nodes)
    assert np.array_equal(sent[honest], stats[honest]) and not np.allclose(sent[nodes], stats[nodes])


# ------------------------------------------------------------------------------------------- the robust rules


def closed_neighbourhood_votes(k: int, b: int, seed: int, size: int = 12, magnitude: float = 1e12):
    """A node (0) with k - 1 neighbours of which b are Byzantine (the last b): statistics whose first coordinate is
    the class count (the same for every honest peer, so the vote keeps it and no rescaling enters), and a complete
    graph's mixing."""
    rng = np.random.default_rng(seed)
    honest = rng.normal(size=(k - b, size))
    honest[:, 0] = 5.0
    bad = magnitude * rng.choice([-1.0, 1.0], size=(b, size)) * rng.random((b, size))
    bad[:, 0] = 5.0
    stats = np.vstack([honest, bad])
    mixing = np.full((k, k), 1.0 / k)
    return stats, mixing, honest


@pytest.mark.parametrize("rule", ["median", "trimmed", "robust"])
@pytest.mark.parametrize("k, b", [(3, 1), (4, 1), (5, 2), (6, 2), (7, 3), (2, 0)])
def test_a_vote_stays_within_the_honest_range_where_the_closed_neighbourhood_has_an_honest_majority(rule, k, b):
    if rule == "trimmed" and b > 1:
        b = 1  # the trimmed mean drops one value a side: it holds against one Byzantine neighbour
    for seed in range(5):
        stats, mixing, honest = closed_neighbourhood_votes(k, b, seed)
        got = neighbourhood_average(mixing, stats, rule=rule, counts=np.array([0]))[0]
        if rule == "robust":  # the geometric median: a norm bound whatever the attacker's magnitude
            spread = np.linalg.norm(honest - honest.mean(axis=0), axis=1).max()
            assert np.linalg.norm(got - honest.mean(axis=0)) <= 3 * spread + 1e-9
        else:
            assert np.all(got >= honest.min(axis=0) - 1e-12) and np.all(got <= honest.max(axis=0) + 1e-12)


def test_the_median_breaks_down_without_an_honest_majority():
    stats, mixing, honest = closed_neighbourhood_votes(4, 2, 0)
    got = neighbourhood_average(mixing, stats, rule="median", counts=np.array([0]))[0]
    assert np.abs(got).max() > 1e6 * np.abs(honest).max()


@pytest.mark.parametrize("rule", ["median", "trimmed", "geomedian", "screened"])
def test_votes_keep_the_ess_and_equal_the_peer_rule(network, rule):
    model, stats, mixing = network
    counts = count_index(model)
    got = neighbourhood_average(mixing, stats, rule=rule, counts=counts)
    np.testing.assert_allclose(model.ess(got), model.ess(stats), rtol=1e-10)
    dense = mixing.toarray()
    hub = int(np.argmax((dense > 0).sum(axis=1)))
    received = [stats[j] for j in np.flatnonzero(dense[hub]) if j != hub]
    np.testing.assert_allclose(peer_average(stats[hub], received, rule=rule, counts=counts), got[hub], rtol=1e-9)


@pytest.mark.parametrize("attack", ["extreme", "scale", "permute"])
def test_screening_leaves_out_a_far_neighbour_and_keeps_its_share_with_the_peers_own(network, attack):
    model, stats, mixing = network
    dense = mixing.toarray()
    hub = int(np.argmax((dense > 0).sum(axis=1)))
    neighbours = [j for j in np.flatnonzero(dense[hub]) if j != hub]
    bad = neighbours[0]
    received = [stats[j] for j in neighbours]
    received[0] = poison(model, stats[bad], attack, np.random.default_rng(0))
    received[0] = received[0] + 1e3 * (received[0] - stats[bad])  # far beyond the honest spread
    got = peer_average(stats[hub], received, rule="screened")
    np.testing.assert_allclose(got, (2 * stats[hub] + sum(received[1:])) / (1 + len(received)), rtol=1e-12)


def test_screening_is_the_mean_when_nothing_is_left_out_and_leaves_out_what_admit_refuses(network):
    model, stats, mixing = network
    mean = neighbourhood_average(mixing, stats)
    np.testing.assert_allclose(neighbourhood_average(mixing, stats, rule="screened", admit=lambda rows, sent: np.ones(len(rows), bool)),
                               mean, rtol=1e-12)
    dense = mixing.toarray()
    hub = int(np.argmax((dense > 0).sum(axis=1)))
    received = [stats[j] for j in np.flatnonzero(dense[hub]) if j != hub]
    refuse_first = lambda rows, sent: ~np.all(sent == received[0], axis=1)
    np.testing.assert_allclose(peer_average(stats[hub], received, rule="screened", admit=refuse_first),
                               (2 * stats[hub] + sum(received[1:])) / (1 + len(received)), rtol=1e-12)


def test_dissensus_reverses_the_honest_pull_under_the_mean():
    rng = np.random.default_rng(0)
    stats = rng.normal(size=(4, 6))
    mixing = np.full((4, 4), 0.25)
    matrix = sp.coo_array(mixing)
    off = matrix.row != matrix.col
    rows, cols, weights = matrix.row[off], matrix.col[off], matrix.data[off]
    messages = byzantine_messages(None, np.array([3]), "dissensus", rng)(stats, rows, cols, weights)
    got = neighbourhood_average(mixing, stats, edges=(rows, cols, weights, messages))
    pull = 0.25 * (stats[[1, 2]] - stats[0]).sum(axis=0)
    np.testing.assert_allclose(got[0], stats[0] + (1 - DISSENSUS_EPSILON) * pull, rtol=1e-12, atol=1e-12)


def test_the_engine_leaves_out_what_the_receivers_check_refuses(network):
    model, stats, mixing = network
    schema, x, y = prepared(mixed_columns())
    n = mixing.shape[0]
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), n)
    local = LocalData.from_parts(model.features(x), y, parts)
    ess = default_ess(len(y), n)
    bad = np.array([0])
    poisoned = CRCEngine(model, local, mixing, ess=ess, messages=byzantine_messages(model, bad, "scale", np.random.default_rng(0)),
                         accept=lambda m: np.zeros(len(m), dtype=bool))
    dense = mixing.toarray()
    dense[:, 0] = np.where(np.arange(n) == 0, dense[:, 0], 0.0)  # node 0's messages never arrive ...
    dense /= dense.sum(axis=1, keepdims=True)  # ... and its neighbours average what did, in equal shares
    clean = CRCEngine(model, local, dense, ess=ess)
    np.testing.assert_allclose(poisoned.aggregate(), clean.aggregate(), rtol=1e-12)
    assert poisoned.refused == int((mixing.toarray()[:, 0] > 0).sum() - 1)
    assert plausible(poison(model, stats[:2], "extreme", np.random.default_rng(0)), model, ess).all()
