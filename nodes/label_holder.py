"""The label holder of a vertical group (``crc.nodes.vertical_peer``): it aligns the group's instances, and every pass
it sums the blocks' scores, chooses the best iterate and sends the weights ``Y - P``.

It waits for every member's scores of a pass (a vertical group needs every block); a member silent for
``down_after`` waits stops the group. Scores of a pass it has already answered come from a member that restarted
from its checkpoint: it sends that member the pass's weights again. Its checkpoint also holds the best loss and the
last pass's weights: a restarted label holder sends them to every member again, tells them the pass whose scores it
awaits (a ``resumed`` notice: each sends it again, at once and once, the scores frame its last process had received,
``crc.nodes.resend``), and gives the members the start-up allowance (``first_round_timeout_s``) to send them.
"""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.base import one_hot
from crc.nodes.alignment import LabelHolderPSI
from crc.nodes.block_steps import em_weights, group_weights
from crc.nodes.inbox import Inbox
from crc.nodes.score_masks import unmasked_sum
from crc.nodes.vertical_peer import GroupStopped, Outgoing, VerticalPeer
from crc.nodes.vertical_wire import MaskedScores, PSIAnswer, PSIRequest, Scores
from crc.nodes.wire import SECURE_AGGREGATION_TERM_LIMIT, Rejected

NO_LOSS = 2.0
"""The best loss before any iterate is scored: above every soft 0-1 loss."""


class LabelHolder(VerticalPeer):
    """The peer of a vertical group whose rows have the labels (``data.y``)."""

    role = "label holder"

    def __init__(self, model, block, data, settings, **options):
        if data.y is None:
            raise CRCError(f"{data.source}: the label holder needs the label column")
        self.best_loss = NO_LOSS
        self.last: tuple[bool, np.ndarray | None] = (False, None)
        """(best flag, weights (m, width) or None) of the last pass answered, sent again to a member that asks."""
        self.psi: LabelHolderPSI | None = None
        self.overlaps: dict[str, set[str]] = {}
        self.blocks_of: dict[str, int] = {}
        super().__init__(model, block, data, settings, **options)
        self.inbox = Inbox(rounds=self.passes + 1, window=0)
        self.liveness = self.new_liveness(settings.peers)

    def begin(self) -> Outgoing:
        if self.done:
            return []
        self.liveness.start_run(fresh=True)  # resumed too: the members answer its notice as they get to it
        self.wait_from_now()
        if self.resumed:
            return self.announce(self.settings.peers) + self._resend_last() + self.next_round() + self.proceed()
        self.psi = LabelHolderPSI(self.data.ids)
        request = self.frame("psi-request", 0, ids=len(self.data.ids), request=self.psi.request)
        return [(member, request) for member in self.settings.peers] + (self._aligned() if not self.settings.peers else [])

    def _resend_last(self) -> Outgoing:
        """After a restart: the last pass's weights to every member (and the group's ids with the round-0 weights), which
        a member that took them already ignores."""
        frames = []
        if self.pass_ == 0:
            ids = self.frame("psi-ids", 0, ids=[self.data.ids[row] for row in self.rows])
            frames += [(peer, ids) for peer in self.settings.peers]
        weights = self._weights_frame(self.pass_, *self.last)
        self.metrics.weights_resent += len(self.settings.peers)
        return frames + [(peer, weights) for peer in self.settings.peers]

    def handle(self, message) -> Outgoing:
        if isinstance(message, PSIRequest):
            raise CRCError(f"two label holders in the group: {message.sender} and this peer both have the label column "
                           f"{self.model.schema.label!r} (exactly one member's --data may have it)")
        if isinstance(message, PSIAnswer):
            return self._on_answer(message)
        if isinstance(message, (Scores, MaskedScores)):
            return self._on_scores(message)
        raise Rejected("type", f"{type(message).__name__} are for members, and this peer is the label holder", message.sender)

    def check_notice(self, notice) -> None:
        raise Rejected("sender", f"a resumed notice from the member {notice.sender}: a member asks its label holder again "
                                 "by its scores, never by a notice", notice.sender)

    def expire_group(self) -> Outgoing:
        if self.pass_ is None:
            what, received = "answer to the PSI request", set(self.overlaps)
        else:
            what = f"scores of pass {self.pass_ + 1}"
            received = {peer for peer in self.settings.peers if self.inbox.complete(self.pass_ + 1, [peer])}
        self.liveness.end_round(received)
        if self.liveness.down:
            raise GroupStopped(f"{', '.join(sorted(self.liveness.down))} sent no {what} in {self.settings.down_after} "
                               f"wait(s) ({self.liveness.silent_s(self.liveness.down):.3g} s in all): a vertical group "
                               "needs every block every round, so the group stops")
        self.wait_from_now()
        return []

    # ------------------------------------------------------------------------------------------------ alignment

    def _on_answer(self, message: PSIAnswer) -> Outgoing:
        if self.psi is None or message.sender in self.overlaps:  # aligned already, or a repeat
            self.metrics.repeats_ignored += 1
            return []
        blocks = len(self.model.parts)
        if message.block >= blocks:
            raise CRCError(f"member {message.sender} holds block {message.block}, the group's model has {blocks} "
                           f"(0 to {blocks - 1}): give every member the same --blocks file")
        holders = {self.block: "this peer", **{b: peer for peer, b in self.blocks_of.items()}}
        if message.block in holders:
            raise CRCError(f"two peers hold block {message.block}: {holders[message.block]} and {message.sender} "
                           "(each block of the --blocks file is held by exactly one member: give each its own --block)")
        self.overlaps[message.sender] = self.psi.overlap(message.setup, message.response, message.ids, message.sender)
        self.blocks_of[message.sender] = message.block
        if len(self.overlaps) < len(self.settings.peers):
            return []
        return self._aligned()

    def _aligned(self) -> Outgoing:
        """Every member answered: the group's ids to every member, then the round-0 weights, the labels."""
        group = self.psi.intersection([self.overlaps[peer] for peer in self.settings.peers])
        if not group:
            raise CRCError(f"no instance id is held by every member of the group (this peer holds {len(self.data.ids)}): "
                           "nothing to learn from; are the files of the same instances, with the same --id-column and ids written "
                           "alike (they are compared as written: 007 is not 7)?")
        self.align(group)
        labels = one_hot(self.y, self.model.n_classes)
        absent = [name for name, count in zip(self.model.schema.classes, labels.sum(axis=0)) if not count]
        if absent:
            self.log.warning("class(es) %s have no instance among the group's: they keep the count floor and are never "
                             "predicted", ", ".join(map(repr, absent)))
        self.start(labels)
        self.last = (False, labels)
        self.liveness.end_round(set(self.overlaps))
        self.passed(0)
        self.wait_from_now()
        ids = self.frame("psi-ids", 0, ids=group)
        weights = self.frame("weights", 0, best=False, values=labels)
        members = self.settings.peers
        return [(peer, ids) for peer in members] + [(peer, weights) for peer in members] + self.next_round() + self.proceed()

    # ---------------------------------------------------------------------------------------------------- passes

    def _on_scores(self, message: Scores | MaskedScores) -> Outgoing:
        if isinstance(message, MaskedScores) != (self.masks is not None):
            expected = "masked" if self.masks is not None else "plain"
            raise Rejected("type", f"{type(message).__name__}; this group's members send {expected} scores (all or none "
                                   "of the group with --secure-aggregation)", message.sender)
        if self.pass_ is None:
            raise Rejected("ahead", "scores before the group is aligned", message.sender)
        expected, size = len(self.rows) * self.steps.width, (message.values if isinstance(message, Scores) else message.words).size
        if size != expected:  # checked first: a short frame asking for a pass's weights again would be amplified
            raise Rejected("length", f"{size} scores, expected {len(self.rows)} instances x {self.steps.width}",
                           message.sender)
        t = message.round
        if t == self.pass_ and t >= 1:  # a member that restarted before it took this pass's weights
            self.metrics.weights_resent += 1
            return [(message.sender, self._weights_frame(t, *self.last))]
        if t <= self.pass_:
            raise Rejected("stale", f"scores of pass {t} while waiting for pass {self.pass_ + 1}", message.sender)
        if t > self.pass_ + 1:
            raise Rejected("ahead", f"scores of pass {t} while waiting for pass {self.pass_ + 1}", message.sender)
        if self.inbox.complete(t, [message.sender]):
            self.metrics.repeats_ignored += 1
            return []
        self.inbox.put(message, t)
        return self.proceed()

    def proceed(self) -> Outgoing:
        """Answer every pass whose scores are all in (and, in a hybrid partition, whose average is)."""
        frames = []
        while (not self.done and self.pass_ is not None and self.aggregated is not None
               and self.inbox.complete(self.pass_ + 1, self.settings.peers)):
            frames += self._answer(self.pass_ + 1)
        return frames

    def _answer(self, t: int) -> Outgoing:
        """Pass ``t`` with every block's scores: the loss of the iterate scored, the weights (an EM pass's: the
        responsibilities), this block's step; then the next round begins."""
        received = self.inbox.take(t)
        shape = (len(self.rows), self.steps.width)
        total = self.steps.scores(self.aggregated, self.phi) + self.steps.log_prior(self.aggregated)[None, :]
        total += self._members_scores(received, t).reshape(shape)
        if t <= self.em_passes:
            best, weights = False, em_weights(total, self.y, self.steps.components)
        else:
            loss, weights = group_weights(total, self.y, self.steps.components)
            best = loss < self.best_loss
            if best:
                self.best_loss = loss
            self.metrics.soft_loss.append(loss)
        if t == self.passes and not self.hybrid:
            weights = None  # the last pass only scores
        try:
            self.advance(t, weights, best)
        except Rejected as rejection:
            source = " (or the block neighbours' statistics it started from)" if self.hybrid else ""
            raise CRCError(f"{rejection.detail}: the members' scores of pass {t}{source} are hostile or broken, and the "
                           "group stops rather than send weights that make them so") from None
        self.last = (best, weights)
        self.liveness.end_round(received)
        self.passed(t)
        if t <= self.em_passes:
            self.log.debug("EM pass %d of %d", t, self.em_passes)
        elif self.hybrid:  # pass E + r scores the average round r starts from
            self.log.info("round %d of %d: the group's training soft 0-1 loss %.4f (of the average it starts from)",
                          t - self.em_passes, self.settings.rounds, loss)
        else:  # pass E + r scores iterate r - 1 (0: the start), the last pass iterate T
            self.log.info("iterate %d of %d: the group's training soft 0-1 loss %.4f%s", t - self.em_passes - 1,
                          self.settings.rounds, loss, " (best so far)" if best else "")
        frame = self._weights_frame(t, best, weights)
        frames = [(peer, frame) for peer in self.settings.peers]
        if not self.done:
            self.wait_from_now()
            frames += self.next_round()
        return frames

    def _members_scores(self, received: dict, t: int) -> np.ndarray:
        """The sum (m width,) of the members' scores of pass ``t``: added in a fixed order (the sum does not depend on
        the arrival order), or unmasked (secure aggregation); a CRCError for words that do not unmask."""
        if self.masks is None:
            return sum((received[peer].values for peer in self.settings.peers), np.zeros(len(self.rows) * self.steps.width))
        total = unmasked_sum([received[peer].words for peer in self.settings.peers])
        bound = len(self.settings.peers) * SECURE_AGGREGATION_TERM_LIMIT
        if not np.all(np.abs(total) < bound):
            raise CRCError(f"pass {t}: the members' masked scores do not unmask (a member masks with other keys, run id "
                           "or label holder)")
        return total

    def _weights_frame(self, t: int, best: bool, weights: np.ndarray | None) -> bytes:
        return self.frame("weights", t, best=bool(best), values=np.empty(0) if weights is None else weights)

    # ------------------------------------------------------------------------------------------------ checkpoint

    def _role_size(self) -> int:
        return 3 + len(self.data.ids) * self.steps.width

    def _role_vector(self) -> list:
        """The best loss, the last pass's best flag, its weights' columns (0: none), and its weights (padded)."""
        best, weights = self.last
        padded = np.zeros(len(self.data.ids) * self.steps.width)
        if weights is not None:
            padded[:weights.size] = weights.reshape(-1)
        return [[self.best_loss, float(best), 0.0 if weights is None else float(weights.shape[1])], padded]

    def _restore_role(self, vector: np.ndarray) -> None:
        loss, best, columns = vector[:3]
        if (not (0 <= loss <= 1 or loss == NO_LOSS) or best not in (0.0, 1.0)
                or columns not in (0.0, float(self.steps.classes), float(self.steps.width))):
            raise CRCError("the label holder's best loss or last flags are out of range")
        size = len(self.rows) * int(columns)
        weights = vector[3:3 + size].reshape(len(self.rows), int(columns)) if columns else None
        self.best_loss, self.last = float(loss), (bool(best), None if weights is None else weights.copy())
