"""Closed-neighbourhood averaging matrices of communication graphs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

from crc.topologies.errors import TopologyError


def closed_adjacency(graph: nx.Graph) -> sp.csr_array:
    """Sparse (n, n) adjacency plus identity: each node's closed neighbourhood. Nodes must be 0 .. n-1."""
    n = graph.number_of_nodes()
    if set(graph.nodes) != set(range(n)):
        raise TopologyError("graph nodes must be the integers 0 .. n-1")
    edges = np.array(list(graph.edges), dtype=np.int64).reshape(-1, 2)
    rows = np.concatenate([np.arange(n), edges[:, 0], edges[:, 1]])
    cols = np.concatenate([np.arange(n), edges[:, 1], edges[:, 0]])
    return sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n, n))


def averaging_matrix(graph: nx.Graph) -> sp.csr_array:
    """Row-stochastic (n, n) matrix averaging each node with its neighbours.

    Row ``v`` has ``1 / (deg(v) + 1)`` on ``v`` and on each neighbour: the
    aggregation of Algorithm 2 over the closed neighbourhood.
    """
    adjacency = closed_adjacency(graph)
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    return sp.csr_array(sp.diags_array(1.0 / degree) @ adjacency)
