"""One real peer: the CRC round loop over the network (DESIGN.md, "Peers").

At round t the peer waits (until a timeout) for its neighbours' round t-1
statistics, averages what arrived with its own (closed neighbourhood), runs
LRC on its local data, sends its round-t statistics and writes a checkpoint.
Early messages are kept for their round, stale ones dropped; anything invalid
is rejected, counted by cause and never touches the statistics. The network
is a PeerTransport given to ``Peer.run``, which closes it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from crc.core import acceleration
from crc.core.acceleration import PAPER, Acceleration
from crc.core.calibration import soft_zero_one
from crc.core.loss import dropped
from crc.core.models.base import GenerativeModel, labelled_weights
from crc.nodes import checkpoint
from crc.nodes.transport import PeerTransport
from crc.nodes.wire import CAUSES, Expectation, Rejected, decode, encode


@dataclass(frozen=True)
class PeerSettings:
    """Everything a peer is told: who it is, whom it talks to, how long and how often it waits.

    Each default below is the only one: ``crc node``, ``crc launch`` and the launcher use these.
    """

    bind: str
    """Address the peer listens on; also its name on the wire."""
    peers: tuple[str, ...]
    """Bind addresses of the neighbours."""
    rounds: int = 64
    """Rounds of the run, the same on every peer."""
    iters: int = 1
    """Local RC iterations per round."""
    timeout_s: float = 10.0
    """Seconds a round waits for the neighbours' statistics once the first round's allowance is over."""
    first_round_timeout_s: float = 60.0
    """Seconds the first round of a fresh run may wait, from the peer's start: the peers' start-up. No later
    round gives up before then either, since a neighbour's neighbour that starts late delays the neighbour's
    next rounds. A peer resumed from a checkpoint joins running peers and uses ``timeout_s`` only."""
    queue_messages: int = 256
    """Frames (rounds of statistics) ZeroMQ may queue per neighbour, outgoing and incoming."""
    final_linger_ms: int = 1000
    """Milliseconds queued statistics may take to leave after the last round (a stop closes at once)."""
    poll_slice_s: float = 0.1
    """Longest single wait for frames, in seconds: a stop request is seen within this time."""
    run: str = "crc"
    """Run id: peers of other runs are ignored."""
    checkpoint_dir: str | None = None
    """Directory of the per-round checkpoint (none: no checkpoint, no resume)."""
    acceleration: Acceleration = PAPER
    """Memory, start and safeguard (``crc.core.acceleration``); its memory is not checkpointed: a resumed peer's
    first round is a plain step."""
    loss: float = 0.0
    """Injected message loss: each neighbour's message of a round is dropped with this probability (``crc.core.loss``)."""
    loss_seed: int = 0
    """Seed of the injected loss (the simulator's ``loss_seed`` for this node, so that both drop the same messages)."""

    def __post_init__(self):
        if self.bind in self.peers:
            raise ValueError(f"{self.bind} lists itself among its peers")
        if min(self.timeout_s, self.first_round_timeout_s, self.poll_slice_s) <= 0:
            raise ValueError("timeouts and the poll slice must be positive")
        if self.rounds < 1 or self.iters < 1 or self.queue_messages < 1 or self.final_linger_ms < 0:
            raise ValueError("rounds, iterations and the queue length must be at least 1, the linger at least 0")


@dataclass
class Metrics:
    """What a peer reports about its run (all counts cumulative)."""

    rounds_done: int = 0
    soft_loss: list = field(default_factory=list)
    round_ms: list = field(default_factory=list)
    messages_sent: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    send_dropped: int = 0
    rejected: dict = field(default_factory=lambda: {cause: 0 for cause in CAUSES})
    missing: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, obj: dict) -> Metrics:
        metrics = cls()
        for key, value in obj.items():
            if hasattr(metrics, key):
                setattr(metrics, key, value)
        return metrics


class Peer:
    """A CRC peer with its local data ``phi`` (m, k), ``y`` (m,) and equivalent sample size ``ess``."""

    def __init__(self, model: GenerativeModel, phi: np.ndarray, y: np.ndarray, *, ess: float, settings: PeerSettings,
                 log: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.model, self.phi, self.y, self.ess, self.settings = model, phi, y, float(ess), settings
        self.log = log or logging.getLogger("crc.node")
        self.weights = labelled_weights(y, model.n_classes)
        self.expect = Expectation(run=settings.run, schema_id=model.schema_id, ess=self.ess, size=model.size,
                                  neighbours=frozenset(settings.peers))
        self.round, self.metrics, self.memory = 0, Metrics(), None
        self.stats = acceleration.start_statistics(model, settings.acceleration, self.ess, phi, y)
        self.metrics.missing = {peer: 0 for peer in settings.peers}
        self._inbox: dict[int, dict[str, np.ndarray]] = {}
        self._logged_causes: set[str] = set()
        self.stop = threading.Event()
        self._startup_deadline = -math.inf  # on self.clock: no wait of a fresh run gives up before it
        self._resume()

    @property
    def identity(self) -> dict:
        """What a checkpoint must match to be resumed."""
        s = self.settings
        return {"bind": s.bind, "peers": sorted(s.peers), "rounds": s.rounds, "iters": s.iters, "run": s.run,
                "schema_id": self.model.schema_id, "ess": self.ess, "instances": int(len(self.y))}

    def _resume(self) -> None:
        if not self.settings.checkpoint_dir:
            return
        found = checkpoint.load(self.settings.checkpoint_dir, identity=self.identity, size=self.model.size)
        if found is not None:
            self.round, self.stats, metrics = found
            self.metrics = Metrics.from_json(metrics)
            self.log.info("resumed from checkpoint at round %d", self.round)

    def _checkpoint(self) -> None:
        if self.settings.checkpoint_dir:
            checkpoint.save(self.settings.checkpoint_dir, identity=self.identity, round_=self.round, stats=self.stats,
                            metrics=self.metrics.to_json())

    def _send(self, transport: PeerTransport) -> None:
        frame = encode(run=self.settings.run, sender=self.settings.bind, round_=self.round, schema_id=self.model.schema_id,
                       ess=self.ess, stats=self.stats)
        dropped = transport.send(frame)
        sent = len(self.settings.peers) - len(dropped)
        self.metrics.messages_sent += sent
        self.metrics.bytes_sent += sent * len(frame)
        self.metrics.send_dropped += len(dropped)
        for address in dropped:
            self.log.warning("round %d: queue to %s full, statistics not sent", self.round, address)

    def _reject(self, cause: str, detail: str, sender: str | None) -> None:
        self.metrics.rejected[cause] = self.metrics.rejected.get(cause, 0) + 1
        level = logging.WARNING if cause not in self._logged_causes else logging.DEBUG
        self._logged_causes.add(cause)
        self.log.log(level, "rejected message (%s) from %s: %s", cause, sender or "unknown sender", detail)

    def _accept(self, frame: bytes, wanted: int) -> None:
        try:
            message = decode(frame, self.expect)
        except Rejected as rejection:
            self._reject(rejection.cause, rejection.detail, rejection.sender)
            return
        if message.round < wanted:
            self._reject("stale", f"round {message.round} arrived while waiting for round {wanted}", message.sender)
            return
        if message.round >= self.settings.rounds:  # keeps the buffer of early rounds bounded
            self._reject("malformed", f"round {message.round} is beyond this run's {self.settings.rounds} rounds", message.sender)
            return
        slot = self._inbox.setdefault(message.round, {})
        if message.sender in slot:
            self._reject("duplicate", f"second message for round {message.round}", message.sender)
            return
        slot[message.sender] = message.stats
        self.metrics.messages_received += 1
        self.metrics.bytes_received += len(frame)

    def _gather(self, transport: PeerTransport, wanted: int, deadline: float) -> dict[str, np.ndarray]:
        """Neighbours' statistics of round ``wanted``: all of them, or what arrived before ``deadline``."""
        while not self.stop.is_set() and len(self._inbox.get(wanted, {})) < len(self.settings.peers):
            if self.clock() >= deadline:
                break
            for frame in transport.receive(deadline):
                self._accept(frame, wanted)
        for old in [r for r in self._inbox if r < wanted]:
            del self._inbox[old]
        return self._inbox.pop(wanted, {})

    def step(self, transport: PeerTransport) -> bool:
        """One round; False if a stop request interrupted the wait."""
        started = time.perf_counter()
        wanted = self.round
        waiting_since = self.clock()
        deadline = max(waiting_since + self.settings.timeout_s, self._startup_deadline)
        received = self._gather(transport, wanted, deadline)
        if self.stop.is_set():
            return False
        lost = dropped(self.settings.loss_seed, wanted + 1, len(self.settings.peers), self.settings.loss)
        received = {peer: stats for peer, stats in received.items() if not lost[self.settings.peers.index(peer)]}
        for peer in self.settings.peers:
            if peer not in received:
                self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
                self.log.warning("round %d: no statistics from %s within %.1f s", wanted + 1, peer,
                                 deadline - waiting_since)
        aggregated = (self.stats + sum(received.values(), np.zeros_like(self.stats))) / (1 + len(received))
        self.stats, self.memory = acceleration.step(self.model, self.settings.acceleration, aggregated, self.memory, self.phi,
                                                    self.weights, iterations=self.settings.iters)
        self.round += 1
        loss = soft_zero_one(self.model.posteriors(self.model.theta(self.stats), self.phi), self.y)
        self.metrics.rounds_done = self.round
        self.metrics.soft_loss.append(loss)
        if self.round < self.settings.rounds:
            self._send(transport)
        self.metrics.round_ms.append(1000 * (time.perf_counter() - started))
        self._checkpoint()
        self.log.info("round %d: %d/%d neighbours, local soft 0-1 loss %.4f", self.round, len(received),
                      len(self.settings.peers), loss)
        return True

    def run(self, transport: PeerTransport) -> bool:
        """Run the remaining rounds over ``transport``; True if all were done, False if stopped early.

        The peer owns ``transport`` from here on: it closes it when it returns or raises, letting queued
        statistics leave for ``final_linger_ms`` after the last round, at once after a stop or an error.
        A checkpoint of the last completed round is written in every case.
        """
        finished = False
        try:
            if self.round == 0:  # a fresh run: the neighbours may still be starting
                self._startup_deadline = self.clock() + self.settings.first_round_timeout_s
            self.log.info("listening on %s, %d neighbours, starting at round %d", self.settings.bind,
                          len(self.settings.peers), self.round)
            if self.round < self.settings.rounds:
                self._send(transport)  # our statistics of the round we start from
            while self.round < self.settings.rounds:
                if not self.step(transport):
                    break
            finished = self.round >= self.settings.rounds
        finally:
            try:
                self._checkpoint()
            finally:
                transport.close(self.settings.final_linger_ms if finished else 0)
        if not finished:
            if self.settings.checkpoint_dir:
                self.log.info("stopped at round %d; checkpoint written to %s", self.round, self.settings.checkpoint_dir)
            else:
                self.log.info("stopped at round %d; no checkpoint (no checkpoint directory): a restart begins at round 0",
                              self.round)
        return finished
