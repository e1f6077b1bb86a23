"""A member of a vertical group without the labels (``crc.nodes.vertical_peer``): it answers the label holder's PSI
request, orders its rows by the group's ids, and every pass sends its block's scores and takes the weights.

Its label holder is the member named by ``--label-holder`` (``label_holder``): a PSI request from any other member is
refused (counted and logged) and answers nothing, so that no member can pose as the label holder and learn which of
its guessed ids this peer holds. Without it, the label holder is the peer whose PSI request came first (a warning at
start-up); a request from another peer then means two label holders. None within ``first_round_timeout_s`` means
none (both stop the peer with one line, which names the peers whose request it refused: a wrong --label-holder), and
so does a checkpoint whose label holder is not the one named. A wait for the weights that
runs out sends the scores again, and so does a label holder's ``resumed`` notice at once (the very frames, once:
``crc.nodes.resend``); ``down_after`` waits in a row stop the group. Resumed itself, a member tells only its block
neighbours (hybrid): the scores it sends its label holder of the pass it resumed at ask for that pass's weights.
"""

from __future__ import annotations

import math

import numpy as np

from crc.core.errors import CRCError
from crc.nodes.alignment import AlignmentError, answer_request
from crc.nodes.block_steps import one_hot_rows, residual_rows, responsibility_rows
from crc.nodes.score_masks import TRANSCRIPT_BYTES
from crc.nodes.vertical_peer import GroupStopped, Outgoing, VerticalPeer
from crc.nodes.vertical_wire import PSIIds, PSIRequest, Weights
from crc.nodes.wire import Rejected


class GroupMember(VerticalPeer):
    """A peer of a vertical group whose rows have no labels."""

    role = "member"

    def __init__(self, model, block, data, settings, *, label_holder: str | None = None, **options):
        self.named_holder = label_holder
        """The label holder's address as this peer's configuration names it (None: whoever asks first)."""
        self.holder: str | None = None
        """The label holder's address, once its PSI request came."""
        self._scored: int | None = None
        """The pass whose scores this peer sent last."""
        self.refused: set[str] = set()
        """Peers whose PSI request this peer refused: not the one ``--label-holder`` names."""
        super().__init__(model, block, data, settings, **options)
        if self.holder is not None and label_holder is not None and self.holder != label_holder:
            raise CRCError(f"{settings.checkpoint_dir}: the checkpoint's label holder {self.holder} answered this peer's "
                           f"PSI, but --label-holder names {label_holder}: its weights would be taken from a peer not "
                           "named (remove the checkpoint to align the group again, or name the label holder it holds)")
        if self.holder is not None:  # resumed
            self.liveness = self.new_liveness((self.holder,))

    def begin(self) -> Outgoing:
        if self.done:
            return []
        if self.resumed:
            return self.announce(()) + self.next_round() + self.proceed()
        self.group_deadline = self.clock() + self.settings.first_round_timeout_s
        return []

    def handle(self, message) -> Outgoing:
        if isinstance(message, PSIRequest):
            return self._on_request(message)
        if isinstance(message, PSIIds):
            return self._on_ids(message)
        if isinstance(message, Weights):
            return self._on_weights(message)
        raise Rejected("type", f"{type(message).__name__} are for the label holder, and this peer is a member",
                       message.sender)

    def expire_group(self) -> Outgoing:
        if self.holder is None and self.refused:
            raise CRCError(f"no PSI request from {self.named_holder}, the label holder --label-holder names, within "
                           f"{self.settings.first_round_timeout_s:g} s; this peer refused the request of "
                           f"{', '.join(sorted(self.refused))} (--label-holder must be the address of the member whose "
                           f"--data has the label column {self.model.schema.label!r})")
        if self.holder is None:
            raise CRCError(f"no label holder: no peer of the group sent a PSI request within "
                           f"{self.settings.first_round_timeout_s:g} s (exactly one member's --data must have the label "
                           f"column {self.model.schema.label!r}, and it must be running)")
        self.liveness.end_round(set())
        if self.liveness.down:
            what = "group id list" if self.rows is None else f"weights of pass {self._awaited()}"
            silent_s = self.liveness.silent_s(self.liveness.down)
            raise GroupStopped(f"the label holder {self.holder} sent no {what} this peer could take in "
                               f"{self.settings.down_after} wait(s) ({silent_s:.3g} s in all; nothing, repeats, notices "
                               "or frames rejected: see the log): the group stops")
        self.wait_from_now()
        if self.pass_ is None or self._scored != self.pass_ + 1:
            return []
        self.metrics.scores_resent += 1
        return self._scores()

    def _awaited(self) -> int:
        return 0 if self.pass_ is None else self.pass_ + 1

    # ------------------------------------------------------------------------------------------------ alignment

    def _on_request(self, message: PSIRequest) -> Outgoing:
        if self.named_holder is not None and message.sender != self.named_holder:
            self.refused.add(message.sender)
            raise Rejected("sender", f"a PSI request from {message.sender}, but --label-holder names "
                                     f"{self.named_holder}: only the label holder's request is answered", message.sender)
        if self.holder is not None and message.sender != self.holder:
            raise CRCError(f"two label holders in the group: {self.holder} and {message.sender} both sent a PSI "
                           f"request (exactly one member's --data may have the label column {self.model.schema.label!r})")
        if self.holder is not None:  # a repeat, or a label holder that restarted without a checkpoint
            self.metrics.repeats_ignored += 1
            return []
        setup, response = answer_request(self.data.ids, message.request, message.ids, message.sender)
        self.holder = message.sender
        self.liveness = self.new_liveness((self.holder,))
        self.liveness.start_run(fresh=True)
        self.wait_from_now()
        answer = self.frame("psi-answer", 0, ids=len(self.data.ids), block=self.block, setup=setup, response=response)
        return [(self.holder, answer)]

    def _from_holder(self, message) -> None:
        if message.sender != self.holder:
            raise Rejected("sender", f"{type(message).__name__} from {message.sender}, not this group's label holder "
                                     f"({self.holder or 'none yet'})", message.sender)

    def check_notice(self, notice) -> None:
        self._from_holder(notice)

    def _on_ids(self, message: PSIIds) -> Outgoing:
        self._from_holder(message)
        if self.rows is not None:
            self.metrics.repeats_ignored += 1
            return []
        ids = list(message.ids)
        if any(a >= b for a, b in zip(ids, ids[1:])):
            raise AlignmentError(f"{self.data.source}: the group's id list from {message.sender} is not sorted")
        self.align(ids)
        if self.masks is not None:
            self.masks.took("psi-ids", message.round, ids)
        self.wait_from_now()
        return []

    # ---------------------------------------------------------------------------------------------------- passes

    def _on_weights(self, message: Weights) -> Outgoing:
        self._from_holder(message)
        if self.rows is None:
            raise Rejected("ahead", "weights before the group's ids", message.sender)
        t, awaited = message.round, self._awaited()
        if t < awaited:  # sent again for scores this peer sent again
            self.metrics.repeats_ignored += 1
            return []
        if t > awaited:
            raise Rejected("ahead", f"weights of pass {t} while waiting for pass {awaited}", message.sender)
        final = t == self.passes and not self.hybrid  # the vertical group's last pass only scores
        columns = self.steps.classes if t == 0 else self.steps.width  # round 0: the labels
        expected = 0 if final else len(self.rows) * columns
        if message.values.size != expected:
            raise Rejected("length", f"{message.values.size} weights in pass {t}, expected {expected}", message.sender)
        weights = None if final else message.values.reshape(len(self.rows), columns)
        if t > 0 and self._scored != t:
            raise Rejected("ahead", f"weights of pass {t}, whose scores this peer has not sent", message.sender)
        if t == 0:
            if not one_hot_rows(weights):
                raise Rejected("malformed", "the round-0 weights are not one-hot labels", message.sender)
            self.start(weights)
        elif t <= self.em_passes:
            if not responsibility_rows(weights, self.steps.components):
                raise Rejected("malformed", "EM weights that cannot be responsibilities (an entry beyond [0, 1], a row "
                                            "that does not sum to 1, or one spread over two classes)", message.sender)
            self._advance(t, weights, False, message.sender)
        else:
            if weights is not None and not residual_rows(weights):
                raise Rejected("malformed", "weights that cannot be Y - P (an entry beyond [-1, 1] or a row that does "
                                            "not sum to 0)", message.sender)
            self._advance(t, weights, message.best, message.sender)
        if self.masks is not None:
            self.masks.took("weights", t, message.best, message.values.tobytes())
        self.liveness.end_round({self.holder})
        self.passed(t)
        self.group_deadline = math.inf  # until the scores of the next pass are sent
        if self.done:
            return []
        return self.next_round() + self.proceed()

    def _advance(self, t: int, weights: np.ndarray, best: bool, sender: str) -> None:
        """``advance``, its refusal (statistics out of bounds) naming the label holder whose weights they were."""
        try:
            self.advance(t, weights, best)
        except Rejected as rejection:
            raise Rejected(rejection.cause, rejection.detail, sender) from None

    def proceed(self) -> Outgoing:
        """The scores of the next pass, once what it starts from is known (once)."""
        if self.done or self.pass_ is None or self.aggregated is None or self._scored == self.pass_ + 1:
            return []
        self._scored = self.pass_ + 1
        self.wait_from_now()
        return self._scores()

    def _scores(self) -> Outgoing:
        """This block's scores of what the next pass starts from (masked with secure aggregation)."""
        scores, t = self.steps.scores(self.aggregated, self.phi), self.pass_ + 1
        if self.masks is not None:
            frame = self.frame("masked-scores", t, words=self.masks.masked(scores, self.holder, t))
        else:
            frame = self.frame("scores", t, values=scores)
        self.resends.record(t, {self.holder: frame})  # for a label holder that restarts
        return [(self.holder, frame)]

    # ------------------------------------------------------------------------------------------------ checkpoint

    def _role_size(self) -> int:
        return 1 + (0 if self.masks is None else TRANSCRIPT_BYTES)

    def _role_vector(self) -> list:
        """The label holder's index in the peers; with secure aggregation, the transcript's bytes."""
        transcript = [] if self.masks is None else list(self.masks.transcript)
        return [[float(self.settings.peers.index(self.holder))], np.array(transcript, dtype=np.float64)]

    def _restore_role(self, vector: np.ndarray) -> None:
        index, transcript = vector[0], vector[1:]
        if not (index == round(index) and 0 <= index < len(self.settings.peers)):
            raise CRCError(f"label holder {index!r} is not one of the peers")
        if not np.all((transcript == np.round(transcript)) & (transcript >= 0) & (transcript <= 255)):
            raise CRCError("the transcript of what the label holder sent is not bytes")
        self.holder = self.settings.peers[int(index)]
        if self.masks is not None:
            self.masks.transcript = bytes(transcript.astype(np.uint8))
