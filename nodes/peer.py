"""One real peer: the CRC round driver over the network (DESIGN.md, "Peers").

Round t reads like the algorithm (``Peer.step``): wait for the neighbours' round t-1 statistics, average the
closed neighbourhood, run the local step, send the round-t statistics, write a checkpoint. The duties around it
are rooms of their own, each tested on its own:

* ``Liveness`` (``crc.nodes.liveness``): which neighbours a round waits for, until when (waiting notices); who is
  down;
* ``Inbox`` (``crc.nodes.inbox``): what arrived early, kept for its round, bounded; stale frames refused;
* ``Resends`` (``crc.nodes.resend``): the last rounds' frames sent, sent again once to a neighbour that restarted;
* ``SecureAggregationSession`` (``crc.nodes.secure_session``): masking, unmasking requests, reveals;
* ``Release`` (``crc.nodes.release``): differential-privacy noise, and a research Byzantine peer's poison;
* ``PeerCheckpoints`` (``crc.nodes.peer_checkpoint``): what a checkpoint holds and its writing every round;
* ``Metrics`` (``crc.nodes.metrics``): the counts a peer reports.

A peer left behind (restarted, started late) uses what its neighbours queued for it round by round, and skips ahead
to their round where nothing more will come for its own (``Peer._catch_up``); resumed from its checkpoint, it first
tells its neighbours the round it resumed at, and they send it again what they had sent its last process. Anything
invalid is rejected, counted by cause and never touches the statistics. The network is a PeerTransport given to
``Peer.run``, which closes it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from crc.core import acceleration
from crc.core.aggregation import count_index, peer_average
from crc.core.calibration import soft_zero_one
from crc.core.errors import CRCError
from crc.core.loss import dropped
from crc.core.models.base import GenerativeModel, labelled_weights
from crc.core.plausibility import count_slack
from crc.core.privacy import is_release
from crc.core.screening import better_than_chance
from crc.core.threads import single_threaded_blas
from crc.nodes.inbox import Inbox
from crc.nodes.liveness import Liveness
from crc.nodes.metrics import Metrics
from crc.nodes.peer_checkpoint import PeerCheckpoints, PeerState, identity, kept_links
from crc.nodes.release import Release
from crc.nodes.resend import Resends
from crc.nodes.settings import PeerSettings
from crc.nodes.transport import PeerTransport
from crc.nodes.wire import (
    Agree,
    Confirm,
    Decline,
    Expectation,
    Masked,
    Message,
    Rejected,
    Resumed,
    Reveal,
    SumFrame,
    Unmask,
    Waiting,
    check_statistics,
    decode,
    encode,
    encode_resumed,
    encode_sum_frame,
    encode_waiting,
)


class Peer:
    """A CRC peer with its local data ``phi`` (m, k), ``y`` (m,) and equivalent sample size ``ess``.

    ``run`` keeps BLAS on one thread, as a vertical peer's does: a round's products are short, and a threaded BLAS on a
    busy machine stalled them (letter, two ``crc node`` peers of 6,000 instances of ``crc split``, 32 rounds, two busy
    cores: a round's median 386 ms, against 31 ms on one thread); ``crc launch``'s peers already ran so.
    """

    def __init__(self, model: GenerativeModel, phi: np.ndarray, y: np.ndarray, *, ess: float, settings: PeerSettings,
                 log: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.model, self.phi, self.y, self.ess, self.settings = model, phi, y, float(ess), settings
        self.log = log or logging.getLogger("crc.node")
        self.weights = labelled_weights(y, model.n_classes)
        masked = settings.secure_aggregation is not None
        self.expect = Expectation(run=settings.run, schema_id=model.schema_id, ess=self.ess, size=model.size,
                                  neighbours=frozenset(settings.peers), model=model, known_keys=settings.known_keys,
                                  secure_aggregation=masked,
                                  roster=None if settings.network is None else settings.network.digest,
                                  roster_size=0 if settings.network is None else len(settings.network.keys),
                                  count_slack=count_slack(model, None if settings.privacy is None else settings.privacy.sigma))
        self.counts = count_index(model)
        self.round, self.metrics, self.memory = 0, Metrics.for_neighbours(settings.peers), None
        self.aggregated: np.ndarray | None = None  # the last aggregate: the ``aggregate`` classifier, the momentum memory
        self.links = kept_links(settings, model)  # the neighbours whose last heard statistics are kept (``_averaged``)
        self.heard: dict[str, np.ndarray] = {}  # the last statistics received from each of them
        self.average: np.ndarray | None = None  # the running average of the statistics: the ``averaged`` classifier
        self.stats = acceleration.start_statistics(model, settings.acceleration, self.ess, phi, y)
        problem = self._own_problem(self.stats)
        if problem is not None:
            raise CRCError(f"the starting statistics from this peer's data would be rejected by its neighbours ({problem})")
        self.sealed: bytes | None = None  # network sum: the seal of the last total taken (None before the first)
        self.checkpoints = PeerCheckpoints(settings.checkpoint_dir, self.identity, settings.acceleration, self.log,
                                           self.links, settings.release_every, private=settings.privacy is not None,
                                           masked=settings.secure_aggregation is not None,
                                           network=settings.network is not None)
        self.resumed = self._resume()  # whether it resumed from a checkpoint
        self.release = Release(model, privacy=settings.privacy, attack=settings.attack, bind=settings.bind,
                               hoods=settings.closed_neighbourhoods(),
                               noise_key=None if settings.privacy is None else self.checkpoints.noise_key(resumed=self.resumed))
        self.session = self.network = None
        if settings.network is not None:
            from crc.nodes.network_sum import NetworkSum

            self.network = NetworkSum(settings.bind, settings.run, settings.network, settings.secure_aggregation.secret_key,
                                      window=settings.window_rounds, rounds=settings.rounds)
        elif masked:  # imported only here: secure aggregation's cryptography takes a while to import
            from crc.nodes.secure_session import SecureAggregationSession

            self.session = SecureAggregationSession(settings.bind, settings.run, settings.peers, settings.secure_aggregation,
                                                    rounds=settings.rounds, metrics=self.metrics, log=self.log,
                                                    dropouts=settings.privacy.dropouts if self.release.distributed else None,
                                                    colluders=settings.colluders,
                                                    resumed=self.round if self.resumed else None)
        self.liveness = Liveness(settings.peers, timeout_s=settings.timeout_s,
                                 first_round_timeout_s=settings.first_round_timeout_s, down_after=settings.down_after,
                                 clock=clock, metrics=self.metrics, log=self.log)
        self.inbox = Inbox(rounds=settings.rounds, window=settings.window_rounds,
                           masked=self.session is not None and self.session.receives_masked)
        self.resends = Resends(self.log)
        self.stop = threading.Event()
        self._pending: deque[tuple[bytes, str | None]] = deque()  # frames received but not yet handled (one batch at most)
        self._logged_causes: set[str] = set()
        self._unmask_streak = 0  # rounds in a row, up to the last, whose neighbourhood sum could not be unmasked
        self._sums_in_a_row = math.inf  # network sum: rounds in a row, up to the last, that released the sum
        self._silent = dict.fromkeys(settings.peers, 0)  # network sum: rounds in a row each neighbour sent nothing
        self._first_wait_pending = False  # network sum: the first round of a fresh run waits for the start-up too
        self._full_queues: set[str] = set()  # neighbours whose queue was full at the last send (a dead one's stays full)
        self._refused_before = dict(self.metrics.refused)

    @property
    def identity(self) -> dict:
        """What a checkpoint must match to be resumed."""
        return identity(self.settings, schema_id=self.model.schema_id, ess=self.ess, instances=int(len(self.y)),
                        last_heard=bool(self.links))

    @property
    def state(self) -> PeerState:
        """Where the peer is: what its checkpoint holds."""
        return PeerState(self.round, self.stats, self.aggregated, self.memory, self.heard, self.average, self.sealed)

    @property
    def trained_alone(self) -> bool:
        """Whether nothing of the others reached this peer's statistics: no neighbour's statistics in the whole run,
        or under a network sum no round's sum released."""
        if self.network is not None:
            return self.metrics.rounds_done - self.metrics.unmask_fallbacks - self.metrics.rounds_skipped <= 0
        return self.metrics.messages_received == 0

    @property
    def classifier_stats(self) -> np.ndarray:
        """The statistics of this peer's classifier (size,): its own, its last aggregate, or its own with the
        category counts of their running average (``acceleration.classifier_statistics``)."""
        return acceleration.classifier_statistics(self.model, self.settings.acceleration, self.stats, self.aggregated,
                                                  self.average)

    # ------------------------------------------------------------------------------------------- the round driver

    def run(self, transport: PeerTransport) -> bool:
        """Run the remaining rounds over ``transport``; True if all were done, False if stopped early.

        The peer owns ``transport`` from here on: it closes it when it returns or raises, letting queued
        statistics leave for ``final_linger_ms`` after the last round, at once after a stop or an error.
        A checkpoint of the last completed round is written in every case.
        """
        finished = False
        try:
            with single_threaded_blas():  # see the class docstring
                finished = self._run_rounds(transport)
        finally:
            self.liveness.close()
            try:
                self._count_refused(transport)
                self.checkpoints.save(self.state, self.metrics)
            finally:
                transport.close(self.settings.final_linger_ms if finished else 0)
        if not finished:
            if self.settings.checkpoint_dir:
                self.log.info("stopped at round %d; checkpoint written to %s", self.round, self.settings.checkpoint_dir)
            else:
                self.log.info("stopped at round %d; no checkpoint (no checkpoint directory): a restart begins at round 0",
                              self.round)
        return finished

    def _run_rounds(self, transport: PeerTransport) -> bool:
        """``run``'s rounds: the start, the rounds left, the last round's unmaskings; True if all were done."""
        fresh = self.round == 0  # the neighbours may still be starting
        if fresh:
            self._wait_for_start(transport)
        self.liveness.start_run(fresh=fresh)
        self.log.info("listening on %s, %d neighbours, starting at round %d%s", self.settings.bind,
                      len(self.settings.peers), self.round, self._first_wait(fresh))
        self._first_wait_pending = fresh
        if self.round < self.settings.rounds and not self.stop.is_set():
            if fresh and self.checkpoints.guarded:  # killed after its first send, it resumes at round 0 (``_send``)
                self.checkpoints.save(self.state, self.metrics, before_send=True)
            self._send(transport)  # our statistics of the round we start from (a network sum's go up in ``step``)
        if self.resumed and (self.round < self.settings.rounds or self.session is not None) and not self.stop.is_set():
            self._announce(transport)  # after the last round, for secure aggregation's sake (``_announce``)
        while self.round < self.settings.rounds:
            if not self.step(transport):
                break
        finished = self.round >= self.settings.rounds
        if finished and self.session is not None:
            self._serve_final(transport)
        return finished

    def step(self, transport: PeerTransport) -> bool:
        """One round; False if a stop request interrupted the wait."""
        started = time.perf_counter()
        wanted = self.round
        gathered = (self._network_average if self.network is not None else self._neighbourhood_average)(transport, wanted)
        if gathered is None:  # stopped, or skipped ahead to the neighbours' round
            return not self.stop.is_set()
        aggregated, restart, heard = gathered
        aggregated, self.stats, self.memory = self._calibrate(aggregated, wanted, restart)
        if self.settings.acceleration.keeps_aggregate:
            self.aggregated = aggregated
        self.round += 1
        if self.settings.acceleration.keeps_average:
            self.average = acceleration.running_average(self.average, self.stats, self.round)
        loss = self._local_loss()
        self.metrics.rounds_done = self.round
        if loss is not None:
            self.metrics.soft_loss.append(loss)
        self.metrics.round_ms.append(1000 * (time.perf_counter() - started))
        self._count_refused(transport)
        self.checkpoints.save(self.state, self.metrics, before_send=True)  # see ``_send``
        if self.round < self.settings.rounds:
            self._send(transport)
        self.log.info("round %d: %s%s", self.round, heard, "" if loss is None else f", local soft 0-1 loss {loss:.4f}")
        return True

    def _neighbourhood_average(self, transport: PeerTransport, wanted: int
                               ) -> tuple[np.ndarray, np.ndarray | None, str] | None:
        """(the closed neighbourhood's average, exact diffusion's restart, what was heard, for the log) of round
        ``wanted``; None if a stop request interrupted the wait or the peer skipped ahead (``_catch_up``)."""
        self.liveness.begin_round(wanted)
        received = self._gather(transport, wanted)
        if self.stop.is_set():
            return None
        if not received and self._catch_up(transport):
            return None
        self.liveness.end_round(received)
        restart = self._unsettled()
        heard = f"{len(received)}/{len(self.settings.peers)} neighbours"
        lost = self._drop_injected_losses(received, wanted)
        if self.session is not None and self.session.receives_masked:
            aggregated = self._secure_average(transport, received, wanted)
            return None if self.stop.is_set() else (aggregated, restart, heard)
        aggregated = peer_average(self.release.with_share(self.stats, self.settings.bind, wanted),
                                  self._averaged(received, lost), rule=self.settings.aggregate,
                                  counts=self.counts, admit=self._admit)
        return aggregated, restart, heard

    def _unsettled(self) -> np.ndarray | None:
        """Exact diffusion: True (a 0-d array) while this peer's neighbourhood is unsettled, i.e. some neighbour's
        statistics were missing in one of the last ``SETTLE_ROUNDS`` rounds (this one included): the round then
        restarts the correction (the paper's round), and exact diffusion resumes once every neighbour has been heard
        that many rounds in a row (``crc.core.acceleration``, "A real peer's neighbourhood"). A message the injected
        ``--loss`` drops does not count (as in the simulator). None: no restart."""
        unsettled = self.liveness.complete_rounds < acceleration.SETTLE_ROUNDS
        return np.array(True) if unsettled and self.settings.acceleration.exact_diffusion else None

    def _admit(self, rows: np.ndarray, messages: np.ndarray) -> np.ndarray:
        """``screened``'s test of received statistics (E, size) on this peer's data (``rows``: all this peer)."""
        return better_than_chance(self.model, messages, self.phi[None], self.weights[None])

    def _local_loss(self) -> float | None:
        """The soft 0-1 loss of this round's statistics on the local data, for the metrics and the log; None under
        differential privacy: computed on the raw private data without noise, it would be a release the accountant
        does not count (the model file, the log and the metrics endpoint carry only what the guarantee covers)."""
        if self.settings.privacy is not None:
            return None
        return soft_zero_one(self.model.posteriors(self.model.theta(self.stats), self.phi), self.y)

    # ------------------------------------------------------------------------- waiting for the neighbours' frames

    def _first_wait(self, fresh: bool) -> str:
        """What the first round waits for, for the log: a silent minute reads as a hang."""
        if not fresh or not self.settings.peers:
            return ""
        return (f"; the first round waits up to {self.settings.first_round_timeout_s:g} s for the neighbours' "
                f"statistics (--first-round-timeout)")

    def _wait_for_start(self, transport: PeerTransport) -> None:
        """Until ``start_at`` (or a stop request), keep what arrives for the first rounds."""
        if self.settings.start_at is not None:
            begin = self.clock() + max(0.0, self.settings.start_at - time.time())
            if begin > self.clock():
                self.log.info("waiting %.3f s for the start at %.3f", begin - self.clock(), self.settings.start_at)
            self._wait(transport, 0, lambda: begin, lambda: self.clock() >= begin)

    def _gather(self, transport: PeerTransport, wanted: int) -> dict[str, Message | Masked]:
        """Neighbours' statistics of round ``wanted``: all of those awaited, or what arrived before the round's
        deadline (``Liveness.deadline``). With every neighbour down, frames already waiting are still read (without
        waiting)."""
        drain = self.liveness.all_down
        now = self.clock()
        until = (lambda: now) if drain else self.liveness.deadline
        self._wait(transport, wanted, until, lambda: not drain and self.inbox.complete(wanted, self.liveness.awaited(wanted)),
                   notify=not drain)
        return self.inbox.take(wanted)

    def _wait(self, transport: PeerTransport, wanted: int, until: Callable[[], float], done: Callable[[], bool], *,
              notify: bool = False) -> None:
        """Handle frames (for round ``wanted`` and early ones) until ``done()``, a stop request or the deadline
        ``until()`` (once expired, one last receive takes what is already there). Frames are handled one at a time,
        ``done()`` and the stop request checked between them (the rest of a batch waits for the next wait); with
        ``notify``, the neighbours are told every half timeout that this peer is still waiting."""
        final = False
        while not self.stop.is_set() and not done():
            if self._pending:
                frame, key = self._pending.popleft()
                self._accept(frame, key, wanted, transport)
                continue
            deadline = until()
            if final and self.clock() >= deadline:
                break
            final = self.clock() >= deadline
            if notify and not final and self.liveness.notice_due():
                self._send_notice(transport, wanted)
            self._pending.extend(transport.receive(deadline))

    def _accept(self, frame: bytes, key: str | None, wanted: int, transport: PeerTransport) -> None:
        """Decode a frame and hand it to the room it belongs to; a rejection is counted by cause."""
        try:
            message = decode(frame, self.expect, key)
            if isinstance(message, Waiting):
                self.metrics.notices_received += 1
                self.liveness.waiting(message.sender, message.round)
            elif isinstance(message, Resumed):
                self.liveness.heard(message.sender)
                self._silent[message.sender] = 0  # a network sum waits for a restarted neighbour again
                if self.session is not None:
                    self.session.take_resumed(message)
                for again in self.resends.answer(message):
                    self.metrics.frames_resent += self._send_to(transport, message.sender, again)
            elif isinstance(message, Unmask):
                self.liveness.heard(message.sender)
                reply = self.session.answer(message)
                if reply is not None:
                    self._send_to(transport, message.sender, reply)
            elif isinstance(message, Confirm):
                self.liveness.heard(message.sender)
                self._send_to(transport, message.sender, self.session.answer_confirmation(message))
            elif isinstance(message, SumFrame):
                self.liveness.heard(message.sender)
                self._silent[message.sender] = 0
                self.network.take(message, wanted)
                self.metrics.messages_received += 1
                self.metrics.bytes_received += len(frame)
            elif isinstance(message, (Agree, Reveal, Decline)):
                self.liveness.heard(message.sender)
                take = {Agree: self.session.take_agreement, Reveal: self.session.take_reveal, Decline: self.session.take_decline}
                take[type(message)](message)
                self.metrics.bytes_received += len(frame)
            else:
                self._keep(message, len(frame), wanted)
        except Rejected as rejection:
            self._reject(rejection.cause, rejection.detail, rejection.sender)

    def _keep(self, message: Message | Masked, size: int, wanted: int) -> None:
        """Put a neighbour's statistics into the inbox; how far the neighbour has got is noted even for a stale frame
        (it is behind, but alive). A frame beyond the window that a later one replaces is counted as ``ahead``. A copy
        of a frame held or just taken (a neighbour sent it again after this peer restarted) is dropped, uncounted."""
        if self.inbox.is_copy(message):
            self.liveness.statistics_from(message.sender, message.round)  # re-sent in order: its latest round then
            return
        try:
            replaced = self.inbox.put(message, wanted)
        except Rejected as rejection:
            if rejection.cause == "stale":
                self.liveness.statistics_from(message.sender, message.round)
            raise
        self.liveness.statistics_from(message.sender, message.round)
        self.metrics.messages_received += 1
        self.metrics.bytes_received += size
        if replaced is not None:
            self._reject("ahead", f"round {replaced.round}, more than {self.settings.window_rounds} rounds after the "
                                  f"awaited {wanted}, replaced by round {message.round}", message.sender)

    def _catch_up(self, transport: PeerTransport) -> bool:
        """Skip ahead when no neighbour will send the awaited round any more (each one up has sent a later round) and
        none of it arrived: to the earliest round of which statistics are kept, sending this peer's statistics as its
        own of that round. A peer without memory (started late, or restarted without a checkpoint) then joins as one
        that was cut off until now (``acceleration.joining_memory``). Whether it skipped."""
        target = self.inbox.earliest()
        if target is None or target <= self.round or not self.liveness.up or self.liveness.awaited(self.round):
            return False
        self._skip_to(target, transport)
        return True

    def _skip_to(self, target: int, transport: PeerTransport) -> None:
        """Go on at round ``target``, where the neighbours are, from this peer's statistics (``_catch_up``)."""
        self.log.info("round %d: the neighbours have gone on to round %d: skipping ahead to it", self.round + 1,
                      target + 1)
        self.metrics.rounds_skipped += target - self.round
        self.round = self.metrics.rounds_done = target
        if self.memory is None:
            self.memory = acceleration.joining_memory(self.settings.acceleration, self.stats)
        if self.average is None and self.settings.acceleration.keeps_average:
            self.average = self.stats.copy()  # as after a first round, so that a checkpoint of it resumes the same
        self.checkpoints.save(self.state, self.metrics, before_send=True)
        self._send(transport)

    def _send_notice(self, transport: PeerTransport, wanted: int) -> None:
        """Tell the neighbours that this peer still awaits the statistics of round ``wanted``."""
        dropped_for = transport.send(encode_waiting(run=self.settings.run, sender=self.settings.bind, round_=wanted))
        self.metrics.notices_sent += len(self.settings.peers) - len(dropped_for)

    def _reject(self, cause: str, detail: str, sender: str | None) -> None:
        """Count a rejection; log it as a warning the first time for its cause, then at debug level."""
        self.metrics.count_rejected(cause)
        level = logging.WARNING if cause not in self._logged_causes else logging.DEBUG
        self._logged_causes.add(cause)
        self.log.log(level, "rejected message (%s) from %s: %s", cause, sender or "unknown sender", detail)

    def _drop_injected_losses(self, received: dict, wanted: int) -> list[str]:
        """Remove the messages of round ``wanted`` that the injected loss drops: missing, but not held against the
        neighbour's liveness. Returns their senders."""
        lost = dropped(self.settings.loss_seed, wanted + 1, len(self.settings.peers), self.settings.loss)
        senders = [peer for peer in received if lost[self.settings.peers.index(peer)]]
        for peer in senders:
            del received[peer]
            self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
        return senders

    def _averaged(self, received: dict, lost: list[str]) -> list[np.ndarray]:
        """The neighbours' statistics this round's average takes: those received and, on the kept links
        (``peer_checkpoint.kept_links``), the last heard from each sender whose message the injected loss dropped
        (this peer's own if none yet), as in the simulator (``crc.core.last_heard``). In the order of
        ``settings.peers``, not the arrival order: the sum is then the same bits whatever the network's timing."""
        stand_ins = {}
        if self.links:
            self.heard.update({peer: message.stats for peer, message in received.items()})
            stand_ins = {peer: self.heard.get(peer, self.stats) for peer in lost}
        return [received[peer].stats if peer in received else stand_ins[peer]
                for peer in self.settings.peers if peer in received or peer in stand_ins]

    # -------------------------------------------------------------------------------------- the closed neighbourhood

    def _secure_average(self, transport: PeerTransport, received: dict, wanted: int) -> np.ndarray:
        """The neighbourhood average from masked statistics: ask the contributors whose words arrived to agree to
        that set, relay their vouches to each other, gather what removes their masks, unmask the sum, average it with
        this peer's own; its own alone if that fails. Each of the two waits lasts at most ``timeout_s``, and ends
        sooner once a contributor declines (``SecureAggregationSession.settled``); a request that cannot be
        confirmed is withdrawn, so that the members that agreed to it do not wait for its confirmation."""
        for address, frame in self.session.open(received, wanted).items():  # to all: a notice to those left out
            self._send_to(transport, address, frame)
        if self.session.unmasking:
            deadline = self.clock() + self.settings.timeout_s
            self._wait(transport, wanted, lambda: deadline, self.session.settled, notify=True)
            confirmations = self.session.confirm()
            for address, frame in (confirmations or self.session.withdraw()).items():  # else the request withdrawn
                self._send_to(transport, address, frame)
            if confirmations:
                deadline = self.clock() + self.settings.timeout_s
                self._wait(transport, wanted, lambda: deadline, self.session.settled, notify=True)
        total = self.session.close(self.model, self.ess, noisy=self.release.distributed)
        if total is not None:
            try:  # what the wire checks of each message, checked of the sum
                check_statistics(total / len(received), self.model, self.ess, slack=self.expect.count_slack)
            except Rejected as rejection:
                self._reject(rejection.cause, f"the unmasked sum: {rejection.detail}", None)
                total = None
        if total is None:
            self.metrics.unmask_fallbacks += 1
            self.log.log(logging.WARNING if self._unmask_streak == 0 else logging.DEBUG,
                         "round %d: the neighbours' statistics could not be unmasked (%d of %d arrived, %d agreed, %d "
                         "declined, %d revealed): keeping this peer's own%s", wanted + 1, len(received),
                         len(self.settings.peers), self.session.agreements, self.session.declines, self.session.reveals,
                         "" if self._unmask_streak else " (logged again once unmasking works again)")
            self._unmask_streak += 1
            return self._own_start()
        if self._unmask_streak:
            self.log.info("round %d: the neighbours' statistics unmasked again (the %d rounds before could not be)",
                          wanted + 1, self._unmask_streak)
            self._unmask_streak = 0
        return (self.release.with_share(self.stats, self.settings.bind, wanted) + total) / (1 + len(received))

    def _own_start(self) -> np.ndarray:
        """What a round starts from when the neighbourhood's average cannot be used: this peer's own statistics, or,
        with distributed noise (its own statistics are never released), its last aggregate (at the start, its
        uniform statistics), so that its classifier stays post-processing of released sums."""
        if self.release.distributed and self.aggregated is not None:
            return self.aggregated.copy()
        return self.stats.copy()

    def _serve_final(self, transport: PeerTransport) -> None:
        """After the last round: answer the neighbours' unmasking requests and confirmations for it (they unmask
        after this peer's last message), until every protected neighbour has sent its confirmation or a notice (this
        peer left out), a stop request, or ``timeout_s``."""
        if not self.session.final_answered():
            deadline = self.clock() + self.settings.timeout_s
            self._wait(transport, self.settings.rounds, lambda: deadline, self.session.final_answered)

    # -------------------------------------------------------------------------------------------- the network sum

    def _network_average(self, transport: PeerTransport, wanted: int
                         ) -> tuple[np.ndarray, np.ndarray | None, str] | None:
        """(the network's average, exact diffusion's restart, what was heard) of round ``wanted`` from one secure sum
        of every peer (``crc.nodes.network_sum``): the children's partial sums, waited for at most the subtree's height
        in timeouts, this peer's words added, the sum sent to the parent, the total waited for at most the tree's
        height plus one timeout and passed down to the children; in a fresh run's first round both waits count from
        the end of the start-up (``first_round_timeout_s``). A neighbour silent ``down_after`` rounds in a row is waited
        for one timeout a round only, until it sends again (or says it resumed). A peer left behind
        goes to its parent's latest total, a root to the round all its children reached. None if a stop request
        interrupted a wait or the peer skipped ahead."""
        network, position, slot = self.network, self.network.position, self.settings.timeout_s
        start = self.clock() + (self.settings.first_round_timeout_s if self._first_wait_pending else 0.0)
        self._first_wait_pending = False
        # a child that is down fails the round whatever the others send: one timeout a round for it to come back (not
        # none: the rest of the network would race through the run's rounds before it can; a relay down 90 s cost the
        # root's side its remaining 1,415 rounds)
        down = any(self._silent[child] >= self.settings.down_after for child in position.children)
        until_up = start + (slot if down else position.height * slot)
        self._wait(transport, wanted, lambda: until_up, lambda: network.children_in(wanted, position.children))
        if self.stop.is_set():
            return None
        stats = self.release.on_the_wire(self.stats)
        shares = self.release.shares(wanted)
        own = network.words(stats, wanted, None if shares is None else shares[self.settings.bind],
                            after=self.sealed)
        contributors, words = network.fold(own, wanted)
        self._note_silence(position.children, contributors)
        frames: dict[str, bytes] = {}
        if position.parent is None:
            complete = network.complete(contributors)
            ahead = None if complete else network.children_ahead(wanted)
            if ahead is not None:  # a root left behind (restarted): every child has gone on to that round
                self._skip_to(ahead, transport)
                return None
            total = SumFrame("total", self.settings.bind, wanted, words if complete else None, network.bitmap(contributors))
            self._note_absent(total)
        else:
            frames[position.parent] = self._sum_frame("partial", wanted, words, network.bitmap(contributors))
            self._send_to(transport, position.parent, frames[position.parent])
            self.resends.record(wanted, frames)  # a parent that restarts meanwhile gets it again
            parent_up = self._silent[position.parent] < self.settings.down_after
            # from the start-up's end in a fresh run's first round: the root waits that long for late peers' words;
            # a parent that is down still gets one timeout a round, or its subtree would race through the run's rounds
            # alone before it can come back (a root restarted 1.5 s later found its star's leaves done: 37 of 40 lost)
            until_down = max(self.clock(), start) + ((position.tree_height + 1) * slot if parent_up else slot)
            self._wait(transport, wanted, lambda: until_down,
                       lambda: network.total(wanted) is not None or network.latest(wanted) is not None)
            if self.stop.is_set():
                return None
            total = network.total(wanted)
            self._note_silence([position.parent], () if total is None else (position.parent,))
            if total is None:
                ahead = network.latest(wanted)
                if ahead is not None:  # left behind (restarted, joined late): the parent has gone on to that round
                    self._skip_to(ahead, transport)
                    return None
                total = SumFrame("total", self.settings.bind, wanted, None, network.bitmap(contributors))
            else:  # the parent's total counts the absent; the one made up above for a silent parent does not
                self._note_absent(total)
        for child in position.children:  # passed down as it came; a round that failed says so at once
            frames[child] = self._sum_frame("total", wanted, total.words, total.contributors)
            self._send_to(transport, child, frames[child])
        self.resends.record(wanted, frames)
        network.advance(wanted + 1)
        self.sealed = network.seal(total)  # the next round's masks cancel only with peers that took this total
        mean, released = self._network_mean(network.decode(total), wanted)
        words = f"{len(network.contributors(total.contributors))}/{len(network.members)} peers"
        heard = f"network sum of {words}" if released else f"no network sum released ({words}' words)"
        return mean, self._network_unsettled(), heard

    def _sum_frame(self, kind: str, round_: int, words: np.ndarray | None, contributors: bytes) -> bytes:
        return encode_sum_frame(kind, run=self.settings.run, sender=self.settings.bind, round_=round_,
                                roster=self.network.digest, schema_id=self.model.schema_id, ess=self.ess, words=words,
                                contributors=contributors)

    def _note_silence(self, neighbours, heard) -> None:
        """Count the rounds in a row that each of ``neighbours`` sent nothing (not in ``heard``), in the metrics too."""
        for peer in neighbours:
            if peer in heard:
                self._silent[peer] = 0
                continue
            self._silent[peer] += 1
            self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
            if self._silent[peer] == self.settings.down_after:
                self.log.warning("%s sent nothing in %d rounds in a row: waited for one timeout a round only until it "
                                 "sends again", peer, self._silent[peer])

    def _note_absent(self, total: SumFrame) -> None:
        """Count the peers whose words a failed ``total`` lacks (``Metrics.absent_from_sums``)."""
        if total.words is None:
            for peer in set(self.network.members) - self.network.contributors(total.contributors):
                self.metrics.absent_from_sums[peer] = self.metrics.absent_from_sums.get(peer, 0) + 1

    def _network_mean(self, released: np.ndarray | None, wanted: int) -> tuple[np.ndarray, bool]:
        """(the network's average from the released sum (size,), checked as a neighbour's statistics are, True); this
        peer's own start and False if the round released nothing or the sum is rejected."""
        from crc.nodes.secure_aggregation import counted_sum

        n = len(self.network.members)
        if released is not None:
            released = counted_sum(self.model, released, n, self.ess, noisy=self.release.distributed)
            try:
                if released is None:
                    raise Rejected("stats-ess", "the class counts of the network sum are not the peers' ESS (a peer "
                                                "sent statistics of another ESS, or the peers took different totals "
                                                "the round before: their masks did not cancel)")
                check_statistics(released / n, self.model, self.ess, slack=self.expect.count_slack)
            except Rejected as rejection:
                self._reject(rejection.cause, f"the network sum: {rejection.detail}", self.network.position.parent)
                released = None
        if released is None:
            self._sums_in_a_row = 0
            self.metrics.unmask_fallbacks += 1
            self.log.log(logging.WARNING if self.metrics.unmask_fallbacks == 1 else logging.DEBUG,
                         "round %d: the network sum released nothing (a peer's words missing, or the sum rejected): "
                         "this peer keeps its own%s", wanted + 1, "" if self.metrics.unmask_fallbacks > 1 else " (later such rounds are "
                         "logged at debug level; the metrics count them)")
            return self._own_start(), False
        self._sums_in_a_row += 1
        return released / n, True

    def _network_unsettled(self) -> np.ndarray | None:
        """Exact diffusion's restart under a network sum: while fewer than ``SETTLE_ROUNDS`` sums in a row have been
        released (``_unsettled``)."""
        unsettled = self._sums_in_a_row < acceleration.SETTLE_ROUNDS
        return np.array(True) if unsettled and self.settings.acceleration.exact_diffusion else None

    # ------------------------------------------------------------------------------------------------ the local step

    def _calibrate(self, aggregated: np.ndarray, wanted: int,
                   restart: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, acceleration.Memory | None]:
        """(the aggregate used, the new statistics, the memory) of the round from ``aggregated``; ``restart``: exact
        diffusion's (``_unsettled``).

        Each neighbour's statistics passed the wire's checks, but their average with this peer's can still give
        statistics that the neighbours would reject (rounding against values at the edge of what the wire accepts,
        a sum beyond what secure aggregation encodes): then the round starts from this peer's own statistics
        instead. Should that fail too (a neighbour walked this peer's statistics to the edge of a bound, where its
        own local step crosses it), the peer keeps its statistics and memory of the last round, which passed: a
        neighbour can stall this peer's learning, as it can poison it, but neither stop it nor get it rejected.
        Under local noise a round that released (a noisy local step) is not stepped again: a second step, under
        fresh noise, would release the round twice, the accountant counting once; the peer keeps its last statistics.
        Under distributed noise every choice here is taken on this peer's aggregates, sums released to it, never on
        the statistics of its local step (``_checked_step``).
        """
        stats, memory, problem = self._checked_step(aggregated, restart)
        if problem is None:
            return aggregated, stats, memory
        self.metrics.aggregate_fallbacks += 1
        own = self._own_start()
        if self.release.local and is_release(self.round, self.settings.release_every):
            self.metrics.rounds_kept += 1
            self.log.warning("round %d: the neighbourhood's average gave a release the neighbours reject (%s): this "
                             "peer keeps its statistics of the last round (a second local step would release the "
                             "round again under fresh noise)", wanted + 1, problem)
            return own, self.stats.copy(), self.memory
        self.log.warning("round %d: the neighbourhood's average would give statistics the neighbours reject (%s): "
                         "this round starts from this peer's own", wanted + 1, problem)
        stats, memory, problem = self._checked_step(own, restart)
        if problem is None:
            return own, stats, memory
        self.metrics.rounds_kept += 1
        self.log.warning("round %d: this peer's own local step would give statistics the neighbours reject (%s): "
                         "it keeps its statistics of the last round", wanted + 1, problem)
        return own, self.stats.copy(), self.memory

    def _checked_step(self, start: np.ndarray, restart: np.ndarray | None = None
                      ) -> tuple[np.ndarray | None, acceleration.Memory | None, str | None]:
        """The local step from ``start`` and why the neighbours would reject its statistics (None: they would not); in
        a round without a release (``PeerSettings.release_every``), ``start`` itself and the memory as it is.

        Under distributed noise the step's statistics are never released on their own, only inside sums carrying
        everyone's shares, so no decision looks at them: the reason is ``start``'s (this peer's aggregate, a sum
        released to it), and the statistics go into the sums as they are, held within what secure aggregation
        encodes (``Release.contributed``); the recipients check the noisy sums."""
        if not is_release(self.round, self.settings.release_every):
            return start.copy(), self.memory, self._own_problem(start)
        if self.release.distributed:
            problem = self._own_problem(start)
            if problem is not None:
                return None, None, f"the aggregate itself: {problem}"
        try:
            stats, memory = acceleration.step(self.model, self.settings.acceleration, start, self.memory, self.phi,
                                              self.weights, iterations=self.settings.iters, own=self.stats,
                                              restart=restart)
            stats = self.release.private(stats, self.round)
        except CRCError as exc:
            return None, None, str(exc)
        if self.release.distributed:
            return self.release.contributed(stats), memory, None
        return stats, memory, self._own_problem(stats)

    def _own_problem(self, stats: np.ndarray) -> str | None:
        """Why the neighbours would reject ``stats`` (size,) from this peer, or None."""
        try:
            check_statistics(stats, self.model, self.ess, secure_aggregation=self.expect.secure_aggregation,
                             slack=self.expect.count_slack)
        except Rejected as rejection:
            return f"{rejection.cause}: {rejection.detail}"
        return None

    # ----------------------------------------------------------------------------------------- sending, checkpoints

    def _send(self, transport: PeerTransport) -> None:
        """Queue this peer's statistics of its current round for every neighbour (masked where secure aggregation
        hides them); a full queue drops that neighbour's copy, counted and logged. Called once the round's checkpoint
        is written: a peer killed after a send resumes from the round it sent and sends it again, never a
        recomputation of that round from other neighbours' statistics (under privacy, other statistics under fresh
        noise: a second release the accountant does not count). A full queue is logged once while it stays full (a
        dead neighbour's does, for the rest of the run)."""
        if self.network is not None:  # the round's words go up the tree with the children's (``_network_average``)
            return
        stats = self.release.on_the_wire(self.stats)
        frame = self._encode(stats)
        if self.session is None:
            dropped_for = transport.send(frame)
            self.metrics.count_sent(len(self.settings.peers) - len(dropped_for), len(frame))
            frames = dict.fromkeys(self.settings.peers, frame)
        else:
            shares = self.release.shares(self.round)
            frames = self.session.frames(stats, self.round, schema_id=self.model.schema_id, ess=self.ess, shares=shares,
                                         plain=lambda address: frame if shares is None else self._encode(
                                             self.release.with_share(stats, address, self.round)))
            dropped_for = [address for address, each in frames.items() if not self._send_to(transport, address, each)]
        self.resends.record(self.round, {address: each for address, each in frames.items() if address not in dropped_for})
        self.metrics.send_dropped += len(dropped_for)
        for address in sorted(self._full_queues - set(dropped_for)):
            self.log.info("round %d: queue to %s takes frames again", self.round, address)
        for address in dropped_for:
            self.log.log(logging.DEBUG if address in self._full_queues else logging.WARNING,
                         "round %d: queue to %s full, statistics not sent%s", self.round, address,
                         "" if address in self._full_queues else " (logged again once it takes frames again)")
        self._full_queues = set(dropped_for)

    def _announce(self, transport: PeerTransport) -> None:
        """Tell the neighbours the round this peer resumed at: what they sent its last process of it and later died
        with it, and they send it again (``crc.nodes.resend``). Resumed after its last round (killed while it served
        their last unmasking) it has nothing to be sent again, and says so only under secure aggregation: their last
        unmasking then stops waiting for its answer to what they asked its last process
        (``SecureAggregationSession.take_resumed``)."""
        transport.send(encode_resumed(run=self.settings.run, sender=self.settings.bind, round_=self.round))
        self.log.info("told the neighbours it resumed at round %d (they send again what they sent its last process)",
                      self.round)

    def _encode(self, stats: np.ndarray) -> bytes:
        """A plain statistics frame of this peer's current round."""
        return encode(run=self.settings.run, sender=self.settings.bind, round_=self.round, schema_id=self.model.schema_id,
                      ess=self.ess, stats=stats)

    def _send_to(self, transport: PeerTransport, address: str, frame: bytes) -> bool:
        """Queue one frame for one neighbour, counted; False if its queue is full."""
        if not transport.send_to(address, frame):
            return False
        self.metrics.count_sent(1, len(frame))
        return True

    def _count_refused(self, transport: PeerTransport) -> None:
        """The metrics' refused connections: those of earlier runs (a resumed checkpoint's) plus the transport's."""
        self.metrics.count_refused(self._refused_before, transport.refused())

    def _resume(self) -> bool:
        """Continue from the checkpoint, if there is one (whether there was); one whose statistics the neighbours would
        reject, or whose metrics are not what a peer writes, is a CRCError."""
        found = self.checkpoints.load(self.state)
        if found is None:
            return False
        state, metrics = found
        self.round, self.stats, self.aggregated, self.memory = state.round, state.stats, state.aggregated, state.memory
        self.heard, self.average, self.sealed = state.heard, state.average, state.sealed
        held = [self.stats, self.aggregated, None if self.memory is None else self.memory.previous, self.average,
                *self.heard.values()]
        for part in (statistics for statistics in held if statistics is not None):
            problem = self._own_problem(part)
            if problem is not None:
                raise CRCError(f"{self.settings.checkpoint_dir}: damaged checkpoint: its statistics would be rejected ({problem})")
        try:
            self.metrics = Metrics.from_json(metrics)
        except CRCError as exc:
            raise CRCError(f"{self.settings.checkpoint_dir}: damaged checkpoint: {exc}") from None
        self.log.info("resumed from checkpoint at round %d", self.round)
        return True
