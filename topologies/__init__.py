"""Communication graphs for CRC and their averaging matrices."""

import numpy as np

from topologies.generators import chain_graph, complete_graph, random_tree_graph
from topologies.mixing import averaging_matrix

GENERATORS = {"tree": random_tree_graph, "chain": chain_graph, "complete": complete_graph}


def make_graph(kind: str, n: int, *, seed=None):
    """Build the graph named ``kind`` (``tree``, ``chain`` or ``complete``) on ``n`` nodes."""
    try:
        generator = GENERATORS[kind]
    except KeyError:
        raise ValueError(f"unknown topology {kind!r}; known: {', '.join(GENERATORS)}") from None
    return generator(n, seed=seed)


__all__ = ["GENERATORS", "averaging_matrix", "network_factory", "chain_graph", "complete_graph", "make_graph", "random_tree_graph"]


def network_factory(kind: str):
    """A function ``(n, seed) -> averaging matrix`` drawing a fresh ``kind`` graph per seed."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown topology {kind!r}; known: {', '.join(GENERATORS)}")

    def network(n: int, seed):
        return averaging_matrix(make_graph(kind, n, seed=np.random.default_rng(seed)))

    return network
