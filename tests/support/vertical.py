"""A vertical group for the tests: the simulator's reference run, and the group's peers on its split, in-process.

``Reference`` is what the simulator computes for ``--partition vertical:K`` (its internals: prepare_repeat,
make_engine, BestIterate): the group's statistics after every round and the best iterate. ``Bus`` runs a group's
peers in one thread on a fake clock: frames are delivered in the order they were sent; with none in flight the clock
jumps to the earliest deadline. No sockets, no sleeping.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field

import numpy as np

from crc.core.errors import CRCError
from crc.nodes.group_member import GroupMember
from crc.nodes.keys import new_key_pair
from crc.nodes.label_holder import LabelHolder
from crc.nodes.score_masks import ScoreMasks
from crc.nodes.settings import PeerSettings
from crc.nodes.vertical_peer import BlockData, VerticalPeer
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import ess_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.protocol.vertical import BestIterate, resolve_partition
from crc.tables.datasets import load_dataset
from crc.topologies import Schedule, network_factory

MAX_EVENTS = 1_000_000


@dataclass
class Reference:
    """The simulator's vertical run: ``history`` (rounds + 1, size) the group's statistics after each round (0: the
    start), ``best`` (size,) the best iterate, and what built them."""

    config: SimulationConfig
    rep: object
    history: np.ndarray
    best: np.ndarray
    ess: float

    @property
    def model(self):
        return self.rep.split.model

    @property
    def groups(self) -> int:
        return len(self.rep.split.parts)

    def block_data(self, block: int, *, group: int = 0, seed: int = 0, drop=()) -> BlockData:
        """Block ``block``'s rows of group ``group``'s training instances, in an order of their own (seeded), without
        the training positions in ``drop``; the labels for block 0. Ids are ``i`` and the training position,
        zero-padded."""
        split, model = self.rep.split, self.model
        positions = np.asarray(split.parts[group])
        order = positions[np.random.default_rng([seed, group, block]).permutation(len(positions))]
        order = order[~np.isin(order, list(drop))]
        phi = split.phi_train[:, model.block_columns(block)]
        return BlockData(ids=[f"i{pos:05d}" for pos in order], phi=phi[order],
                         y=split.y_train[order] if block == 0 else None, source=f"node-{block}.csv")


def reference(data: str = "wdbc", model: str = "nb", blocks: int = 3, rounds: int = 8, **settings) -> Reference:
    config = SimulationConfig.from_settings(data=data, model=model, partition=f"vertical:{blocks}", rounds=rounds,
                                            rc_converged=False, **settings)
    dataset = load_dataset(data)
    config = resolve_partition(config, dataset)
    rep = prepare_repeat(dataset, config, 0)
    engine, _ = make_engine(rep, config, network_factory(config.topology))
    split = rep.split
    best = BestIterate(split.model, split.phi_train, split.y_train, split.parts, engine.stats)
    history = [engine.stats[0].copy()]

    def on_round(_, stats):
        best.offer(stats)
        history.append(stats[0].copy())

    engine.run(rounds, on_round)
    return Reference(config, rep, np.array(history), best.best[0], ess_for(config))


def hybrid_reference(data: str = "wdbc", model: str = "nb", groups: int = 2, blocks: int = 2, rounds: int = 8,
                     topology: str = "tree", **settings) -> Reference:
    """The simulator's hybrid run: ``history`` (rounds + 1, groups, size) every group's statistics after each round,
    ``best`` (groups, size) the last (a hybrid run keeps no best iterate)."""
    config = SimulationConfig.from_settings(data=data, model=model, partition=f"hybrid:{groups}x{blocks}", rounds=rounds,
                                            topology=topology, rc_converged=False, **settings)
    dataset = load_dataset(data)
    config = resolve_partition(config, dataset)
    rep = prepare_repeat(dataset, config, 0)
    engine, _ = make_engine(rep, config, network_factory(config.topology))
    history = [engine.stats.copy()]
    engine.run(rounds, lambda _, stats: history.append(stats.copy()))
    return Reference(config, rep, np.array(history), history[-1], ess_for(config))


def group_graph(ref: Reference):
    """The graph over a hybrid run's groups, as the simulator draws it."""
    return Schedule(ref.config.topology, ref.groups, seed=ref.rep.graph_seed).graph(1)


def addresses(blocks: int, group: int = 0) -> list[str]:
    """The addresses of group ``group``'s peers, block by block."""
    return [f"tcp://127.0.0.1:{7100 + group * blocks + b}" for b in range(blocks)]


def hybrid_group(ref: Reference, directory=None, *, clock, **settings) -> dict[str, VerticalPeer]:
    """Every peer (g, b) of a hybrid run, by address: group g's members, block b's neighbours in the groups next to g."""
    blocks, graph = len(ref.model.parts), group_graph(ref)
    peers = {}
    for g in range(ref.groups):
        neighbours = sorted(graph.neighbors(g))
        for b, address in enumerate(addresses(blocks, g)):
            peers[address] = make_peer(ref, b, ref.block_data(b, group=g), directory, clock=clock, group=g,
                                       block_neighbours=tuple(addresses(blocks, h)[b] for h in neighbours), **settings)
    return peers


def group(ref: Reference, directory=None, *, clock, blocks_data=None, secure: bool = False,
          **settings) -> dict[str, VerticalPeer]:
    """Every block's peer (block 0 the label holder) on ``ref``'s split, by address; checkpoints in ``directory``;
    with ``secure``, the members' scores aggregated securely (fresh keys)."""
    blocks = len(ref.model.parts)
    datas = blocks_data or [ref.block_data(b) for b in range(blocks)]
    everyone = addresses(blocks)
    keys = {address: new_key_pair() for address in everyone}

    def masks(address):
        others = {other: keys[other].public for other in everyone if other != address}
        return ScoreMasks(keys[address].secret, address, others, "crc") if secure else None

    return {address: make_peer(ref, b, datas[b], directory, clock=clock, masks=masks(address), **settings)
            for b, address in enumerate(everyone)}


def make_peer(ref: Reference, block: int, data: BlockData, directory=None, *, clock, ess="reference", group: int = 0,
              block_neighbours=None, masks=None, label_holder=None, **settings) -> VerticalPeer:
    """Block ``block``'s peer of group ``group``; ``ess`` the reference's unless given (None: m / lr of the aligned
    group); ``block_neighbours`` for a hybrid run; ``label_holder``: the address a member answers alone (its
    ``--label-holder``)."""
    everyone = addresses(len(ref.model.parts), group)
    settings = {"rounds": ref.config.rounds, "timeout_s": 1.0, "first_round_timeout_s": 5.0, **settings}
    if directory is not None:
        settings["checkpoint_dir"] = str(directory / f"checkpoint-{group}-{block}")
    peer_settings = PeerSettings(bind=everyone[block], peers=tuple(a for a in everyone if a != everyone[block]),
                                 **settings)
    named = {} if data.y is not None else {"label_holder": label_holder}
    role = LabelHolder if data.y is not None else GroupMember
    return role(ref.model, block, data, peer_settings, ess=ref.ess if ess == "reference" else ess, clock=clock,
                block_neighbours=block_neighbours, masks=masks, log=logging.getLogger(f"crc.node.test.{group}.{block}"),
                **named)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Bus:
    """Runs ``peers`` (address -> peer) in one thread on ``clock``. ``tamper(sender, address, frame)`` may return
    frames to deliver instead of ``frame`` (none: it is lost); ``on_pass(address, peer)`` is called whenever a peer
    completes a pass. A peer that raises is kept in ``errors`` and takes no further part; one in ``dead`` (killed)
    neither. ``replace(address, peer)`` restarts a dead one as a new peer (from its checkpoint)."""

    peers: dict
    clock: FakeClock
    tamper: object = None
    on_pass: object = None
    errors: dict = field(default_factory=dict)
    dead: set = field(default_factory=set)
    stopped_at: dict = field(default_factory=dict)
    queue: collections.deque = field(default_factory=collections.deque)
    sent: collections.Counter = field(default_factory=collections.Counter)
    """Frames each peer sent (before ``tamper``)."""

    def active(self) -> list[str]:
        return [a for a, p in self.peers.items() if not p.done and a not in self.errors and a not in self.dead]

    def _post(self, sender: str, frames) -> None:
        for address, frame in frames:
            self.sent[sender] += 1
            for each in ([frame] if self.tamper is None else self.tamper(sender, address, frame)):
                self.queue.append((sender, address, each))

    def _call(self, address: str, action):
        peer = self.peers[address]
        before = peer.pass_
        try:
            self._post(address, action())
        except CRCError as exc:  # GroupStopped, AlignmentError and their kin: this peer stops
            self.errors[address], self.stopped_at[address] = exc, self.clock.now
        if self.on_pass is not None and peer.pass_ != before:
            self.on_pass(address, peer)

    def start(self, *addresses: str) -> None:
        """Begin the given peers (all by default)."""
        for address in addresses or list(self.peers):
            self._call(address, self.peers[address].begin)

    def replace(self, address: str, peer: VerticalPeer) -> None:
        self.dead.discard(address)
        self.peers[address] = peer
        self.start(address)

    def run(self, until=None) -> None:
        """Deliver and expire until every peer is done or stopped (or ``until()``)."""
        for _ in range(MAX_EVENTS):
            if until is not None and until():
                return
            if self.queue:
                sender, address, frame = self.queue.popleft()
                if address in self.active():
                    self._call(address, lambda a=address, f=frame: self.peers[a].receive(f, None))
                continue
            waiting = self.active()
            if not waiting:
                return
            self.clock.now = max(self.clock.now, min(self.peers[a].deadline for a in waiting))
            for address in waiting:
                if self.peers[address].deadline <= self.clock.now:
                    self._call(address, self.peers[address].expire)
        raise AssertionError("the group keeps running without progress")

    def joined(self, what: str = "best") -> np.ndarray:
        """The group's statistics: the join of every block's ``best`` (or ``stats``), in block order."""
        peers = sorted(self.peers.values(), key=lambda p: p.block)
        return peers[0].model.join([getattr(p, what) for p in peers])


