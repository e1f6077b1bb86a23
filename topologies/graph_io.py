"""Graphs to and from files, so that a deployment can use the simulated graph.

Two formats, chosen by the file name: ``.json`` holds
``{"nodes": n, "edges": [[u, v], ...]}``; anything else is an edge list, one
``u v`` pair a line, ``#`` comments, with an optional ``# nodes: n`` line
(otherwise n is the largest node + 1). Nodes are 0 .. n-1.
"""

from __future__ import annotations

import io
import json

import networkx as nx

from crc.core.files import parse_json, read_bytes
from crc.topologies.errors import TopologyError

MAX_GRAPH_FILE_BYTES = 64 * 2**20
MAX_GRAPH_NODES = 2**20
"""Most nodes a graph file may declare (``crc bench``'s scale run has 10,000 peers): one that declared 10^9 nodes
ran out of memory building them."""
MAX_GRAPH_EDGES = 2**20
"""Most edges a graph file may list (a complete graph of 1,448 peers; the same edge twice counts twice): refused while
the file is read, before the graph is built. A 60 MB file of one edge 15 million times took more than a minute and
3 GB of networkx's edges."""
MAX_SHOWN_DIGITS = 30
"""Digits of a node number written out in an error."""


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
        if len(edges) > MAX_GRAPH_EDGES:
            raise TopologyError(_too_many_edges(path))
    else:
        n, edges = None, []
        for number, line in enumerate(io.BytesIO(raw), 1):  # line by line: 15 million lines split at once took 1.3 GB
            try:
                body = line.decode("utf-8", errors="strict").strip()
            except UnicodeDecodeError:
                raise TopologyError(f"{path}: line {number}: not UTF-8 text") from None
            if body.startswith("# nodes:"):
                n = _integer(body[len("# nodes:"):].strip(), path, number)
            elif body and not body.startswith("#"):
                parts = body.split()
                if len(parts) != 2:
                    raise TopologyError(f"{path}: line {number} must be 'u v'")
                if len(edges) == MAX_GRAPH_EDGES:
                    raise TopologyError(_too_many_edges(path))
                edges.append([_integer(p, path, number) for p in parts])
        n = n if n is not None else 1 + max((max(e) for e in edges), default=-1)
    return _validated(n, edges, path)


def _too_many_edges(path) -> str:
    return f"{path}: more than {MAX_GRAPH_EDGES:,} edges (a graph file lists at most that many)"


def _integer(text: str, path, number: int) -> int:
    try:
        return int(text)
    except ValueError:
        shown = text if len(text) <= MAX_SHOWN_DIGITS else f"{text[:MAX_SHOWN_DIGITS]}..."
        raise TopologyError(f"{path}: line {number}: {shown!r} is not a node number") from None


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validated(n: int, edges: list, path) -> nx.Graph:
    if not 1 <= n <= MAX_GRAPH_NODES:
        shown = f"{n:,}" if n.bit_length() <= 100 else "more"
        raise TopologyError(f"{path}: a graph needs 1 to {MAX_GRAPH_NODES:,} nodes, this one has {shown}")
    for edge in edges:
        if not (isinstance(edge, list) and len(edge) == 2 and all(_is_integer(v) and 0 <= v < n for v in edge)):
            raise TopologyError(f"{path}: edge {str(edge)[:80]} is not a pair of nodes in 0 .. {n - 1}")
        if edge[0] == edge[1]:
            raise TopologyError(f"{path}: self-loop on node {edge[0]}")
    graph = nx.empty_graph(n)
    graph.add_edges_from(edges)
    return graph
