"""Topology names as users write them: ``tree``, ``tree+20``, ``er:0.1``, ``small-world:4:0.2`` ...

A spec is a kind, optionally followed by ``:``-separated parameters; ``tree+K``
is a random tree with K extra random edges.
"""

from __future__ import annotations

import networkx as nx

from crc.topologies import generators as g

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
HELP = ("tree, tree+K (K extra random edges), chain, star, ring, complete, grid, "
        "er[:P] (connected Erdos-Renyi), regular[:D] (random D-regular), small-world[:K[:P]]")


def parse(spec: str) -> tuple[str, tuple]:
    """Split a spec into its kind and typed parameters; raises ValueError naming the problem."""
    spec = spec.strip()
    if spec.startswith("tree+"):
        extra = spec[len("tree+"):]
        if not extra.isdigit():
            raise ValueError(f"topology {spec!r}: the number of extra edges after 'tree+' must be a whole number")
        return "tree+", (int(extra),)
    kind, *raw = spec.split(":")
    if kind not in KINDS:
        raise ValueError(f"unknown topology {spec!r}; known: {HELP}")
    types = KINDS[kind][1]
    if len(raw) > len(types):
        raise ValueError(f"topology {kind!r} takes at most {len(types)} parameter(s), got {len(raw)}")
    try:
        return kind, tuple(convert(value) for convert, value in zip(types, raw))
    except ValueError:
        raise ValueError(f"topology {spec!r}: parameters must be {', '.join(t.__name__ for t in types)}") from None


def build(spec: str, n: int, *, seed=None) -> nx.Graph:
    """The graph of ``spec`` on ``n`` nodes."""
    kind, params = parse(spec)
    if kind == "tree+":
        return g.tree_plus_graph(n, *params, seed=seed)
    return KINDS[kind][0](n, *params, seed=seed)
