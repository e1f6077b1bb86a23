"""Peers of a network sum (``--sum-over network``) in-process: threads, frames through an in-memory hub, no sockets."""

from __future__ import annotations

import queue
import threading
import time

import msgpack
import networkx as nx
import numpy as np

from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.models import make_model
from crc.nodes.keys import new_key_pair
from crc.nodes.peer import Peer
from crc.nodes.roster import roster_of
from crc.nodes.settings import PeerSettings, SecureAggregationKeys
from crc.topologies import averaging_matrix
from support.tables import mixed_columns, prepared

CHAIN = nx.path_graph(5)
CHAIN_ROOT, RELAY = 2, 1
"""The chain's tree is rooted at its centre (``crc.nodes.roster.tree_root``); ``RELAY`` has the root as parent and peer 0 as
child."""
STAR = nx.star_graph(4)
ADDRESS = [f"tcp://127.0.0.1:{7100 + v}" for v in range(5)]
ROUNDS = 6
TIMEOUT_S = 0.5
RUN = "network-test"


class Hub:
    """Frames between in-process peers: each address has a queue; ``drop(sender, receiver, frame)`` loses a frame."""

    def __init__(self, keys: dict[str, str], drop=lambda sender, receiver, frame: False):
        self.keys, self.drop = keys, drop
        self.queues = {address: queue.Queue() for address in keys}

    def transport(self, address: str, neighbours) -> HubTransport:
        return HubTransport(self, address, tuple(neighbours))


class HubTransport:
    def __init__(self, hub: Hub, address: str, neighbours: tuple[str, ...]):
        self.hub, self.address, self.neighbours = hub, address, neighbours

    def send(self, frame: bytes) -> list[str]:
        for neighbour in self.neighbours:
            self.send_to(neighbour, frame)
        return []

    def send_to(self, address: str, frame: bytes) -> bool:
        if not self.hub.drop(self.address, address, frame):
            self.hub.queues[address].put((frame, self.hub.keys[self.address]))
        return True

    def receive(self, deadline: float) -> list[tuple[bytes, str | None]]:
        try:
            first = self.hub.queues[self.address].get(timeout=max(0.0, min(deadline - time.monotonic(), 0.05)))
        except queue.Empty:
            return []
        frames = [first]
        while True:
            try:
                frames.append(self.hub.queues[self.address].get_nowait())
            except queue.Empty:
                return frames

    def refused(self) -> dict[str, int]:
        return {}

    def close(self, linger_ms: int) -> None:
        pass


def network_data():
    """(model, phi, y, the five peers' rows, ess) of a small mixed table under naive Bayes."""
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    phi = model.features(x)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), len(ADDRESS))
    return model, phi, y, parts, default_ess(len(y), len(parts))


def roster_for(graph: nx.Graph, pairs):
    return roster_of({"peers": {ADDRESS[v]: pairs[v].public for v in graph},
                      "edges": [[ADDRESS[a], ADDRESS[b]] for a, b in graph.edges]})


def run_peers(data, graph, *, rounds=ROUNDS, absent=(), drop=lambda s, r, f: False, rosters=None, kinds=None,
              timeout_s=TIMEOUT_S, first_round_timeout_s=None, late=None, **settings):
    """Run the peers of ``graph`` (but ``absent``) to the end in threads, each of ``kinds.get(v, Peer)``, those in
    ``late`` started that many seconds after the others; the peers by node."""
    model, phi, y, parts, ess = data
    pairs = [new_key_pair() for _ in graph]
    roster = roster_for(graph, pairs)
    hub = Hub({ADDRESS[v]: pairs[v].public for v in graph}, drop)
    peers = {}
    for v in graph:
        if v in absent:
            continue
        own = roster if rosters is None else rosters(v, roster, pairs)
        neighbours = tuple(ADDRESS[u] for u in sorted(graph.neighbors(v)))
        peers[v] = (kinds or {}).get(v, Peer)(model, phi[parts[v]], y[parts[v]], ess=ess, settings=PeerSettings(
            bind=ADDRESS[v], peers=neighbours, rounds=rounds, timeout_s=timeout_s,
            first_round_timeout_s=first_round_timeout_s or timeout_s,
            run=RUN, network=own, secure_aggregation=SecureAggregationKeys(pairs[v].secret, {}),
            final_linger_ms=0, **settings))
    threads = {v: threading.Thread(target=peer.run, args=(hub.transport(ADDRESS[v], peer.settings.peers),))
               for v, peer in peers.items()}
    started = time.monotonic()
    for v, thread in sorted(threads.items(), key=lambda item: (late or {}).get(item[0], 0.0)):
        time.sleep(max(0.0, started + (late or {}).get(v, 0.0) - time.monotonic()))
        thread.start()
    for thread in threads.values():
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads.values()), "a peer did not finish"
    return peers


def complete_graph_run(data, rounds=ROUNDS) -> np.ndarray:
    """The simulator's statistics (n, size) after ``rounds`` rounds on the complete graph."""
    model, phi, y, parts, ess = data
    engine = CRCEngine(model, LocalData.from_parts(phi, y, parts), averaging_matrix(nx.complete_graph(len(parts))), ess=ess)
    engine.run(rounds)
    return engine.stats


def run_with_a_restart(data, tmp_path, *, when: str, at_round: int, graph=CHAIN, victim: int = RELAY, rounds: int = ROUNDS,
                       timeout_s: float = 5.0, dead_s: float = 0.3, **settings):
    """Run the peers of ``graph`` (the chain) with checkpoints in ``tmp_path``; the ``victim`` (a relay) stops in
    round ``at_round`` (``when``: "at-round-start", before its words go up, or "after-its-partial"), writing nothing more
    (as a killed process), and is started again from its checkpoint ``dead_s`` later, what its last process had received
    lost with it. (the peers by node, the partial frames the victim sent by round)."""
    model, phi, y, parts, ess = data
    stopped = threading.Event()
    peers, partials = {}, {}

    class Stopping(Peer):
        def step(self, transport):
            if when == "at-round-start" and self.round == at_round and not stopped.is_set():
                stopped.set()
                self.checkpoints.directory = None
                self.stop.set()
                return False
            return super().step(transport)

    def stop_after_partial(sender, receiver, frame):
        body = msgpack.unpackb(frame)
        if sender == ADDRESS[victim] and body["type"] == "partial":
            round_ = body["round"]
            partials.setdefault(round_, []).append(frame)
            if when == "after-its-partial" and round_ == at_round and not stopped.is_set():
                stopped.set()
                peers[victim].checkpoints.directory = None
                peers[victim].stop.set()
        return False

    pairs = [new_key_pair() for _ in graph]
    roster = roster_for(graph, pairs)
    hub = Hub({ADDRESS[v]: pairs[v].public for v in graph}, stop_after_partial)

    def make(v, kind=Peer):
        return kind(model, phi[parts[v]], y[parts[v]], ess=ess, settings=PeerSettings(
            bind=ADDRESS[v], peers=tuple(ADDRESS[u] for u in sorted(graph.neighbors(v))), rounds=rounds,
            timeout_s=timeout_s, first_round_timeout_s=timeout_s, run=RUN, network=roster,
            secure_aggregation=SecureAggregationKeys(pairs[v].secret, {}), final_linger_ms=0,
            checkpoint_dir=str(tmp_path / f"peer-{v}"), **settings))

    peers.update({v: make(v, Stopping if v == victim else Peer) for v in graph})
    threads = {v: threading.Thread(target=peer.run, args=(hub.transport(ADDRESS[v], peer.settings.peers),))
               for v, peer in peers.items()}
    for thread in threads.values():
        thread.start()
    threads[victim].join(timeout=60)
    assert stopped.is_set() and peers[victim].round == at_round
    time.sleep(dead_s)  # what reaches the dead process meanwhile is lost with it
    while not hub.queues[ADDRESS[victim]].empty():
        hub.queues[ADDRESS[victim]].get_nowait()
    peers[victim] = make(victim)
    threads[victim] = threading.Thread(target=peers[victim].run,
                                       args=(hub.transport(ADDRESS[victim], peers[victim].settings.peers),))
    threads[victim].start()
    for thread in threads.values():
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads.values()), "a peer did not finish"
    return peers, partials
