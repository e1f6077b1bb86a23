"""The roster of a network sum: its file, checks, digest and spanning tree."""

import json

import networkx as nx
import pytest

from crc.core.errors import CRCError
from crc.nodes.keys import new_key_pair
from crc.nodes.roster import load_roster, roster_of, spanning_tree, tree_root, write_roster
from crc.topologies import random_tree_graph

KEYS = {f"tcp://127.0.0.1:{9000 + i}": new_key_pair().public for i in range(5)}
A, B, C, D, E = sorted(KEYS)


def test_the_tree_is_breadth_first_from_the_smallest_address_among_the_centres():
    edges = [(A, C), (C, D), (A, B), (B, E), (D, E)]  # a cycle: every peer is a centre
    assert spanning_tree(sorted(KEYS), edges) == {A: None, B: A, C: A, E: B, D: C}


def test_the_root_is_a_centre_so_the_tree_is_as_low_as_the_graph_allows():
    edges = [(A, B), (B, C), (C, D), (D, E)]
    assert tree_root(KEYS, edges) == C
    assert tree_root(KEYS, [(A, E), (B, E), (C, E), (D, E)]) == E  # a star, rooted at its hub
    graph = random_tree_graph(40, seed=3)
    names = [f"tcp://10.0.0.{v}:1" for v in graph]
    roster = roster_of({"peers": {names[v]: new_key_pair().public for v in graph},
                        "edges": [[names[a], names[b]] for a, b in graph.edges]})
    assert roster.position(names[0]).tree_height == nx.radius(graph) < nx.eccentricity(graph, v=min(graph, key=names.__getitem__))


def test_positions_of_a_chain():
    roster = roster_of({"peers": KEYS, "edges": [[A, B], [B, C], [C, D], [D, E]]})
    root, relay, leaf = roster.position(C), roster.position(B), roster.position(A)
    assert (root.parent, root.children, root.depth, root.height, root.tree_height) == (None, (B, D), 0, 2, 2)
    assert (relay.parent, relay.children, relay.depth, relay.height) == (C, (A,), 1, 1)
    assert (leaf.parent, leaf.children, leaf.depth, leaf.height) == (B, (), 2, 0)
    assert roster.neighbours(C) == {B, D}


def test_the_digest_ignores_order_and_tells_rosters_apart(tmp_path):
    write_roster(tmp_path / "a.json", KEYS, [(B, A), (C, B), (D, C), (E, D)])
    reordered = {"peers": dict(reversed(list(KEYS.items()))), "edges": [[E, D], [A, B], [C, D], [B, C]]}
    (tmp_path / "b.json").write_text(json.dumps(reordered))
    assert load_roster(tmp_path / "a.json").digest == load_roster(tmp_path / "b.json").digest
    other = dict(KEYS, **{E: new_key_pair().public})
    assert roster_of({"peers": other, "edges": reordered["edges"]}).digest != load_roster(tmp_path / "a.json").digest


@pytest.mark.parametrize("raw, message", [
    ({"peers": KEYS}, "a roster file is"),
    ({"peers": {A: KEYS[A]}, "edges": []}, "2 to 256"),
    ({"peers": dict(KEYS, **{A: "not a key"}), "edges": []}, "not a CURVE public key"),
    ({"peers": KEYS, "edges": [[A, "tcp://elsewhere:1"]]}, "not a pair of the roster's addresses"),
    ({"peers": KEYS, "edges": [[A, A]]}, "joins a peer to itself"),
    ({"peers": KEYS, "edges": [[A, B], [B, A]]}, "listed twice"),
    ({"peers": KEYS, "edges": [[A, B], [C, D], [D, E]]}, "not connected"),
])
def test_a_bad_roster_is_refused_with_the_file_named(tmp_path, raw, message):
    path = tmp_path / "roster.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(CRCError, match=message) as caught:
        load_roster(path)
    assert str(path) in str(caught.value)
