"""Seeded communication graphs on nodes 0 .. n-1.

Every generator is ``<kind>_graph(n, ..., *, seed=None) -> nx.Graph``; the seed
(None, an int or a numpy Generator) is normalised once on entry and no global
random state is touched.
"""

from __future__ import annotations

import heapq

import networkx as nx
import numpy as np

from crc.core.errors import plain
from crc.topologies.errors import TopologyError


def _check_nodes(n: int, minimum: int = 1, kind: str = "") -> None:
    """Raise a TopologyError unless ``n`` is a whole number of nodes, at least ``minimum`` (for a graph ``kind``)."""
    if not isinstance(n, (int, np.integer)) or n < minimum:
        raise TopologyError(f"number of nodes must be an integer >= {minimum}{f' for {kind}' if kind else ''}, "
                            f"got {plain(n)}")


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


def star_graph(n: int, *, seed=None) -> nx.Graph:
    """Node 0 connected to every other node."""
    _check_nodes(n)
    return nx.star_graph(n - 1) if n > 1 else nx.empty_graph(1)


def ring_graph(n: int, *, seed=None) -> nx.Graph:
    """The cycle 0 - 1 - ... - n-1 - 0 (a path for n < 3)."""
    _check_nodes(n)
    return nx.cycle_graph(n) if n >= 3 else nx.path_graph(n)


def tree_plus_graph(n: int, extra: int, *, seed=None) -> nx.Graph:
    """A uniform random tree plus ``extra`` distinct random edges (the paper's "+10 ... +80").

    Raises
    ------
    ValueError
        If ``extra`` is negative or exceeds the n(n-1)/2 - (n-1) edges a tree leaves free.
    """
    _check_nodes(n)
    free = n * (n - 1) // 2 - (n - 1)
    if not isinstance(extra, (int, np.integer)) or extra < 0 or extra > free:
        edges = "edge" if free == 1 else "edges"
        raise TopologyError(f"a tree on {n} nodes leaves {free} possible extra {edges}; cannot add {plain(extra)}")
    rng = np.random.default_rng(seed)
    graph = random_tree_graph(n, seed=rng)
    target = graph.number_of_edges() + extra
    while graph.number_of_edges() < target:  # rejection sampling of uniform free pairs
        for a, b in rng.integers(n, size=(2 * (target - graph.number_of_edges()) + 8, 2)).tolist():
            if a != b and not graph.has_edge(a, b):
                graph.add_edge(a, b)
                if graph.number_of_edges() == target:
                    break
    return graph


MAX_CONNECT_ATTEMPTS = 1000


def _first_connected(draw, seed, what: str) -> nx.Graph:
    """The first connected graph of up to MAX_CONNECT_ATTEMPTS seeded ``draw(int_seed)`` calls."""
    rng = np.random.default_rng(seed)
    for _ in range(MAX_CONNECT_ATTEMPTS):
        graph = draw(int(rng.integers(2**63)))
        if nx.is_connected(graph):
            return graph
    raise TopologyError(f"no connected {what} in {MAX_CONNECT_ATTEMPTS} draws")


def check_edge_probability(p: float) -> None:
    """Raise a TopologyError unless ``p`` is an Erdos-Renyi edge probability, in (0, 1]."""
    if not 0 < p <= 1:
        raise TopologyError(f"edge probability must be in (0, 1], got {p}")


def check_rewiring_probability(p: float) -> None:
    """Raise a TopologyError unless ``p`` is a small world's rewiring probability, in [0, 1]."""
    if not 0 <= p <= 1:
        raise TopologyError(f"small world needs 2 <= k < n and 0 <= p <= 1, got p={p}")


def erdos_renyi_graph(n: int, p: float | None = None, *, seed=None) -> nx.Graph:
    """A connected G(n, p) graph: draws until connected.

    ``p`` defaults to ``2 ln(n) / n`` (well above the connectivity threshold).

    Raises
    ------
    ValueError
        If ``p`` is outside (0, 1] or no connected draw occurs in 1,000 attempts.
    """
    _check_nodes(n)
    p = min(1.0, 2 * np.log(max(n, 2)) / n) if p is None else p
    check_edge_probability(p)
    return _first_connected(lambda s: nx.gnp_random_graph(n, p, seed=s), seed, f"G({n}, {p}) graph (raise p)")


def random_regular_graph(n: int, degree: int = 3, *, seed=None) -> nx.Graph:
    """A connected random ``degree``-regular graph.

    Raises
    ------
    ValueError
        If ``n * degree`` is odd, ``degree >= n``, ``degree < 2`` (never connected
        for n > 2), or no connected draw occurs in 1,000 attempts.
    """
    _check_nodes(n, minimum=3, kind="a random regular graph")
    if not 2 <= degree < n or (n * degree) % 2:
        raise TopologyError(f"no connected {degree}-regular graph on {n} nodes (need 2 <= degree < n and n * degree even)")
    return _first_connected(lambda s: nx.random_regular_graph(degree, n, seed=s), seed, f"{degree}-regular graph on {n} nodes")


def small_world_graph(n: int, k: int = 4, p: float = 0.1, *, seed=None) -> nx.Graph:
    """A connected Watts-Strogatz graph: ring lattice of ``k`` nearest neighbours, rewired with probability ``p``.

    Raises
    ------
    ValueError
        If ``k`` is not in [2, n) or ``p`` is not in [0, 1].
    """
    _check_nodes(n, minimum=3, kind="a small world")
    check_rewiring_probability(p)
    if not 2 <= k < n:
        raise TopologyError(f"small world needs 2 <= k < n and 0 <= p <= 1, got k={k}")
    rng = np.random.default_rng(seed)
    return nx.connected_watts_strogatz_graph(n, k, p, tries=MAX_CONNECT_ATTEMPTS, seed=int(rng.integers(2**63)))


def grid_graph(n: int, *, seed=None) -> nx.Graph:
    """A 2-D grid of ``ceil(sqrt(n))`` columns filled row by row with n nodes (connected)."""
    _check_nodes(n)
    columns = int(np.ceil(np.sqrt(n)))
    graph = nx.empty_graph(n)
    for v in range(n):
        if (v + 1) % columns and v + 1 < n:
            graph.add_edge(v, v + 1)
        if v + columns < n:
            graph.add_edge(v, v + columns)
    return graph
