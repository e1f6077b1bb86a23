"""Topology names as users write them: ``tree``, ``tree+20``, ``er:0.1``, ``small-world:4:0.2``, ``file:g.json`` ...

A spec is a kind, optionally followed by ``:``-separated parameters; ``tree+K``
is a random tree with K extra random edges; ``file:PATH`` is a graph file
(see ``graph_io``), e.g. one written by ``crc graph --out``.
"""

from __future__ import annotations

import networkx as nx

from crc.topologies import generators as g
from crc.topologies.errors import TopologyError
from crc.topologies.graph_io import load_graph
from crc.topologies.syntax import FILE_PREFIX, HELP

KINDS = {
    "tree": (g.random_tree_graph, ()),
    "chain": (g.chain_graph, ()),
    "star": (g.star_graph, ()),
    "ring": (g.ring_graph, ()),
    "complete": (g.complete_graph, ()),
    "grid": (g.grid_graph, ()),
    "er": (g.erdos_renyi_graph, (float,)),
    "regular": (g.random_regular_graph, (int,)),
    "small-world": (g.small_world_graph, (int, float)),
}
PROBABILITY_CHECKS = {("er", 1): g.check_edge_probability, ("small-world", 2): g.check_rewiring_probability}
"""(kind, number of parameters given) -> the check of the last one, a probability."""


def parse(spec: str) -> tuple[str, tuple]:
    """Split a spec into its kind and typed parameters; raises ValueError naming the problem."""
    spec = spec.strip()
    if spec.startswith(FILE_PREFIX):
        if not spec[len(FILE_PREFIX):]:
            raise TopologyError(f"topology {spec!r}: give the graph file's path after 'file:'")
        return "file", (spec[len(FILE_PREFIX):],)
    if spec.startswith("tree+"):
        extra = spec[len("tree+"):]
        if not extra.isdigit():
            raise TopologyError(f"topology {spec!r}: the number of extra edges after 'tree+' must be a whole number")
        return "tree+", (int(extra),)
    kind, *raw = spec.split(":")
    if kind not in KINDS:
        raise TopologyError(f"unknown topology {spec!r}; known: {HELP}")
    types = KINDS[kind][1]
    if len(raw) > len(types):
        raise TopologyError(f"topology {kind!r} takes at most {len(types)} parameter(s), got {len(raw)}")
    try:
        params = tuple(convert(value) for convert, value in zip(types, raw))
    except ValueError:
        raise TopologyError(f"topology {spec!r}: parameters must be {', '.join(t.__name__ for t in types)}") from None
    probability = PROBABILITY_CHECKS.get((kind, len(params)))
    if probability is not None:  # a range that does not depend on the number of nodes: checked with the spec
        try:
            probability(params[-1])
        except TopologyError as exc:
            raise TopologyError(f"topology {spec!r}: {exc}") from None
    return kind, params


def build(spec: str, n: int, *, seed=None) -> nx.Graph:
    """The graph of ``spec`` on ``n`` nodes."""
    kind, params = parse(spec)
    if kind == "file":
        graph = load_graph(params[0])
        if graph.number_of_nodes() != n:
            raise TopologyError(f"{params[0]}: the graph has {graph.number_of_nodes()} nodes, the run has {n} "
                                "(--nodes; a hybrid partition: its groups)")
        return graph
    if kind == "tree+":
        return g.tree_plus_graph(n, *params, seed=seed)
    return KINDS[kind][0](n, *params, seed=seed)
