"""One real peer: the CRC round loop over the network (DESIGN.md, "Peers").

At round t the peer waits (until a timeout) for its neighbours' round t-1
statistics, averages what arrived with its own (closed neighbourhood), runs
LRC on its local data, sends its round-t statistics and writes a checkpoint.
Early messages are kept for their round (at most ``window_rounds`` ahead, one
slot per neighbour and round), stale ones dropped; anything invalid is
rejected, counted by cause and never touches the statistics. A neighbour that
misses ``down_after`` rounds in a row is marked down and no longer waited for
until it sends again. The network is a PeerTransport given to ``Peer.run``,
which closes it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

import numpy as np

from crc.core import acceleration
from crc.core.acceleration import PAPER, Acceleration
from crc.core.aggregation import AGGREGATIONS, peer_average
from crc.core.attacks import ATTACKS, poison
from crc.core.calibration import soft_zero_one
from crc.core.errors import CRCError
from crc.core.loss import dropped
from crc.core.models.base import GenerativeModel, labelled_weights
from crc.core.privacy import Privacy, release
from crc.nodes import checkpoint
from crc.nodes.transport import PeerTransport
from crc.nodes.wire import CAUSES, Expectation, Masked, Message, Rejected, Reveal, Unmask, check_statistics, decode, encode


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
    """Seconds the first round of a fresh run may wait, from the peer's start (or ``start_at``): the peers'
    start-up. No later round gives up before then either, since a neighbour's neighbour that starts late delays
    the neighbour's next rounds. A peer resumed from a checkpoint joins running peers and uses ``timeout_s`` only."""
    start_at: float | None = None
    """Wall-clock time (seconds since the epoch) at which a fresh run sends its first statistics; until then the
    peer is listening and keeps what arrives. None, or a time already past: at once. Peers started one after
    another but told the same time begin their rounds together, so the start-up does not ripple through the
    first rounds. A resumed peer ignores it."""
    queue_messages: int = 256
    """Frames (rounds of statistics) ZeroMQ may queue for each neighbour (outgoing; the inbox keeps a few per connection)."""
    final_linger_ms: int = 1000
    """Milliseconds queued statistics may take to leave after the last round (a stop closes at once)."""
    poll_slice_s: float = 0.1
    """Longest single wait for frames, in seconds: a stop request is seen within this time."""
    run: str = "crc"
    """Run id: peers of other runs are ignored."""
    checkpoint_dir: str | None = None
    """Directory of the per-round checkpoint (none: no checkpoint, no resume)."""
    aggregate: str = "mean"
    """How neighbours' statistics are combined with the peer's own (``crc.core.aggregation``)."""
    window_rounds: int = 8
    """Frames for more than this many rounds after the awaited one are refused, so that buffered state stays bounded
    (neighbours x window x frame); a peer that started late or was restarted catches up through buffered rounds."""
    down_after: int = 3
    """Consecutive rounds a neighbour may miss before it is marked down and no longer waited for."""
    attack: str | None = None
    """Research only: send poisoned statistics of this kind (``crc.core.attacks``) instead of the peer's own."""
    known_keys: Mapping[str, str] | None = None
    """Each neighbour's CURVE public key (address -> z85): a frame must come over a connection authenticated with
    the key of the neighbour it claims to be from. None: an insecure peer, whose frames carry no key."""
    acceleration: Acceleration = PAPER
    """Memory, start, safeguard, classifier and exact diffusion (``crc.core.acceleration``); the memory is checkpointed with the
    statistics, so a resumed peer continues exactly."""
    loss: float = 0.0
    """Injected message loss: each neighbour's message of a round is dropped with this probability (``crc.core.loss``)."""
    loss_seed: int = 0
    """Seed of the injected loss (the simulator's ``loss_seed`` for this node, so that both drop the same messages)."""
    privacy: Privacy | None = None
    """Differential privacy (``crc.core.privacy``): every round's statistics are released with Gaussian noise of
    this plan's sigma, and the peer continues from the released values. None: no noise."""
    privacy_seed: int | None = None
    """Seed of the privacy noise; None (a deployment): fresh entropy from the operating system."""
    secure: SecureKeys | None = None
    """Secure aggregation (``crc.nodes.secure_aggregation``): this peer's secret key and every neighbour's
    neighbourhood with its members' public keys. None: statistics travel as they are."""

    def __post_init__(self):
        if self.bind in self.peers:
            raise ValueError(f"{self.bind} lists itself among its peers")
        if min(self.timeout_s, self.first_round_timeout_s, self.poll_slice_s) <= 0:
            raise ValueError("timeouts and the poll slice must be positive")
        if self.rounds < 1 or self.iters < 1 or self.queue_messages < 1 or self.final_linger_ms < 0:
            raise ValueError("rounds, iterations and the queue length must be at least 1, the linger at least 0")
        if self.window_rounds < 0 or self.down_after < 1:
            raise ValueError("the window of early rounds must be at least 0, the rounds before a neighbour is down at least 1")
        if self.aggregate not in AGGREGATIONS or self.attack not in (None, *ATTACKS):
            raise ValueError(f"unknown aggregation {self.aggregate!r} or attack {self.attack!r}")
        if self.known_keys is not None and not set(self.peers) <= set(self.known_keys):
            raise ValueError("every neighbour needs a known key")


@dataclass(frozen=True)
class SecureKeys:
    """What a peer needs for secure aggregation: its z85 CURVE secret key and, for each neighbour u, the z85 public
    key of every member of u's neighbourhood N(u) (this peer included)."""

    secret_key: str
    neighbourhoods: Mapping[str, Mapping[str, str]]


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
    refused: dict = field(default_factory=dict)
    """Connections the transport refused, by cause (an unknown key, a plaintext client ...)."""
    missing: dict = field(default_factory=dict)
    """Per neighbour: rounds its statistics did not arrive."""
    down_rounds: dict = field(default_factory=dict)
    """Per neighbour: rounds it was marked down (not waited for)."""
    downtime_s: dict = field(default_factory=dict)
    """Per neighbour: seconds from being marked down to sending again (or to the end of the run)."""
    unmask_fallbacks: int = 0
    """Secure aggregation: rounds whose neighbours' masked statistics could not be unmasked (fewer than two arrived,
    or a mask could not be removed), so that the peer kept its own statistics."""
    reveals_refused: int = 0
    """Secure aggregation: unmasking requests this peer refused (they would have revealed more than a sum)."""
    checkpoint_failures: int = 0
    """Checkpoint writes that failed (the previous checkpoint was kept)."""
    aggregate_fallbacks: int = 0
    """Rounds whose neighbourhood average gave statistics the neighbours would reject, so that the round started
    from the peer's own statistics (``Peer._calibrate``)."""
    rounds_kept: int = 0
    """Of those, rounds whose local step from the peer's own statistics failed too, so that it kept its last ones."""

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, obj: dict) -> Metrics:
        """Metrics from a checkpoint; a known field of another type than its default's is a CRCError."""
        metrics = cls()
        for key, value in obj.items():
            if hasattr(metrics, key):
                if not _same_kind(getattr(metrics, key), value, seconds=key == "downtime_s"):
                    raise CRCError(f"metric {key!r} is not what a peer writes there")
                setattr(metrics, key, value)
        return metrics


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_kind(default, value, *, seconds: bool) -> bool:
    """Whether ``value`` is a metric of the kind of ``default``: a count; a list of numbers; a map of names to
    counts (to numbers of seconds if ``seconds``)."""
    if isinstance(default, list):
        return isinstance(value, list) and all(map(_number, value))
    if isinstance(default, dict):
        valid = (lambda v: _number(v) and v >= 0) if seconds else _count
        return isinstance(value, dict) and all(isinstance(k, str) and valid(v) for k, v in value.items())
    return _count(value)


class Peer:
    """A CRC peer with its local data ``phi`` (m, k), ``y`` (m,) and equivalent sample size ``ess``."""

    def __init__(self, model: GenerativeModel, phi: np.ndarray, y: np.ndarray, *, ess: float, settings: PeerSettings,
                 log: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.model, self.phi, self.y, self.ess, self.settings = model, phi, y, float(ess), settings
        self.log = log or logging.getLogger("crc.node")
        self.weights = labelled_weights(y, model.n_classes)
        self.expect = Expectation(run=settings.run, schema_id=model.schema_id, ess=self.ess, size=model.size,
                                  neighbours=frozenset(settings.peers), model=model, known_keys=settings.known_keys,
                                  secure=settings.secure is not None)
        self.secure = None
        if settings.secure is not None:
            from crc.nodes.secure_aggregation import SecureNeighbourhoods

            self.secure = SecureNeighbourhoods(settings.bind, settings.run, settings.peers, settings.secure)
        self._reveals: dict[str, Reveal] = {}
        self._unmasking: tuple[int, frozenset] | None = None  # (round, survivors) whose reveals are awaited
        self._final_asked: set[str] = set()
        self.round, self.metrics, self.memory = 0, Metrics(), None
        self.stats = acceleration.start_statistics(model, settings.acceleration, self.ess, phi, y)
        problem = self._own_problem(self.stats)
        if problem is not None:
            raise CRCError(f"the starting statistics from this peer's data would be rejected by its neighbours ({problem})")
        self.aggregated: np.ndarray | None = None  # the last aggregate: the ``aggregate`` classifier, the momentum memory
        self.metrics.missing = {peer: 0 for peer in settings.peers}
        self.metrics.down_rounds = {peer: 0 for peer in settings.peers}
        self.metrics.downtime_s = {peer: 0.0 for peer in settings.peers}
        self._misses = {peer: 0 for peer in settings.peers}
        self._down_since: dict[str, float] = {}  # neighbours marked down -> when, on self.clock
        self._attack_rng = np.random.default_rng(zlib.crc32(settings.bind.encode()))
        self._privacy_rng = np.random.default_rng(settings.privacy_seed)
        self._inbox: dict[int, dict[str, Message | Masked]] = {}  # round -> sender -> its statistics message
        self._logged_causes: set[str] = set()
        self._refused_senders: set[str] = set()  # neighbours whose unmasking requests were refused (logged once each)
        self.stop = threading.Event()
        self._startup_deadline = -math.inf  # on self.clock: no wait of a fresh run gives up before it
        self._checkpoint_failing = False
        self._resume()
        self._refused_before = dict(self.metrics.refused)

    @property
    def identity(self) -> dict:
        """What a checkpoint must match to be resumed."""
        s = self.settings
        identity = {"bind": s.bind, "peers": sorted(s.peers), "rounds": s.rounds, "iters": s.iters, "run": s.run,
                    "schema_id": self.model.schema_id, "ess": self.ess, "instances": int(len(self.y))}
        if s.privacy is not None:  # resuming under other noise would break the accounting
            identity["privacy"] = s.privacy.to_json()
        if s.secure is not None:
            identity["secure_aggregation"] = True
        if s.acceleration != PAPER:  # it also decides what the checkpoint holds (``_state``)
            identity["acceleration"] = asdict(s.acceleration)
        return identity

    @property
    def classifier_stats(self) -> np.ndarray:
        """The statistics of this peer's classifier (size,): its own, or its last aggregate
        (``Acceleration.classifier_statistics``)."""
        return self.settings.acceleration.classifier_statistics(self.stats, self.aggregated)

    def _state(self) -> np.ndarray:
        """What a checkpoint holds: the statistics; then, if kept, the last aggregate (the statistics before the first
        round); then, with momentum, the safeguard's reset flag for the next round (0 or 1); with exact diffusion, the
        statistics after the last local steps (the statistics before the first round). A resumed peer thus continues
        exactly as an uninterrupted one."""
        speedup = self.settings.acceleration
        parts = [self.stats]
        if speedup.keeps_aggregate:
            parts.append(self.stats if self.aggregated is None else self.aggregated)
        if speedup.has_momentum:
            parts.append([float(self.memory is not None and bool(self.memory.reset))])
        if speedup.exact_diffusion:
            parts.append(self.stats if self.memory is None else self.memory.previous)
        return np.concatenate(parts) if len(parts) > 1 else self.stats

    def _resume(self) -> None:
        if not self.settings.checkpoint_dir:
            return
        size = self.model.size
        found = checkpoint.load(self.settings.checkpoint_dir, identity=self.identity, size=len(self._state()))
        if found is None:
            return
        self.round, state, metrics = found
        self.stats = state[:size]
        speedup = self.settings.acceleration
        if speedup.keeps_aggregate and self.round > 0:
            self.aggregated = state[size:2 * size]
            if speedup.has_momentum:
                reset = state[2 * size]
                if reset not in (0.0, 1.0):
                    raise CRCError(f"{self.settings.checkpoint_dir}: damaged checkpoint: momentum reset flag {float(reset)!r} (0 or 1)")
                self.memory = acceleration.Memory(self.aggregated, np.array(reset == 1.0))
        if speedup.exact_diffusion and self.round > 0:
            self.memory = acceleration.Memory(state[size:2 * size], np.array(False))
        held = [self.stats, self.aggregated, None if self.memory is None else self.memory.previous]
        for part in (statistics for statistics in held if statistics is not None):
            problem = self._own_problem(part)
            if problem is not None:
                raise CRCError(f"{self.settings.checkpoint_dir}: damaged checkpoint: its statistics would be rejected ({problem})")
        try:
            self.metrics = Metrics.from_json(metrics)
        except CRCError as exc:
            raise CRCError(f"{self.settings.checkpoint_dir}: damaged checkpoint: {exc}") from None
        self.log.info("resumed from checkpoint at round %d", self.round)

    def _checkpoint(self) -> None:
        """Write the checkpoint; a write that fails (a full disk, no file descriptor left) keeps the previous one,
        which ``checkpoint.save`` replaces only whole, and is counted and logged (an error when the last write
        succeeded, then quietly until one succeeds again): the run goes on."""
        if self.settings.checkpoint_dir:
            failing = self._checkpoint_failing
            try:
                checkpoint.save(self.settings.checkpoint_dir, identity=self.identity, round_=self.round,
                                stats=self._state(), metrics=self.metrics.to_json())
            except OSError as exc:
                self._checkpoint_failing = True
                self.metrics.checkpoint_failures += 1
                self.log.log(logging.DEBUG if failing else logging.ERROR,
                             "round %d: checkpoint not written (%s); the previous one is kept", self.round, exc)
                return
            self._checkpoint_failing = False
            if failing:
                self.log.warning("round %d: checkpoint written again", self.round)

    def _send(self, transport: PeerTransport) -> None:
        stats = self.stats if self.settings.attack is None else poison(self.model, self.stats, self.settings.attack,
                                                                         self._attack_rng)
        frame = encode(run=self.settings.run, sender=self.settings.bind, round_=self.round, schema_id=self.model.schema_id,
                       ess=self.ess, stats=stats)
        if self.secure is None:
            dropped = transport.send(frame)
            sent = len(self.settings.peers) - len(dropped)
            self.metrics.messages_sent += sent
            self.metrics.bytes_sent += sent * len(frame)
        else:
            dropped = []
            for address in self.settings.peers:
                masked = self.secure.masked_frame(address, stats, self.round, schema_id=self.model.schema_id, ess=self.ess)
                if not self._send_to(transport, address, masked or frame):
                    dropped.append(address)
        self.metrics.send_dropped += len(dropped)
        for address in dropped:
            self.log.warning("round %d: queue to %s full, statistics not sent", self.round, address)

    def _send_to(self, transport: PeerTransport, address: str, frame: bytes) -> bool:
        """Queue one frame for one neighbour, counted; False if its queue is full."""
        if not transport.send_to(address, frame):
            return False
        self.metrics.messages_sent += 1
        self.metrics.bytes_sent += len(frame)
        return True

    def _reject(self, cause: str, detail: str, sender: str | None) -> None:
        self.metrics.rejected[cause] = self.metrics.rejected.get(cause, 0) + 1
        level = logging.WARNING if cause not in self._logged_causes else logging.DEBUG
        self._logged_causes.add(cause)
        self.log.log(level, "rejected message (%s) from %s: %s", cause, sender or "unknown sender", detail)

    def _accept(self, frame: bytes, key: str | None, wanted: int, transport: PeerTransport) -> None:
        try:
            message = decode(frame, self.expect, key)
        except Rejected as rejection:
            self._reject(rejection.cause, rejection.detail, rejection.sender)
            return
        if isinstance(message, Unmask):
            self._answer(message, transport)
            return
        if isinstance(message, Reveal):
            self._take_reveal(message, len(frame))
            return
        if self.secure is not None and isinstance(message, Masked) != self.secure.receives_masked:
            expected = "masked" if self.secure.receives_masked else "plain"
            self._reject("type", f"{type(message).__name__.lower()} statistics; this peer expects {expected} ones",
                         message.sender)
            return
        if message.round < wanted:
            self._reject("stale", f"round {message.round} arrived while waiting for round {wanted}", message.sender)
            return
        if message.round >= self.settings.rounds:
            self._reject("malformed", f"round {message.round} is beyond this run's {self.settings.rounds} rounds", message.sender)
            return
        if message.round > wanted + self.settings.window_rounds:  # keeps the buffer of early rounds bounded
            self._reject("ahead", f"round {message.round} while waiting for round {wanted} (window "
                                  f"{self.settings.window_rounds})", message.sender)
            return
        slot = self._inbox.setdefault(message.round, {})
        if message.sender in slot:
            self._reject("duplicate", f"second message for round {message.round}", message.sender)
            return
        slot[message.sender] = message
        self.metrics.messages_received += 1
        self.metrics.bytes_received += len(frame)
        if message.sender in self._down_since:
            self._mark_up(message.sender)

    def _answer(self, request: Unmask, transport: PeerTransport) -> None:
        """Answer a neighbour's unmasking request with this peer's reveal, or refuse it (counted; logged as a
        warning the first time for each neighbour)."""
        from crc.nodes.secure_aggregation import Refused

        if request.round == self.settings.rounds - 1:
            self._final_asked.add(request.sender)
        try:
            frame = self.secure.reveal_frame(request)
        except Refused as refusal:
            self.metrics.reveals_refused += 1
            level = logging.DEBUG if request.sender in self._refused_senders else logging.WARNING  # a flood logs once
            self._refused_senders.add(request.sender)
            self.log.log(level, "refused %s's unmasking request for round %d: %s", request.sender, request.round, refusal)
            return
        if frame is not None:
            self._send_to(transport, request.sender, frame)

    def _take_reveal(self, reveal: Reveal, size: int) -> None:
        if self._unmasking is None or reveal.round != self._unmasking[0] or reveal.sender not in self._unmasking[1]:
            self._reject("stale", f"a reveal for round {reveal.round} that this peer is not unmasking", reveal.sender)
            return
        if reveal.sender in self._reveals:
            self._reject("duplicate", f"second reveal for round {reveal.round}", reveal.sender)
            return
        self._reveals[reveal.sender] = reveal
        self.metrics.bytes_received += size

    def _mark_up(self, peer: str) -> None:
        down_s = self.clock() - self._down_since.pop(peer)
        self.metrics.downtime_s[peer] = self.metrics.downtime_s.get(peer, 0.0) + down_s
        self._misses[peer] = 0
        self.log.info("round %d: %s sent again after %.1f s down; waiting for it again", self.round + 1, peer, down_s)

    def _count_missing(self, received: dict, waited_s: float) -> None:
        """Missing and down counts of the round; marks a neighbour down after ``down_after`` misses in a row."""
        for peer in self.settings.peers:
            if peer in received:
                self._misses[peer] = 0
                continue
            self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
            self._misses[peer] += 1
            if peer in self._down_since:
                self.metrics.down_rounds[peer] = self.metrics.down_rounds.get(peer, 0) + 1
                continue
            self.log.warning("round %d: no statistics from %s within %.1f s", self.round + 1, peer, waited_s)
            if self._misses[peer] >= self.settings.down_after:
                self._down_since[peer] = self.clock()
                self.log.warning("round %d: %s missed %d rounds in a row: marked down, no longer waited for until it "
                                 "sends again", self.round + 1, peer, self._misses[peer])

    def _complete(self, wanted: int) -> bool:
        """Whether every neighbour that is not down has sent its statistics of round ``wanted``."""
        slot = self._inbox.get(wanted, {})
        return all(peer in slot for peer in self.settings.peers if peer not in self._down_since)

    def _gather(self, transport: PeerTransport, wanted: int, deadline: float) -> dict[str, Message | Masked]:
        """Neighbours' statistics of round ``wanted``: all of those not down, or what arrived before ``deadline``.

        Frames are handled one at a time, the stop request checked between them; each receive returns a bounded
        batch. With every neighbour down, frames already waiting are still read (without waiting).
        """
        drain = len(self._down_since) == len(self.settings.peers) > 0
        if drain:
            deadline = self.clock()
        self._wait(transport, wanted, deadline, lambda: not drain and self._complete(wanted))
        for old in [r for r in self._inbox if r < wanted]:
            del self._inbox[old]
        return self._inbox.pop(wanted, {})

    def _wait(self, transport: PeerTransport, wanted: int, deadline: float, done: Callable[[], bool]) -> None:
        """Handle frames (for round ``wanted`` and early ones) until ``done()``, a stop request or ``deadline``
        (once expired, one last receive takes what is already there)."""
        while not self.stop.is_set() and not done():
            expired = self.clock() >= deadline
            for frame, key in transport.receive(deadline):
                if self.stop.is_set():
                    break
                self._accept(frame, key, wanted, transport)
            if expired:
                break

    def _secure_average(self, transport: PeerTransport, received: dict, wanted: int) -> np.ndarray:
        """The neighbourhood average from masked statistics: ask the contributors whose words arrived to reveal what
        removes their masks, unmask the sum, average it with this peer's own; its own alone if that fails."""
        survivors = sorted(received)
        total, self._reveals = None, {}
        for address in self.settings.peers:  # to the others too: a notice that they are left out (see _serve_final)
            self._send_to(transport, address, self.secure.unmask_frame(address, received, wanted))
        if len(survivors) >= 2:
            self._unmasking = (wanted, frozenset(survivors))
            self._wait(transport, wanted, self.clock() + self.settings.timeout_s,
                       lambda: len(self._reveals) == len(survivors))
            total = self.secure.unmask({w: received[w].words for w in survivors}, self._reveals, self.model, self.ess)
            self._unmasking = None
        if total is not None:
            try:  # what the wire checks of each message, checked of the sum
                check_statistics(total / len(survivors), self.model, self.ess)
            except Rejected as rejection:
                self._reject(rejection.cause, f"the unmasked sum: {rejection.detail}", None)
                total = None
        if total is None:
            self.metrics.unmask_fallbacks += 1
            self.log.warning("round %d: the neighbours' statistics could not be unmasked (%d of %d arrived, %d "
                             "revealed): keeping this peer's own", wanted + 1, len(survivors), len(self.settings.peers),
                             len(self._reveals))
            return self.stats.copy()
        return (self.stats + total) / (1 + len(survivors))

    def _own_problem(self, stats: np.ndarray) -> str | None:
        """Why the neighbours would reject ``stats`` (size,) from this peer, or None."""
        try:
            check_statistics(stats, self.model, self.ess, secure=self.secure is not None)
        except Rejected as rejection:
            return f"{rejection.cause}: {rejection.detail}"
        return None

    def _local_step(self, aggregated: np.ndarray) -> tuple[np.ndarray, acceleration.Memory | None]:
        """The local calibration steps from ``aggregated`` (size,), then the privacy release if any."""
        stats, memory = acceleration.step(self.model, self.settings.acceleration, aggregated, self.memory, self.phi,
                                          self.weights, iterations=self.settings.iters, own=self.stats)
        if self.settings.privacy is not None:
            stats = release(self.model, stats, self.settings.privacy.sigma, self._privacy_rng)
        return stats, memory

    def _calibrate(self, aggregated: np.ndarray, wanted: int) -> tuple[np.ndarray, np.ndarray, acceleration.Memory | None]:
        """(the aggregate used, the new statistics, the memory) of the round from ``aggregated``.

        Each neighbour's statistics passed the wire's checks, but their average with this peer's can still give
        statistics that the neighbours would reject (rounding against values at the edge of what the wire accepts,
        a sum beyond what secure aggregation encodes): then the round starts from this peer's own statistics
        instead. Should that fail too (a neighbour walked this peer's statistics to the edge of a bound, where its
        own local step crosses it), the peer keeps its statistics and memory of the last round, which passed: a
        neighbour can stall this peer's learning, as it can poison it, but neither stop it nor get it rejected.
        """
        stats, memory, problem = self._checked_step(aggregated)
        if problem is None:
            return aggregated, stats, memory
        self.metrics.aggregate_fallbacks += 1
        self.log.warning("round %d: the neighbourhood's average would give statistics the neighbours reject (%s): "
                         "this round starts from this peer's own", wanted + 1, problem)
        own = self.stats.copy()
        stats, memory, problem = self._checked_step(own)
        if problem is None:
            return own, stats, memory
        self.metrics.rounds_kept += 1
        self.log.warning("round %d: this peer's own local step would give statistics the neighbours reject (%s): "
                         "it keeps its statistics of the last round", wanted + 1, problem)
        return own, self.stats.copy(), self.memory

    def _checked_step(self, start: np.ndarray) -> tuple[np.ndarray | None, acceleration.Memory | None, str | None]:
        """``_local_step(start)`` and why the neighbours would reject its statistics (None: they would not)."""
        try:
            stats, memory = self._local_step(start)
        except CRCError as exc:
            return None, None, str(exc)
        return stats, memory, self._own_problem(stats)

    def _serve_final(self, transport: PeerTransport) -> None:
        """After the last round: answer the neighbours' unmasking requests for it (they unmask after this peer's
        last message), until every protected neighbour has sent its request (every contributor gets one, a notice
        when it is left out), a stop request, or ``timeout_s``."""
        waiting = set(self.secure.protected) - self._final_asked
        if waiting:
            self._wait(transport, self.settings.rounds, self.clock() + self.settings.timeout_s,
                       lambda: set(self.secure.protected) <= self._final_asked)

    def step(self, transport: PeerTransport) -> bool:
        """One round; False if a stop request interrupted the wait."""
        started = time.perf_counter()
        wanted = self.round
        waiting_since = self.clock()
        deadline = max(waiting_since + self.settings.timeout_s, self._startup_deadline)
        received = self._gather(transport, wanted, deadline)
        if self.stop.is_set():
            return False
        self._count_missing(received, deadline - waiting_since)
        lost = dropped(self.settings.loss_seed, wanted + 1, len(self.settings.peers), self.settings.loss)
        for peer in [peer for peer in received if lost[self.settings.peers.index(peer)]]:
            del received[peer]  # an injected loss: missing, but not held against the neighbour's liveness
            self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
        if self.secure is not None and self.secure.receives_masked:
            aggregated = self._secure_average(transport, received, wanted)
            if self.stop.is_set():
                return False
        else:
            aggregated = peer_average(self.stats, [m.stats for m in received.values()], rule=self.settings.aggregate)
        aggregated, self.stats, self.memory = self._calibrate(aggregated, wanted)
        if self.settings.acceleration.keeps_aggregate:
            self.aggregated = aggregated
        self.round += 1
        loss = soft_zero_one(self.model.posteriors(self.model.theta(self.stats), self.phi), self.y)
        self.metrics.rounds_done = self.round
        self.metrics.soft_loss.append(loss)
        if self.round < self.settings.rounds:
            self._send(transport)
        self.metrics.round_ms.append(1000 * (time.perf_counter() - started))
        self._count_refused(transport)
        self._checkpoint()
        self.log.info("round %d: %d/%d neighbours, local soft 0-1 loss %.4f", self.round, len(received),
                      len(self.settings.peers), loss)
        return True

    def _wait_for_start(self, transport: PeerTransport) -> None:
        """Until ``start_at`` (or a stop request), keep what arrives for the first rounds."""
        if self.settings.start_at is not None:
            begin = self.clock() + max(0.0, self.settings.start_at - time.time())
            if begin > self.clock():
                self.log.info("waiting %.3f s for the start at %.3f", begin - self.clock(), self.settings.start_at)
            self._wait(transport, 0, begin, lambda: self.clock() >= begin)

    def _count_refused(self, transport: PeerTransport) -> None:
        """The metrics' refused connections: those of earlier runs (a resumed checkpoint's) plus the transport's."""
        now = transport.refused()
        self.metrics.refused = {cause: self._refused_before.get(cause, 0) + now.get(cause, 0)
                                for cause in sorted({*self._refused_before, *now})}

    def run(self, transport: PeerTransport) -> bool:
        """Run the remaining rounds over ``transport``; True if all were done, False if stopped early.

        The peer owns ``transport`` from here on: it closes it when it returns or raises, letting queued
        statistics leave for ``final_linger_ms`` after the last round, at once after a stop or an error.
        A checkpoint of the last completed round is written in every case.
        """
        finished = False
        try:
            if self.round == 0:  # a fresh run: the neighbours may still be starting
                self._wait_for_start(transport)
                self._startup_deadline = self.clock() + self.settings.first_round_timeout_s
            self.log.info("listening on %s, %d neighbours, starting at round %d", self.settings.bind,
                          len(self.settings.peers), self.round)
            if self.round < self.settings.rounds and not self.stop.is_set():
                self._send(transport)  # our statistics of the round we start from
            while self.round < self.settings.rounds:
                if not self.step(transport):
                    break
            finished = self.round >= self.settings.rounds
            if finished and self.secure is not None:
                self._serve_final(transport)
        finally:
            for peer, since in self._down_since.items():  # still down at the end
                self.metrics.downtime_s[peer] = self.metrics.downtime_s.get(peer, 0.0) + self.clock() - since
            try:
                self._count_refused(transport)
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
