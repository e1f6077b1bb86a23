import networkx as nx
import numpy as np
import pytest

from crc.topologies import build, parse, tree_plus_graph

SPECS = ["tree", "chain", "star", "ring", "complete", "grid", "tree+10", "er", "er:0.2", "regular", "regular:4",
         "small-world", "small-world:6:0.3"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("n", [8, 50])
def test_every_kind_is_connected_on_nodes_0_to_n_minus_1(spec, n):
    graph = build(spec, n, seed=1)
    assert sorted(graph.nodes) == list(range(n))
    assert nx.is_connected(graph)


@pytest.mark.parametrize("spec", SPECS)
def test_every_kind_is_deterministic_for_a_seed(spec):
    assert sorted(build(spec, 20, seed=5).edges) == sorted(build(spec, 20, seed=5).edges)


@pytest.mark.parametrize(
    "spec, n, edges",
    [("tree", 50, 49), ("chain", 50, 49), ("star", 50, 49), ("ring", 50, 50), ("complete", 50, 1225),
     ("tree+10", 50, 59), ("tree+80", 50, 129), ("regular:4", 50, 100), ("small-world:4:0.1", 50, 100), ("grid", 9, 12)],
)
def test_edge_counts(spec, n, edges):
    assert build(spec, n, seed=0).number_of_edges() == edges


def test_tree_plus_k_adds_distinct_new_edges_over_a_spanning_tree():
    graph = tree_plus_graph(30, 25, seed=3)
    assert graph.number_of_edges() == 29 + 25 and nx.is_connected(graph)
    assert tree_plus_graph(5, 6, seed=0).number_of_edges() == 10  # every free edge: the complete graph


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: tree_plus_graph(5, 7), "leaves 6 possible extra edges; cannot add 7"),
        (lambda: tree_plus_graph(5, -1), "cannot add -1"),
        (lambda: tree_plus_graph(5, np.int64(7)), "cannot add 7$"),  # a plain number, not np.int64(7)
        (lambda: build("tree", np.int64(0)), "number of nodes must be an integer >= 1, got 0$"),
        (lambda: build("regular:3", 7), "n \\* degree even"),
        (lambda: build("regular:9", 7), "degree < n"),
        (lambda: build("er:0", 10), "edge probability must be in"),
        (lambda: build("small-world:1", 10), "2 <= k < n"),
        (lambda: build("tree", 0), "number of nodes"),
    ],
)
def test_impossible_inputs_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "spec, message",
    [("mesh", "unknown topology 'mesh'"), ("tree+x", "whole number"), ("er:a", "parameters must be float"),
     ("ring:3", "at most 0 parameter")],
)
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        parse(spec)
