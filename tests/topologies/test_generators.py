import networkx as nx
import numpy as np
import pytest

from crc.topologies import averaging_matrix, build, chain_graph, complete_graph, network_factory, random_tree_graph


@pytest.mark.parametrize("n", [1, 2, 3, 10, 50])
def test_random_tree_is_a_spanning_tree(n):
    graph = random_tree_graph(n, seed=7)
    assert graph.number_of_nodes() == n and graph.number_of_edges() == max(n - 1, 0)
    assert nx.is_tree(graph)


def test_random_tree_is_deterministic_for_a_seed_and_varies_across_seeds():
    a = sorted(random_tree_graph(30, seed=3).edges)
    assert a == sorted(random_tree_graph(30, seed=3).edges)
    assert a != sorted(random_tree_graph(30, seed=4).edges)
    assert sorted(map(tuple, map(sorted, random_tree_graph(5, seed=0).edges))) == sorted(
        map(tuple, map(sorted, random_tree_graph(5, seed=np.random.default_rng(0)).edges)))


def test_random_tree_is_uniform_over_labelled_trees():
    # Cayley: 4^2 = 16 labelled trees on 4 nodes, each with probability 1/16.
    rng = np.random.default_rng(0)
    counts = {}
    for _ in range(8000):
        key = frozenset(frozenset(e) for e in random_tree_graph(4, seed=rng).edges)
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 16
    frequencies = np.array(list(counts.values())) / 8000
    assert np.all(np.abs(frequencies - 1 / 16) < 0.02)


def test_chain_and_complete():
    assert sorted(chain_graph(4).edges) == [(0, 1), (1, 2), (2, 3)]
    assert complete_graph(6).number_of_edges() == 15


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_impossible_sizes_rejected(bad):
    with pytest.raises(ValueError, match="number of nodes"):
        random_tree_graph(bad)


def test_unknown_topology():
    with pytest.raises(ValueError, match="unknown topology 'mesh'"):
        build("mesh", 5)


def test_averaging_matrix_is_closed_neighbourhood_mean():
    a = averaging_matrix(chain_graph(3)).toarray()
    np.testing.assert_allclose(a, [[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])
    np.testing.assert_allclose(averaging_matrix(random_tree_graph(40, seed=1)).sum(axis=1), 1.0)


def test_network_factory_draws_per_seed():
    network = network_factory("tree")
    a, b = network(20, 1)(1), network(20, 2)(1)
    assert (a != b).nnz > 0 and (a != network(20, 1)(1)).nnz == 0
