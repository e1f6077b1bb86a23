"""One real peer: the CRC round loop over the network (DESIGN.md, "Peers").

At round t the peer waits until ``timeout`` for its neighbours' round t-1
statistics, averages what arrived with its own (closed neighbourhood), runs
LRC on its local data, sends its round-t statistics and writes a checkpoint.
Early messages are kept for their round, stale ones dropped; anything invalid
is rejected, counted by cause and never touches the statistics.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from crc.core.calibration import lrc, soft_zero_one
from crc.core.models.base import GenerativeModel, labelled_weights
from crc.nodes import checkpoint
from crc.nodes.transport import Transport
from crc.nodes.wire import CAUSES, Expectation, Rejected, decode, encode

FINAL_LINGER_MS = 1000
"""On a normal finish, how long queued statistics may take to leave (a stop request closes at once)."""


@dataclass(frozen=True)
class PeerSettings:
    bind: str
    peers: tuple[str, ...]
    rounds: int = 64
    iters: int = 1
    timeout: float = 10.0
    run: str = "crc"
    checkpoint_dir: str | None = None


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
    def from_json(cls, obj: dict) -> "Metrics":
        metrics = cls()
        for key, value in obj.items():
            if hasattr(metrics, key):
                setattr(metrics, key, value)
        return metrics


class Peer:
    """A CRC peer with its local data ``phi`` (m, k), ``y`` (m,) and equivalent sample size ``ess``."""

    def __init__(self, model: GenerativeModel, phi: np.ndarray, y: np.ndarray, *, ess: float, settings: PeerSettings,
                 log: logging.Logger | None = None):
        if settings.bind in settings.peers:
            raise ValueError(f"{settings.bind} lists itself among its peers")
        self.model, self.phi, self.y, self.ess, self.settings = model, phi, y, float(ess), settings
        self.log = log or logging.getLogger("crc.node")
        self.weights = labelled_weights(y, model.n_classes)
        self.expect = Expectation(run=settings.run, schema_id=model.schema_id, ess=self.ess, size=model.size,
                                  neighbours=frozenset(settings.peers))
        self.round, self.stats, self.metrics = 0, model.uniform(self.ess), Metrics()
        self.metrics.missing = {peer: 0 for peer in settings.peers}
        self._inbox: dict[int, dict[str, np.ndarray]] = {}
        self._logged_causes: set[str] = set()
        self.stop = threading.Event()
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

    def _send(self, transport: Transport) -> None:
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

    def _gather(self, transport: Transport, wanted: int) -> dict[str, np.ndarray]:
        """Neighbours' statistics of round ``wanted``: all of them, or what arrived before the timeout."""
        deadline = time.monotonic() + self.settings.timeout
        while not self.stop.is_set() and len(self._inbox.get(wanted, {})) < len(self.settings.peers):
            if time.monotonic() >= deadline:
                break
            for frame in transport.receive(deadline):
                self._accept(frame, wanted)
        for old in [r for r in self._inbox if r < wanted]:
            del self._inbox[old]
        return self._inbox.pop(wanted, {})

    def step(self, transport: Transport) -> bool:
        """One round; False if a stop request interrupted the wait."""
        started = time.perf_counter()
        wanted = self.round
        received = self._gather(transport, wanted)
        if self.stop.is_set():
            return False
        for peer in self.settings.peers:
            if peer not in received:
                self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
                self.log.warning("round %d: no statistics from %s within %.1f s", wanted + 1, peer, self.settings.timeout)
        aggregated = (self.stats + sum(received.values(), np.zeros_like(self.stats))) / (1 + len(received))
        self.stats = lrc(self.model, aggregated, self.phi, self.weights, iterations=self.settings.iters)
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

    def run(self) -> bool:
        """Run the remaining rounds; True if all were done, False if stopped early (checkpoint written)."""
        transport = Transport(self.settings.bind, list(self.settings.peers), max_frame_bytes=self.expect.max_frame_bytes)
        finished = False
        try:
            self.log.info("listening on %s, %d neighbours, starting at round %d", self.settings.bind,
                          len(self.settings.peers), self.round)
            if self.round < self.settings.rounds:
                self._send(transport)  # our statistics of the round we start from
            while self.round < self.settings.rounds:
                if not self.step(transport):
                    break
            finished = self.round >= self.settings.rounds
        finally:
            self._checkpoint()
            transport.close(FINAL_LINGER_MS if finished else 0)
        if not finished:
            self.log.info("stopped at round %d; checkpoint written", self.round)
        return finished
