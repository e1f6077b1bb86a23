"""A peer of a vertical group (DESIGN.md, "Peers"; docs/how-to/vertical-data.md): its block's statistics, the
group's round driver over the network, its checkpoint.

A vertical group of K peers holds the same instances, peer b the features of block b; one of them, the label holder
(``crc.nodes.label_holder``), also holds the labels, the others are its members (``crc.nodes.group_member``).

Setup: the label holder aligns the group's instances by a private set intersection (``crc.nodes.alignment``):
"psi-request" to every member, a "psi-answer" from each, then "psi-ids", the group's ids sorted; every peer orders its
rows by them, dropping (and counting) the rows whose id is not held by every member. Then the round-0 "weights", the
one-hot labels, from which every peer computes its start: its block's ML statistics scaled to the ESS.

Pass t = 1 .. T + 1 (T = the rounds): every member sends its block's "scores" of its current statistics; the label
holder adds them to its own and the log-prior, computes the posteriors, the soft 0-1 loss of the iterate just scored
and the weights ``Y - P``, and sends "weights" (t) {W, best: whether that iterate is the best so far}; every peer
keeps a copy of its statistics if best, then adds ``W^T phi_b`` (``crc.nodes.block_steps``), writes its checkpoint
and goes on. Pass T + 1 only scores: its weights carry no W. Each peer ends with its block's best statistics: the
group's classifier is their join, centralized RC of the block product with RC's choice of the iterate.

A mixture of block products first runs EM (``BlockSteps.em_passes`` E passes, ``crc.nodes.block_steps``): passes 1 .. E
are as above, but the label holder's weights are the responsibilities ``Y q`` and every peer's block statistics
become ``W^T phi_b``; after pass E they are scaled to the ESS, the start, and RC's passes are E + 1 .. E + T + 1.

In a hybrid partition (``block_neighbours`` given) every round t first averages the block's statistics with the
peers holding the same block in the neighbouring groups (``crc.nodes.block_gossip``), and the pass starts from that
average: the scores are the average's, and the step adds ``W^T phi_b`` to it. There is no choice of the best iterate
(the simulator's hybrid groups run CRC), so no last scoring pass either: each peer ends with its last statistics.

A peer resumed from its checkpoint finds that what the others had sent its last process died with it: a member asks
its label holder again by sending the scores of the pass it resumed at (answered by that pass's weights); a label
holder tells its members the pass whose scores it awaits, and in a hybrid partition every peer tells its block
neighbours the round whose statistics it awaits (a ``resumed`` notice, ``announce``). Each sends it again, once, the
very frames of that pass or round and later it still holds (``crc.nodes.resend``): a member its scores (masked ones
as the same words), a block neighbour its statistics. Before, they came only when the others' waits ran out.

The peer is a state machine driven by ``begin``, ``receive`` (a frame) and ``expire`` (its ``deadline`` passed),
each returning the frames to send; ``run`` drives it over a PeerTransport, and tests drive a whole group in one
thread. Every wait is bounded: the rounds' waits are ``Liveness``'s, and a peer silent for ``down_after`` of them
stops the group (``GroupStopped``, exit status 3): a vertical group needs every block each round.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from crc.core.acceleration import PAPER
from crc.core.calibration import DEFAULT_LR
from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.plausibility import problem
from crc.core.threads import single_threaded_blas
from crc.nodes.alignment import rows_in_order
from crc.nodes.block_gossip import BlockGossip
from crc.nodes.block_steps import BlockSteps
from crc.nodes.liveness import Liveness
from crc.nodes.metrics import Metrics
from crc.nodes.peer_checkpoint import PeerCheckpoints, PeerState
from crc.nodes.resend import Resends
from crc.nodes.score_masks import ScoreMasks
from crc.nodes.settings import PeerSettings
from crc.nodes.transport import PeerTransport
from crc.nodes.vertical_wire import GroupExpectation, decode_group, encode_group
from crc.nodes.wire import Message, Rejected, Resumed, check_statistics, encode_resumed

Outgoing = list[tuple[str, bytes]]
"""Frames to send: (address, frame) pairs."""


class Frame(bytes):
    """A frame this peer encoded, with what it is for the metrics (``bytes_by_kind``): its message type, ``start``
    for the round-0 weights (the labels) and a mixture's EM passes."""

    kind: str


class GroupStopped(CRCError):
    """A peer of the group stayed silent for ``down_after`` waits: the group cannot go on (exit status 3)."""


@dataclass
class BlockData:
    """A peer's rows as its file holds them: instance ids (n,), the block's feature map ``phi`` (n, k_b), and the class
    codes ``y`` (n,) for the label holder (None for a member); ``source`` names the file in messages."""

    ids: list[str]
    phi: np.ndarray
    y: np.ndarray | None = None
    source: str = "data"


@dataclass
class VerticalMetrics(Metrics):
    """A vertical peer's metrics: a peer's, and its alignment and retransmissions."""

    instances: int = 0
    """The group's instances (the ids every member holds)."""
    rows_dropped: int = 0
    """This peer's rows whose id not every member holds, left out."""
    scores_resent: int = 0
    """Member: scores sent again after a wait for the label holder's weights ran out (it may have restarted)."""
    weights_resent: int = 0
    """Label holder: weights sent again to a member that sent scores of a pass already answered (it restarted)."""
    repeats_ignored: int = 0
    """Frames that repeat one already taken (a retransmission), ignored."""
    messages_by_kind: dict = field(default_factory=dict)
    bytes_by_kind: dict = field(default_factory=dict)
    """Frames and bytes sent, by message type (``start``: the round-0 weights): the set-up's apart from the passes'."""


class VerticalPeer:
    """The part of a vertical group's peer that both roles share: its block, its rows, its statistics and checkpoint.

    ``model`` is the group's block model, ``block`` the one this peer holds; ``settings.peers`` are the other members
    of the group and ``settings.rounds`` the rounds T. ``ess``: the ESS m0, None for m / ``lr`` once the group's m
    instances are known. ``block_neighbours``: a hybrid partition's peers holding the same block in the neighbouring
    groups (None: a vertical partition); a hybrid peer needs ``ess``, the same on every peer. ``masks``: the members
    send their scores masked, the label holder decodes only their sum (a vertical group of three peers or more).

    ``run`` keeps BLAS on one thread: a pass's products are of every instance of the group but short ((m, r) by
    (m, k_b)), and a threaded BLAS on a busy machine stalled them (marketing, vertical:3, 5157 instances, three peers
    on two busy cores: 132 to 355 ms a pass, against 10 to 18 ms on one thread), as ``crc launch``'s peers already ran.
    """

    role = ""

    def __init__(self, model: GenerativeModel, block: int, data: BlockData, settings: PeerSettings, *,
                 ess: float | None = None, lr: float = DEFAULT_LR, block_neighbours: tuple[str, ...] | None = None,
                 masks: ScoreMasks | None = None, clock: Callable[[], float] = time.monotonic,
                 log: logging.Logger | None = None):
        self.steps = BlockSteps(model, block)
        self.model, self.block, self.data, self.settings = model, block, data, settings
        self.ess_option, self.lr, self.clock = ess, lr, clock
        self.log = log or logging.getLogger("crc.node")
        self.expect = GroupExpectation(run=settings.run, schema_id=model.schema_id, neighbours=frozenset(settings.peers),
                                       rows=len(data.ids), width=self.steps.width, known_keys=settings.known_keys,
                                       block_neighbours=frozenset(block_neighbours or ()))
        self.hybrid = block_neighbours is not None
        self.masks = masks
        """Secure aggregation of the members' scores (``crc.nodes.score_masks``); None: scores in the clear."""
        if masks is not None and (self.hybrid or len(settings.peers) < 2):
            raise CRCError("secure aggregation of the scores needs a vertical group with two members or more besides "
                           "the label holder (vertical:3 or more): with one, their sum is its scores")
        self.em_passes = self.steps.em_passes
        self.passes = self.em_passes + (settings.rounds if self.hybrid else settings.rounds + 1)
        self.metrics = VerticalMetrics.for_neighbours((*settings.peers, *(block_neighbours or ())))
        self.gossip: BlockGossip | None = None
        if self.hybrid:
            if ess is None:
                raise CRCError("a peer of a hybrid partition needs the ESS (--ess), the same on every peer")
            self.gossip = BlockGossip(self.steps.part, tuple(block_neighbours), ess=ess, settings=settings,
                                      rounds=settings.rounds, clock=clock, metrics=self.metrics, log=self.log)
        self.liveness: Liveness | None = None
        self.resends = Resends(self.log, what="scores", unit=("pass", "passes"))
        """The frames this peer sent its group lately (a member's scores), for a label holder that restarted."""
        self.pass_: int | None = None
        """Passes completed: 0 after the start, t after pass t; None before the group is aligned."""
        self.rows: np.ndarray | None = None
        """This peer's rows (m,) in the group's order."""
        self.phi = self.y = self.stats = self.best = None
        self.aggregated: np.ndarray | None = None
        """What the coming pass starts from (size,): the statistics, or in a hybrid partition their average with the
        block neighbours' (None while that is awaited)."""
        self.ess = math.nan
        self.best_iterate = 0
        """The iterate ``best`` holds: 0 for the start, t after pass t's step."""
        self.done = False
        self.group_deadline = math.inf
        """When the wait for the group (the label holder, or the members) runs out, on ``clock``."""
        self.stop = threading.Event()
        self._waiting_since = math.nan
        self._pass_started = time.perf_counter()
        self._logged_causes: set[str] = set()
        self._full_queues: set[str] = set()
        """Addresses whose queue was full at the last frame for them (logged once until it takes frames again)."""
        self.checkpoints = PeerCheckpoints(settings.checkpoint_dir, self.identity, PAPER, self.log, masked=masks is not None)
        self.resumed = self._resume()
        self._refused_before = dict(self.metrics.refused)

    # ------------------------------------------------------------------------------------------------ the driver

    def run(self, transport: PeerTransport) -> bool:
        """Run the group's remaining passes over ``transport`` (closed on return); True if all were done, False if a
        stop request came first. A setup that cannot go on raises CRCError; a silent peer GroupStopped."""
        finished = False
        try:
            with single_threaded_blas():  # see the class docstring
                self._deliver(transport, self.begin())
                while not self.done and not self.stop.is_set():
                    for frame, key in transport.receive(self.deadline):
                        self._deliver(transport, self.receive(frame, key))
                        if self.done or self.stop.is_set():
                            break
                    if not self.done and not self.stop.is_set() and self.clock() >= self.deadline:
                        self._deliver(transport, self.expire())
            finished = self.done
        finally:
            for liveness in (self.liveness, self.gossip and self.gossip.liveness):
                if liveness is not None:
                    liveness.close()
            self.metrics.count_refused(self._refused_before, transport.refused())
            self._save()
            # After a setup error too, the frames already queued leave: a label holder that stops on a second label
            # holder's request lets its own request reach it, so that both stop with the same line.
            transport.close(0 if self.stop.is_set() else self.settings.final_linger_ms)
        return finished

    def _deliver(self, transport: PeerTransport, frames: Outgoing) -> None:
        """Queue ``frames``; a frame for a full queue is dropped and counted, and the full queue logged once while it
        stays full (a member that floods its label holder with requests and reads nothing fills it for good)."""
        for address, frame in frames:
            if transport.send_to(address, frame):
                if address in self._full_queues:
                    self._full_queues.discard(address)
                    self.log.info("queue to %s takes frames again", address)
                self.metrics.count_sent(1, len(frame))
                kind = getattr(frame, "kind", "other")
                self.metrics.messages_by_kind[kind] = self.metrics.messages_by_kind.get(kind, 0) + 1
                self.metrics.bytes_by_kind[kind] = self.metrics.bytes_by_kind.get(kind, 0) + len(frame)
            else:
                self.metrics.send_dropped += 1
                self.log.log(logging.DEBUG if address in self._full_queues else logging.WARNING,
                             "queue to %s full: a frame was not sent%s", address,
                             "" if address in self._full_queues else " (logged again once it takes frames again)")
                self._full_queues.add(address)

    def receive(self, frame: bytes, key: str | None) -> Outgoing:
        """Decode a frame and take it; a rejection is counted by cause (and logged once per cause). Only a frame that
        is news keeps its sender from being marked down: one that repeats (ignored, or answered again) does not, nor
        does a resumed notice (it asks for frames again and brings nothing of a pass), or a peer that asks for the
        same weights, or tells it resumed, forever would hold the group forever."""
        repeats = self.metrics.repeats_ignored + self.metrics.weights_resent
        try:
            try:
                message = decode_group(frame, self.expect, key)
            except Rejected as rejection:
                if rejection.cause != "type" or self.gossip is None:
                    raise
                message = self.gossip.decode(frame, key)  # a block neighbour's statistics
            if isinstance(message, Message):
                frames = self._take_statistics(message)
            elif isinstance(message, Resumed):
                frames = self._on_resumed(message)
            else:
                frames = self.handle(message)
        except Rejected as rejection:
            self._reject(rejection)
            return []
        news = self.metrics.repeats_ignored + self.metrics.weights_resent == repeats and not isinstance(message, Resumed)
        if news and self.liveness is not None and message.sender in self.liveness.peers:
            self.liveness.heard(message.sender)  # alive: a member is marked down only after rounds of silence
        self.metrics.messages_received += 1
        self.metrics.bytes_received += len(frame)
        return frames

    def _on_resumed(self, notice: Resumed) -> Outgoing:
        """A member or a block neighbour resumed from its checkpoint: what it lost that this peer still holds, sent
        again (``crc.nodes.resend``). A notice is no sign of progress: a block neighbour that sends nothing else is
        marked down as a silent one is, or every round would wait its timeout for it."""
        block = self.gossip is not None and notice.sender in self.gossip.neighbours
        if not block:
            self.check_notice(notice)
        resends = self.gossip.resends if block else self.resends
        frames = [(notice.sender, frame) for frame in resends.answer(notice)]
        self.metrics.frames_resent += len(frames)
        return frames

    def announce(self, members: tuple[str, ...]) -> Outgoing:
        """After a resume: a ``resumed`` notice to ``members`` with the pass whose scores this peer awaits, and in a
        hybrid partition past the EM passes to the block neighbours with the round whose statistics it awaits; they
        send again what they sent its last process of it and later."""
        def notice(round_: int) -> Frame:
            frame = Frame(encode_resumed(run=self.settings.run, sender=self.settings.bind, round_=round_))
            frame.kind = "resumed"
            return frame

        block = self.gossip.neighbours if self.gossip is not None and self.pass_ >= self.em_passes else ()
        told = [(peers, f"{who} ({unit} {round_})", round_) for peers, who, unit, round_ in (
            (members, "its members", "pass", self.pass_ + 1),
            (block, "its block neighbours", "round", self.pass_ - self.em_passes)) if peers]
        if told:
            self.log.info("told %s where it resumed: they send again what they sent its last process",
                          " and ".join(whom for _, whom, _ in told))
        return [(peer, notice(round_)) for peers, _, round_ in told for peer in peers]

    def _reject(self, rejection: Rejected) -> None:
        self.metrics.count_rejected(rejection.cause)
        level = logging.WARNING if rejection.cause not in self._logged_causes else logging.DEBUG
        self._logged_causes.add(rejection.cause)
        self.log.log(level, "rejected message (%s) from %s: %s", rejection.cause, rejection.sender or "unknown sender",
                     rejection.detail)

    @property
    def deadline(self) -> float:
        """When ``expire`` is due, on ``clock``: the group's wait, or a hybrid peer's wait for its block neighbours."""
        awaiting = self.gossip is not None and self.gossip.awaiting
        return min(self.group_deadline, self.gossip.deadline) if awaiting else self.group_deadline

    def expire(self) -> Outgoing:
        """The ``deadline`` passed: the block neighbours' wait (their average is what arrived), or the group's."""
        frames = []
        if self.gossip is not None and self.gossip.awaiting and self.clock() >= self.gossip.deadline:
            self.aggregated = self.gossip.average(self.stats)
            frames += self.proceed()
        if self.clock() >= self.group_deadline:
            frames += self.expire_group()
        return frames

    # ------------------------------------------------------------------------------------- what the roles define

    def begin(self) -> Outgoing:
        """The first frames of a run (fresh or resumed)."""
        raise NotImplementedError

    def handle(self, message) -> Outgoing:
        """Take a decoded message of the group; raise Rejected if it does not fit."""
        raise NotImplementedError

    def proceed(self) -> Outgoing:
        """Do what the role can now (its statistics to start the pass from may have come)."""
        raise NotImplementedError

    def expire_group(self) -> Outgoing:
        """The wait for the group ran out."""
        raise NotImplementedError

    def check_notice(self, notice: Resumed) -> None:
        """Raise Rejected unless the member ``notice.sender`` may tell this peer that it resumed: only a label holder
        tells its members (a member asks its label holder again by its scores)."""
        raise NotImplementedError

    def _role_vector(self) -> list:
        """What the role adds to the checkpoint's vector."""
        raise NotImplementedError

    def _restore_role(self, vector: np.ndarray) -> None:
        raise NotImplementedError

    def _role_size(self) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------ the group's rows

    def align(self, group_ids: list[str]) -> None:
        """Order this peer's rows by the group's ids (an AlignmentError if it names one this peer does not hold); the
        rows of other ids are dropped and counted."""
        self._use_rows(np.array(rows_in_order(self.data.ids, group_ids, self.data.source), dtype=np.int64))
        dropped = len(self.data.ids) - len(self.rows)
        self.log.log(logging.WARNING if dropped else logging.INFO,
                     "aligned: the group holds %d instances; %d of this peer's %d rows dropped (ids not held by every "
                     "member)", len(self.rows), dropped, len(self.data.ids))

    def _use_rows(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.phi = self.data.phi[rows]
        self.y = None if self.data.y is None else self.data.y[rows]
        self.ess = float(self.ess_option or len(rows) / self.lr)
        self.metrics.instances, self.metrics.rows_dropped = len(rows), len(self.data.ids) - len(rows)

    def start(self, labels: np.ndarray) -> None:
        """Pass 0: the block's ML statistics of the group's one-hot ``labels`` (m, r) scaled to the ESS (a mixture: its
        EM start); the best iterate so far."""
        self.stats = self.steps.em_start() if self.em_passes else self.steps.start(self.phi, labels, self.ess)
        self.best, self.best_iterate = self.stats.copy(), 0

    def advance(self, t: int, weights: np.ndarray | None, best: bool) -> None:
        """Pass ``t``: an EM pass (t <= E) makes the statistics ``W^T phi_b`` for ``weights`` (m, width), scaled to the
        ESS after the last; an RC pass keeps the iterate just scored if ``best`` (vertical), then adds ``weights``,
        unless None, to what the pass started from."""
        if t <= self.em_passes:
            stats = self.steps.em_step(self.phi, weights)
            if t == self.em_passes:
                stats = self.steps.scaled(stats, self.ess)
            self.stats = self._checked(stats, t)
            self.best, self.best_iterate = self.stats.copy(), t
            return
        stats = self.stats if weights is None else self._checked(self.steps.step(self.aggregated, self.phi, weights), t)
        if best and not self.hybrid:
            self.best, self.best_iterate = self.stats.copy(), t - 1
        self.stats = stats
        if self.hybrid:  # no choice of the iterate: the last one is the classifier
            self.best, self.best_iterate = self.stats, t

    @property
    def chosen_iterate(self) -> int | None:
        """RC's iterate ``best`` holds, counted in rounds (0: the start, after a mixture's EM passes; t: after round
        t); None in a hybrid partition, which keeps no best iterate (the last statistics are the classifier)."""
        return None if self.hybrid else max(self.best_iterate - self.em_passes, 0)

    def reached(self, pass_: int) -> str:
        """Where the group is after pass ``pass_``, in the rounds T it was given (not the passes: a mixture's EM passes
        come first, and a vertical group's pass T + 1 after them only scores the last iterate)."""
        rounds, done = self.settings.rounds, pass_ - self.em_passes
        if done < 0 or (done == 0 and self.em_passes):
            return f"EM pass {pass_} of {self.em_passes}"
        if done <= rounds:
            return f"round {done} of {rounds}"
        return f"round {rounds} of {rounds} and the last pass, which only scores"

    def _checked(self, stats: np.ndarray, t: int) -> np.ndarray:
        """The statistics (size,) after pass ``t``'s step, if a neighbour would take them (``crc.core.plausibility``);
        a Rejected with the cause otherwise, and nothing changes: weights chosen pass by pass can walk a block's
        statistics where no honest run goes (a class count below -m0), where its parameters stop being finite."""
        found = ("non-finite", "not finite") if not np.all(np.isfinite(stats)) else problem(
            stats, self.steps.part, self._ess_at(t))
        if found is not None:
            cause, detail = found
            raise Rejected(cause, f"pass {t}'s step would make block {self.block}'s statistics implausible ({detail})")
        return stats

    def next_round(self) -> Outgoing:
        """After a pass that was not the last: what the next one starts from. Vertical: the statistics. Hybrid: this
        block's statistics go to the block neighbours, and their average is awaited (it may be complete already)."""
        if self.gossip is None or self.pass_ < self.em_passes:  # EM passes stay within the group
            self.aggregated = self.stats
            return []
        self.aggregated = None
        round_ = self.pass_ - self.em_passes
        frames = self.gossip.send(self.stats, round_)
        self.gossip.await_round(round_)
        self._average_if_complete()
        return frames

    def _take_statistics(self, message: Message) -> Outgoing:
        self.gossip.take(message)
        self._average_if_complete()
        return self.proceed()

    def _average_if_complete(self) -> None:
        if self.aggregated is None and self.gossip.complete:
            self.aggregated = self.gossip.average(self.stats)

    def passed(self, t: int) -> None:
        """Pass ``t`` is complete: count it, write the checkpoint."""
        self.pass_ = t
        self.metrics.rounds_done = t
        now = time.perf_counter()
        self.metrics.round_ms.append(1000 * (now - self._pass_started))
        self._pass_started = now
        self._save()
        self.done = t >= self.passes

    def wait_from_now(self) -> None:
        """A new wait for the group begins: its deadline is Liveness's, and in a hybrid partition one timeout more (the
        other members may be waiting for their block neighbours)."""
        self._waiting_since = self.clock()
        extra = self.settings.timeout_s if self.hybrid and (self.pass_ or 0) >= self.em_passes else 0.0
        self.liveness.begin_round(0 if self.pass_ is None else self.pass_ + 1)
        self.group_deadline = self.liveness.deadline() + extra

    def waited(self) -> float:
        return self.clock() - self._waiting_since

    def frame(self, kind: str, round_: int, **fields) -> Frame:
        frame = Frame(encode_group(kind, run=self.settings.run, sender=self.settings.bind, round_=round_,
                                   schema_id=self.model.schema_id, **fields))
        starting = round_ <= self.em_passes and kind in ("weights", "scores", "masked-scores")  # labels, EM
        frame.kind = "start" if starting else kind
        return frame

    def new_liveness(self, peers: tuple[str, ...]) -> Liveness:
        return Liveness(peers, timeout_s=self.settings.timeout_s, first_round_timeout_s=self.settings.first_round_timeout_s,
                        down_after=self.settings.down_after, clock=self.clock, metrics=self.metrics, log=self.log)

    # ------------------------------------------------------------------------------------------------ checkpoints

    @property
    def identity(self) -> dict:
        """What a checkpoint must match to be resumed. Its ``rounds`` are the passes (in a vertical partition the
        rounds and the last, scoring-only pass), which bound the checkpoint's round."""
        s = self.settings
        found = {"bind": s.bind, "peers": sorted(s.peers), "rounds": self.passes, "run": s.run,
                 "schema_id": self.model.schema_id, "role": self.role, "block": self.block, "rows": len(self.data.ids),
                 "ess": self.ess_option, "lr": self.lr}
        if self.gossip is not None:
            found["block_neighbours"] = sorted(self.gossip.neighbours)
        if self.masks is not None:
            found["secure_aggregation"] = True
        return found

    def _vector(self) -> np.ndarray:
        """The checkpoint's vector: statistics, best statistics, best iterate, each own row's position in the group's
        order (-1: dropped), then the role's part."""
        positions = np.full(len(self.data.ids), -1.0)
        positions[self.rows] = np.arange(len(self.rows))
        return np.concatenate([self.stats, self.best, [self.best_iterate], positions, *self._role_vector()])

    def _vector_size(self) -> int:
        return 2 * self.steps.size + 1 + len(self.data.ids) + self._role_size()

    def _ess_at(self, pass_: int) -> float:
        """The ESS of the statistics after pass ``pass_``: a mixture's EM start has 1, its EM passes' statistics the
        group's instances; then the ESS m0."""
        if pass_ >= self.em_passes:
            return self.ess
        return 1.0 if pass_ == 0 else float(len(self.rows))

    def _save(self) -> None:
        if self.pass_ is not None:
            self.checkpoints.save(PeerState(self.pass_, self._vector()), self.metrics)

    def _resume(self) -> bool:
        """Continue from the checkpoint if there is one (True); one that does not hold what this peer writes is a
        CRCError."""
        found = self.checkpoints.load(PeerState(0, np.zeros(self._vector_size())))
        if found is None:
            return False
        state, metrics = found
        try:
            self._restore(state.round, state.stats)
            self.metrics = VerticalMetrics.from_json(metrics)
        except (CRCError, Rejected) as exc:
            raise CRCError(f"{self.settings.checkpoint_dir}: damaged checkpoint: {exc}") from None
        self.pass_, self.done = state.round, state.round >= self.passes
        self.log.info("resumed from checkpoint after %s", self.reached(self.pass_))
        return True

    def _restore(self, round_: int, vector: np.ndarray) -> None:
        size, n = self.steps.size, len(self.data.ids)
        stats, best, iterate = vector[:size], vector[size:2 * size], vector[2 * size]
        positions = vector[2 * size + 1:2 * size + 1 + n]
        held = np.flatnonzero(positions >= 0)
        order = positions[held]
        if not (np.all(positions == np.round(positions)) and np.all(positions >= -1) and held.size
                and np.array_equal(np.sort(order), np.arange(held.size))):
            raise CRCError("the rows' positions in the group's order are not a permutation")
        if not (iterate == round(iterate) and 0 <= iterate <= round_):
            raise CRCError(f"best iterate {iterate!r} out of range")
        rows = np.empty(held.size, dtype=np.int64)
        rows[order.astype(np.int64)] = held
        self._use_rows(rows)
        for part in (stats, best):
            check_statistics(part, self.steps.part, self._ess_at(round_))
        self.stats, self.best, self.best_iterate = stats.copy(), best.copy(), int(iterate)
        self._restore_role(vector[2 * size + 1 + n:])
