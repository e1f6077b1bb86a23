"""How well a communication graph mixes: density, diameter, spectral gap."""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from crc.topologies.mixing import closed_adjacency

DENSE_EIGEN_LIMIT = 2000


def density(graph: nx.Graph) -> float:
    """Edges as a fraction of the n(n-1)/2 possible."""
    n = graph.number_of_nodes()
    return graph.number_of_edges() / (n * (n - 1) / 2) if n > 1 else 0.0


def diameter(graph: nx.Graph) -> float:
    """Longest shortest path; infinity for a disconnected graph."""
    return float(nx.diameter(graph)) if nx.is_connected(graph) else float("inf")


def spectral_gap(graph: nx.Graph) -> float:
    """``1 - |lambda_2|`` of the closed-neighbourhood averaging matrix.

    The matrix ``D^-1 (A + I)`` is similar to the symmetric ``D^-1/2 (A + I) D^-1/2``,
    so its eigenvalues are real; the gap is 0 for a disconnected graph and
    larger for faster consensus.
    """
    n = graph.number_of_nodes()
    if n < 2:
        return 1.0
    closed = closed_adjacency(graph)
    scale = 1.0 / np.sqrt(np.asarray(closed.sum(axis=1)).ravel())
    symmetric = sp.diags_array(scale) @ closed @ sp.diags_array(scale)
    if n <= DENSE_EIGEN_LIMIT:
        moduli = np.sort(np.abs(np.linalg.eigvalsh(symmetric.toarray())))
    else:
        moduli = np.sort(np.abs(spla.eigsh(symmetric, k=3, which="LM", return_eigenvectors=False)))
    return float(1.0 - moduli[-2])


def describe(graph: nx.Graph) -> dict:
    """Nodes, edges, density, diameter and spectral gap of one graph."""
    return {"nodes": graph.number_of_nodes(), "edges": graph.number_of_edges(), "density": density(graph),
            "diameter": diameter(graph), "spectral_gap": spectral_gap(graph)}


def describe_schedule(schedule, rounds: int) -> dict:
    """Mean diagnostics over the distinct graphs a schedule uses in ``rounds`` rounds."""
    first_round = {}
    for t in range(1, rounds + 1):
        first_round.setdefault(schedule.epoch(t), t)
    rows = [describe(schedule.graph(t)) for t in first_round.values()]
    summary = {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
    summary["graphs"] = len(rows)
    return summary
