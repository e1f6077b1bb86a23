"""The roster of a network sum (``--sum-over network``): every peer of the run with its public key, the edges of
the communication graph, and the spanning tree along which one secure sum of all peers is relayed each round
(``crc.nodes.network_sum``).

Every peer reads the same roster file (``crc launch`` and ``crc split --keys-for ... --sum-over network`` write it);
its ``digest`` goes into every pairwise mask and every frame of the sum, so peers given different rosters never
unmask each other's words, and a frame of another roster is rejected. Keys come from the file but are checked
against the peer's known-peers file (keys known out of band, ``crc.nodes.node``).
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from crc.core.errors import CRCError
from crc.core.files import atomic_write_json, read_json
from crc.nodes.keys import is_key, write_peer_keys
from crc.nodes.wire import ADDRESS_BYTES

MAX_NETWORK_PEERS = 256
"""Most peers a network sum takes: each term is below 2^34 in statistics units, 2^54 in fixed point
(``crc.nodes.secure_aggregation``), so the sum of 256 stays inside the signed 64-bit range."""
MAX_ROSTER_BYTES = 2**20
ROSTER_FILE = "roster.json"
"""The roster's name in a deployment directory (``write_network_keys``)."""


@dataclass(frozen=True)
class TreePosition:
    """A peer's place in the roster's spanning tree: its ``parent`` (None at the root), its ``children`` (sorted),
    its ``depth`` (0 at the root), the ``height`` of its subtree (0 at a leaf) and the tree's height."""

    parent: str | None
    children: tuple[str, ...]
    depth: int
    height: int
    tree_height: int


@dataclass(frozen=True)
class Roster:
    """Every peer of a network sum: ``keys`` (address -> z85 CURVE public key) and the graph's ``edges`` (pairs of
    addresses, each sorted, the list sorted)."""

    keys: Mapping[str, str]
    edges: tuple[tuple[str, str], ...]

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(sorted(self.keys))

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the canonical roster: the same on every peer given the same roster."""
        canonical = json.dumps({"peers": dict(sorted(self.keys.items())), "edges": [list(e) for e in self.edges]},
                               separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @cached_property
    def tree(self) -> dict[str, str | None]:
        """Each member's parent in the spanning tree (``spanning_tree``), found once."""
        return spanning_tree(self.members, self.edges)

    @cached_property
    def children(self) -> dict[str, list[str]]:
        """Each member's children in the spanning tree (``tree``)."""
        children: dict[str, list[str]] = {peer: [] for peer in self.tree}
        for peer, parent in self.tree.items():
            if parent is not None:
                children[parent].append(peer)
        return children

    def neighbours(self, address: str) -> frozenset[str]:
        return frozenset(b if a == address else a for a, b in self.edges if address in (a, b))

    def position(self, address: str) -> TreePosition:
        """``address``'s place in the spanning tree (``spanning_tree``)."""
        parents, children = self.tree, self.children
        depth = {}
        for peer in _breadth_first(parents, children):
            depth[peer] = 0 if parents[peer] is None else depth[parents[peer]] + 1
        height = dict.fromkeys(parents, 0)
        for peer in sorted(parents, key=depth.get, reverse=True):
            if parents[peer] is not None:
                height[parents[peer]] = max(height[parents[peer]], height[peer] + 1)
        root = next(peer for peer, parent in parents.items() if parent is None)
        return TreePosition(parents[address], tuple(sorted(children[address])), depth[address], height[address],
                            height[root])


def _breadth_first(parents: Mapping[str, str | None], children: Mapping[str, list[str]]) -> list[str]:
    order = [peer for peer, parent in parents.items() if parent is None]
    for peer in order:
        order.extend(children[peer])
    return order


def spanning_tree(members, edges) -> dict[str, str | None]:
    """Each member's parent in the breadth-first spanning tree of the graph (``edges``) from its centre
    (``tree_root``), neighbours taken in sorted order (None for the root): the same tree on every peer. A CRCError if
    the graph is not connected."""
    adjacent: dict[str, list[str]] = {peer: [] for peer in members}
    for a, b in edges:
        adjacent[a].append(b)
        adjacent[b].append(a)
    root = tree_root(members, edges)
    parents: dict[str, str | None] = {root: None}
    queue = deque([root])
    while queue:
        peer = queue.popleft()
        for other in sorted(adjacent[peer]):
            if other not in parents:
                parents[other] = peer
                queue.append(other)
    if len(parents) != len(adjacent):
        unreached = sorted(set(adjacent) - set(parents))
        raise CRCError(f"the roster's graph is not connected: {unreached[0]} cannot be reached from {root} (a network "
                       "sum needs every peer reachable)")
    return parents


def tree_root(members, edges) -> str:
    """The spanning tree's root: a centre of the graph (a member whose farthest member is the fewest hops away), the
    smallest address among several; the smallest address of a graph that is not connected. From a centre the tree's
    height is the graph's radius, the fewest hops a round's sum can take up and down (on the paper's random tree of
    50 peers about half the height from an arbitrary peer)."""
    members = sorted(members)
    eccentricities = _eccentricities(members, edges)
    if eccentricities is None:
        return members[0]
    return members[eccentricities.index(min(eccentricities))]


def _eccentricities(members: list[str], edges) -> list[int] | None:
    """Each member's largest distance in hops to another (None if some cannot be reached): a breadth-first search
    from every member over bitmasks of the members, n^2 steps for n members."""
    index = {peer: i for i, peer in enumerate(members)}
    neighbours = [0] * len(members)
    for a, b in edges:
        neighbours[index[a]] |= 1 << index[b]
        neighbours[index[b]] |= 1 << index[a]
    everyone = (1 << len(members)) - 1
    eccentricities = []
    for source in range(len(members)):
        reached = frontier = 1 << source
        hops = 0
        while reached != everyone:
            step = 0
            while frontier:
                lowest = frontier & -frontier
                step |= neighbours[lowest.bit_length() - 1]
                frontier ^= lowest
            frontier = step & ~reached
            if not frontier:
                return None
            reached |= frontier
            hops += 1
        eccentricities.append(hops)
    return eccentricities


def load_roster(path) -> Roster:
    """A roster file: ``{"peers": {address: public key}, "edges": [[address, address], ...]}``. One line naming the file
    for anything else: not that shape, a key that is not a CURVE public key, an edge to a stranger or to itself, an
    edge twice, more than ``MAX_NETWORK_PEERS`` peers, a graph that is not connected."""
    path = Path(path)
    raw = read_json(path, max_bytes=MAX_ROSTER_BYTES, what="roster file", max_depth=3)
    try:
        return roster_of(raw)
    except CRCError as exc:
        raise CRCError(f"{path}: {exc}") from None


def roster_of(raw) -> Roster:
    """``load_roster``'s checks on a parsed roster."""
    if not isinstance(raw, dict) or set(raw) != {"peers", "edges"}:
        raise CRCError('a roster file is {"peers": {address: public key}, "edges": [[address, address], ...]}')
    peers, edges = raw["peers"], raw["edges"]
    if not isinstance(peers, dict) or not 2 <= len(peers) <= MAX_NETWORK_PEERS:
        raise CRCError(f'"peers" must map 2 to {MAX_NETWORK_PEERS} addresses to their public keys')
    for address, key in peers.items():
        if len(address) > ADDRESS_BYTES:
            raise CRCError(f"an address longer than {ADDRESS_BYTES} characters")
        if not is_key(key):
            raise CRCError(f"the key of {address!r} is not a CURVE public key")
    if not isinstance(edges, list):
        raise CRCError('"edges" must be a list of [address, address] pairs')
    pairs = set()
    for edge in edges:
        if not (isinstance(edge, list) and len(edge) == 2 and all(isinstance(end, str) and end in peers for end in edge)):
            raise CRCError(f"the edge {str(edge)[:120]} is not a pair of the roster's addresses")
        if edge[0] == edge[1]:
            raise CRCError(f"the edge {edge} joins a peer to itself")
        pair = tuple(sorted(edge))
        if pair in pairs:
            raise CRCError(f"the edge {edge} is listed twice")
        pairs.add(pair)
    roster = Roster(dict(peers), tuple(sorted(pairs)))
    _ = roster.tree  # found now, once: a graph that is not connected is refused here
    return roster


def write_roster(path, keys: Mapping[str, str], edges) -> None:
    """The roster file of ``keys`` (address -> public key) and ``edges`` (address pairs)."""
    atomic_write_json(path, {"peers": dict(keys), "edges": sorted([sorted(edge) for edge in edges])})


def write_network_keys(directory, addresses: list[str], edges, *, force: bool = False) -> Path:
    """Keys of a network sum's deployment of ``len(addresses)`` peers whose graph has ``edges`` (pairs of indices):
    ``write_peer_keys`` with every peer's known-peers file holding every other peer's key (the masks are agreed with
    every member, keys known out of band; the transport still admits only neighbours), no neighbourhoods files, and
    ``directory/roster.json`` (``ROSTER_FILE``), which it returns. A CRCError, before any file is written, for more
    than ``MAX_NETWORK_PEERS`` peers or a graph that is not connected."""
    if len(addresses) > MAX_NETWORK_PEERS:
        raise CRCError(f"a network sum takes at most {MAX_NETWORK_PEERS} peers, not {len(addresses)}")
    named = [(addresses[a], addresses[b]) for a, b in edges]
    spanning_tree(addresses, named)
    public = write_peer_keys(directory, addresses, force=force)
    path = Path(directory) / ROSTER_FILE
    write_roster(path, dict(zip(addresses, public, strict=True)), named)
    return path
