"""Graphs to and from files, so that a deployment can use the simulated graph.

Two formats, chosen by the file name: ``.json`` holds
``{"nodes": n, "edges": [[u, v], ...]}``; anything else is an edge list, one
``u v`` pair a line, ``#`` comments, with an optional ``# nodes: n`` line
(otherwise n is the largest node + 1). Nodes are 0 .. n-1.
"""

from __future__ import annotations

import json

import networkx as nx

from crc.core.files import parse_json, read_bytes
from crc.topologies.errors import TopologyError

MAX_GRAPH_FILE_BYTES = 64 * 2**20
MAX_GRAPH_NODES = 2**20
"""Most nodes a graph file may declare (``crc bench``'s scale run has 10,000 peers): one that declared 10^9 nodes
ran out of memory building them."""


def save_graph(graph: nx.Graph, path) -> None:
    n = graph.number_of_nodes()
    edges = sorted((min(u, v), max(u, v)) for u, v in graph.edges)
    with open(path, "w", encoding="utf-8") as fh:
        if str(path).endswith(".json"):
            json.dump({"nodes": n, "edges": [list(e) for e in edges]}, fh)
        else:
            fh.write(f"# nodes: {n}\n")
            fh.writelines(f"{u} {v}\n" for u, v in edges)


def load_graph(path) -> nx.Graph:
    """Read and validate a graph file; a TopologyError (a CRCError) naming the file and the problem otherwise."""
    raw = read_bytes(path, max_bytes=MAX_GRAPH_FILE_BYTES, what="graph file")
    if str(path).endswith(".json"):
        obj = parse_json(raw, source=path, what="graph file", max_depth=3)
        if not isinstance(obj, dict) or not _is_integer(obj.get("nodes")) or not isinstance(obj.get("edges"), list):
            raise TopologyError(f"{path}: expected an object with integer 'nodes' and list 'edges'")
        n, edges = obj["nodes"], obj["edges"]
    else:
        try:
            text = raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise TopologyError(f"{path}: not UTF-8 text") from None
        n, edges = None, []
        for number, line in enumerate(text.splitlines(), 1):
            body = line.strip()
            if body.startswith("# nodes:"):
                n = _integer(body[len("# nodes:"):].strip(), path, number)
            elif body and not body.startswith("#"):
                parts = body.split()
                if len(parts) != 2:
                    raise TopologyError(f"{path}: line {number} must be 'u v'")
                edges.append([_integer(p, path, number) for p in parts])
        n = n if n is not None else 1 + max((max(e) for e in edges), default=-1)
    return _validated(n, edges, path)


def _integer(text: str, path, number: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise TopologyError(f"{path}: line {number}: {text!r} is not a node number") from None


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validated(n: int, edges: list, path) -> nx.Graph:
    if not 1 <= n <= MAX_GRAPH_NODES:
        raise TopologyError(f"{path}: a graph needs 1 to {MAX_GRAPH_NODES:,} nodes, this one has {n:,}")
    graph = nx.empty_graph(n)
    for edge in edges:
        if not (isinstance(edge, list) and len(edge) == 2 and all(_is_integer(v) and 0 <= v < n for v in edge)):
            raise TopologyError(f"{path}: edge {edge!r} is not a pair of nodes in 0 .. {n - 1}")
        if edge[0] == edge[1]:
            raise TopologyError(f"{path}: self-loop on node {edge[0]}")
        graph.add_edge(*edge)
    return graph
