"""Seeded communication graphs on nodes 0 .. n-1.

Every generator is ``<kind>_graph(n, ..., *, seed=None) -> nx.Graph``; the seed
(None, an int or a numpy Generator) is normalised once on entry and no global
random state is touched.
"""

from __future__ import annotations

import heapq

import networkx as nx
import numpy as np


def _check_nodes(n: int, minimum: int = 1) -> None:
    if not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"number of nodes must be an integer >= {minimum}, got {n!r}")


def _prufer_edges(sequence: np.ndarray, n: int) -> list[tuple[int, int]]:
    """Decode a Prüfer sequence of length n-2 into the n-1 edges of a labelled tree."""
    degree = np.ones(n, dtype=np.int64)
    np.add.at(degree, sequence, 1)
    leaves = [v for v in range(n) if degree[v] == 1]
    heapq.heapify(leaves)
    edges = []
    for v in sequence:
        leaf = heapq.heappop(leaves)
        edges.append((leaf, int(v)))
        degree[v] -= 1
        if degree[v] == 1:
            heapq.heappush(leaves, int(v))
    edges.append((heapq.heappop(leaves), heapq.heappop(leaves)))
    return edges


def random_tree_graph(n: int, *, seed=None) -> nx.Graph:
    """A tree drawn uniformly from the n^(n-2) labelled trees (via a random Prüfer sequence).

    Raises
    ------
    ValueError
        If ``n < 1``.
    """
    _check_nodes(n)
    graph = nx.empty_graph(n)
    if n == 2:
        graph.add_edge(0, 1)
    elif n > 2:
        sequence = np.random.default_rng(seed).integers(n, size=n - 2)
        graph.add_edges_from(_prufer_edges(sequence, n))
    return graph


def chain_graph(n: int, *, seed=None) -> nx.Graph:
    """The path 0 - 1 - ... - n-1 (``seed`` is accepted for a uniform signature)."""
    _check_nodes(n)
    return nx.path_graph(n)


def complete_graph(n: int, *, seed=None) -> nx.Graph:
    """Every pair of nodes connected."""
    _check_nodes(n)
    return nx.complete_graph(n)
