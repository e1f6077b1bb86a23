"""A peer's secure-aggregation session: the stages of ``crc.nodes.secure_aggregation`` as the round driver calls them.

Each round, as a contributor, the peer sends every neighbour its statistics masked for that neighbour's
neighbourhood (``frames``) and answers the neighbours' unmasking requests (``answer``). As a recipient (with at
least two neighbours) it then, after gathering the round's masked statistics:

1. ``open``: names the contributors whose words arrived (the set S) and builds the unmasking request for every
   neighbour (a notice if S is smaller than a request may name, ``fewest_survivors``);
2. ``take_agreement``: keeps each member of S's agreement (its vouches for the others, committing it to S);
3. ``confirm``: once every member of S agreed, relays to each the vouches the others made for it; else
   ``withdraw``: the unmasking given up, a notice to each member of S that did not decline;
4. ``take_reveal``: keeps each contributor's reveal (a reveal or agreement for another round, or from a peer not
   asked, is refused: the stages cannot be taken out of order);
5. ``close``: removes the masks and returns the contributors' sum, or None if it cannot be unmasked (a member of
   S that does not agree costs the round: the others reveal nothing for a set it did not vouch for).

A member of S that refuses declines (``take_decline``): the wait for that stage ends at once (``settled``), as at its
timeout, the round given up before the confirmations, unmasked from the others' reveals after them. A member that
says it resumed at or after the round from its checkpoint (``take_resumed``) is taken as declining: it refuses every
request and confirmation of that round, and those already sent to it died with its last process. A neighbour's
declines are logged once while they last (a warning, then at debug level until it agrees again), for its first
``LOGGED_DECLINE_SPELLS`` spells; later spells at debug level only.

As a contributor it agrees to a request (``answer``) and reveals on the confirmation (``answer_confirmation``)
only if every other member of the set vouched for the same set and membership; a confirmation that does not show
this is a deviation of the recipient: refused, counted (``deviations``) and logged as an error (once per
neighbour, then at debug level). A refusal is answered with a decline carrying its reason code, so that the
recipient does not wait its timeout for an answer that will not come.

After its last round the peer still answers the requests for that round (``final_answered``), since its neighbours
unmask after its last message. The session keeps only the current round's agreements and reveals: its state is
bounded.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping

import numpy as np

from crc.core.models.base import GenerativeModel
from crc.nodes.metrics import Metrics
from crc.nodes.secure_aggregation import Deviation, Refused, SecureNeighbourhoods
from crc.nodes.settings import SecureAggregationKeys
from crc.nodes.wire import Agree, Confirm, Decline, Masked, Rejected, Resumed, Reveal, Unmask

LOGGED_DECLINE_SPELLS = 3
"""Spells of declines (declines until the member agrees again) logged as a warning per neighbour; later ones at debug
level, so that a member that declines every other round cannot grow the log by two lines a round."""


class SecureAggregationSession:
    """Secure aggregation for peer ``me`` of run ``run`` with neighbours ``peers`` over ``rounds`` rounds
    (``dropouts``: distributed noise's ``--dp-dropouts``, None without it; ``colluders``: ``--colluders``;
    ``resumed``: the round it resumed at from
    its checkpoint, whose requests it refuses, None for a fresh run); refusals are counted in ``metrics`` and logged
    to ``log``."""

    def __init__(self, me: str, run: str, peers: tuple[str, ...], keys: SecureAggregationKeys, *, rounds: int,
                 metrics: Metrics, log: logging.Logger, dropouts: int | None = None, colluders: int = 0,
                 resumed: int | None = None):
        self.neighbourhoods = SecureNeighbourhoods(me, run, peers, keys, dropouts=dropouts, colluders=colluders,
                                                   resumed=resumed)
        self.peers, self.rounds, self.metrics, self.log = peers, rounds, metrics, log
        self._unmasking: tuple[int, dict[str, Masked]] | None = None  # (round, survivors' masked statistics)
        self._agreements: dict[str, Agree] = {}
        self._confirmed = False
        self._reveals: dict[str, Reveal] = {}
        self._declines: set[str] = set()  # members that declined the open unmasking (the reason is logged)
        self._declining: set[str] = set()  # neighbours whose declines are logged already (until they agree again)
        self._decline_spells: collections.Counter = collections.Counter()  # neighbour -> its spells of declines so far
        self._final_asked: set[str] = set()  # neighbours whose last round's unmasking this peer has answered to the end
        self._refused_senders: set[str] = set()  # neighbours whose requests were refused (logged once each)
        self._deviating_senders: set[str] = set()  # neighbours caught deviating (logged as an error once each)

    @property
    def receives_masked(self) -> bool:
        """Whether this peer's neighbours send it masked statistics (it has at least two neighbours)."""
        return self.neighbourhoods.receives_masked

    def frames(self, stats: np.ndarray, round_: int, *, schema_id: str, ess: float, plain: Callable[[str], bytes],
               shares: Mapping[str, np.ndarray] | None = None) -> dict[str, bytes]:
        """The frame for each neighbour carrying ``stats`` (size,) of ``round_``: masked for its neighbourhood (with
        its distributed noise share of ``shares``, if given), or ``plain(address)`` where that neighbourhood is too
        small to hide them."""
        return {address: self.neighbourhoods.masked_frame(address, stats, round_, schema_id=schema_id, ess=ess,
                                                          noise=None if shares is None else shares[address])
                or plain(address) for address in self.peers}

    def answer(self, request: Unmask) -> bytes | None:
        """This peer's agreement (its vouches) for a neighbour's unmasking request; None for a notice that asks
        nothing; a decline for a request refused (counted; logged as a warning the first time for each neighbour)."""
        try:
            reply = self.neighbourhoods.agree_frame(request)
        except Refused as refusal:
            return self._decline(request.sender, request.round, refusal, "unmasking request")
        if reply is None and request.round == self.rounds - 1:  # a notice: nothing more will be asked for that round
            self._final_asked.add(request.sender)
        return reply

    def answer_confirmation(self, confirmation: Confirm) -> bytes:
        """This peer's reveal for a neighbour's confirmation of the request it agreed to; a decline if refused
        (counted, logged; a deviation of the recipient is counted in ``deviations`` too and logged as an error, the
        first time for each neighbour)."""
        if confirmation.round == self.rounds - 1:
            self._final_asked.add(confirmation.sender)
        try:
            return self.neighbourhoods.reveal_frame(confirmation)
        except Refused as refusal:
            return self._decline(confirmation.sender, confirmation.round, refusal, "confirmation")

    def _decline(self, sender: str, round_: int, refusal: Refused, what: str) -> bytes:
        """Count and log ``refusal`` of ``sender``'s ``what`` (its unmasking request or confirmation) for ``round_``;
        the decline to send it (after it, nothing more is asked of this peer for that round)."""
        if round_ == self.rounds - 1:
            self._final_asked.add(sender)
        self.metrics.reveals_refused += 1
        deviation = isinstance(refusal, Deviation)
        self.metrics.deviations += deviation
        seen = self._refused_senders if not deviation else self._deviating_senders
        level = logging.DEBUG if sender in seen else logging.ERROR if deviation else logging.WARNING  # a flood logs once
        seen.add(sender)
        if deviation:
            self.log.log(level, "deviation detected in %s's unmasking of round %d: %s; nothing revealed", sender, round_,
                         refusal)
        else:
            self.log.log(level, "refused %s's %s for round %d: %s", sender, what, round_, refusal)
        return self.neighbourhoods.decline_frame(sender, round_, refusal)

    def final_answered(self) -> bool:
        """Whether every neighbour this peer's statistics reach masked is done with it for the last round: has sent
        a notice (this peer left out), the confirmation of its request, or a request or confirmation this peer
        declined."""
        return set(self.neighbourhoods.protected) <= self._final_asked

    def open(self, received: Mapping[str, Masked], round_: int) -> dict[str, bytes]:
        """Stage 1: the unmasking request for every neighbour (to one left out of ``received``, a notice); the
        unmasking of ``round_`` is open if as many contributors' statistics arrived as a request must name (a
        majority, ``fewest_survivors``; with fewer, every request is a notice)."""
        self._agreements, self._reveals, self._declines, self._confirmed = {}, {}, set(), False
        own = self.neighbourhoods.own
        self._unmasking = (round_, dict(received)) if len(received) >= own.fewest else None
        return {address: self.neighbourhoods.unmask_frame(address, received, round_) for address in self.peers}

    @property
    def unmasking(self) -> bool:
        """Whether agreements or reveals are awaited (between ``open`` and ``close``)."""
        return self._unmasking is not None

    def _check_awaited(self, message: Agree | Reveal | Decline, stage: str, taken: dict) -> None:
        if self._unmasking is None or message.round != self._unmasking[0] or message.sender not in self._unmasking[1]:
            raise Rejected("stale", f"{stage} for round {message.round} that this peer is not unmasking", message.sender)
        if message.sender in taken or message.sender in self._declines:
            raise Rejected("duplicate", f"{stage} for round {message.round} from a member that answered already",
                           message.sender)

    def agreed(self) -> bool:
        """Whether every contributor of the open unmasking has agreed to its set."""
        return self._unmasking is not None and len(self._agreements) == len(self._unmasking[1])

    def take_agreement(self, agreement: Agree) -> None:
        """Stage 2: keep a contributor's agreement; raise Rejected for one this peer is not awaiting, or a second answer."""
        self._check_awaited(agreement, "an agreement", self._agreements)
        if self._confirmed:
            raise Rejected("stale", f"an agreement for round {agreement.round} after the confirmations", agreement.sender)
        self._agreements[agreement.sender] = agreement
        if agreement.sender in self._declining:
            self._declining.discard(agreement.sender)
            if self._decline_spells[agreement.sender] <= LOGGED_DECLINE_SPELLS:
                self.log.info("%s agrees to this peer's unmasking requests again (round %d)", agreement.sender,
                              agreement.round)

    def take_decline(self, decline: Decline) -> None:
        """A member's decline of the open unmasking: it will not answer this stage (logged as a warning the first time
        for each neighbour while its declines last); raise Rejected for one addressed to another peer, not awaited
        (``take_agreement``), a second one, or one from a member that already answered this stage."""
        if decline.recipient != self.neighbourhoods.me:
            raise Rejected("stale", f"a decline of {decline.recipient}'s unmasking, not this peer's", decline.sender)
        self._check_awaited(decline, "a decline", self._reveals if self._confirmed else self._agreements)
        self._declined(decline.sender, decline.round, decline.reason)

    def take_resumed(self, notice: Resumed) -> None:
        """A neighbour resumed at ``notice.round`` from its checkpoint: if it is a member of the open unmasking that still
        owes this stage's answer and the round is at most the one it resumed at, taken as its decline (reason
        ``resumed``: it refuses that round's requests and confirmations, ``Contributor.agree``, and those sent to it
        died with its last process); otherwise nothing."""
        if self._unmasking is None or not self._unmasking[0] <= notice.round or notice.sender not in self._unmasking[1]:
            return
        if notice.sender in (self._reveals if self._confirmed else self._agreements) or notice.sender in self._declines:
            return
        self._declined(notice.sender, self._unmasking[0], "resumed")

    def _declined(self, sender: str, round_: int, reason: str) -> None:
        """``sender`` will not answer this stage of the unmasking of ``round_``, for ``reason``: noted and logged."""
        self._declines.add(sender)
        spell_begins = sender not in self._declining
        if spell_begins:
            self._decline_spells[sender] += 1
        spells = self._decline_spells[sender]
        logged = spell_begins and spells <= LOGGED_DECLINE_SPELLS
        note = (" (logged again once it agrees again)" if spells < LOGGED_DECLINE_SPELLS else
                " (its later declines are logged at debug level only)")
        self.log.log(logging.WARNING if logged else logging.DEBUG,
                     "%s declined this peer's unmasking of round %d (reason: %s; its log says more)%s",
                     sender, round_, reason, note if logged else "")
        self._declining.add(sender)

    def confirm(self) -> dict[str, bytes]:
        """Stage 3: once every contributor agreed, the confirmation for each (the others' vouches for it); nothing
        before that."""
        if not self.agreed() or self._confirmed:
            return {}
        self._confirmed = True
        round_ = self._unmasking[0]
        return {w: self.neighbourhoods.confirm_frame(w, self._agreements, round_) for w in self._unmasking[1]}

    def withdraw(self) -> dict[str, bytes]:
        """The open unmasking given up before its confirmations (a member declined, or the wait ran out): a notice
        that asks nothing for each contributor of its set that did not decline, so that one which agreed stops
        waiting for a confirmation that will not come (after its last round, ``final_answered``). Nothing once
        confirmed, or with no unmasking open."""
        if self._unmasking is None or self._confirmed:
            return {}
        round_, received = self._unmasking
        return {w: self.neighbourhoods.unmask_frame(w, {}, round_) for w in received if w not in self._declines}

    def settled(self) -> bool:
        """Whether the open stage of the unmasking awaits nothing more: before the confirmations, every contributor
        agreed or one declined (the set cannot be confirmed); after them, every contributor revealed or declined."""
        if self._unmasking is None:
            return False
        if not self._confirmed:
            return self.agreed() or bool(self._declines)
        return len(self._reveals) + len(self._declines) == len(self._unmasking[1])

    def take_reveal(self, reveal: Reveal) -> None:
        """Stage 4: keep a contributor's reveal; raise Rejected for one this peer is not awaiting, or a second answer."""
        self._check_awaited(reveal, "a reveal", self._reveals)
        if not self._confirmed:
            raise Rejected("stale", f"a reveal for round {reveal.round} before the confirmations", reveal.sender)
        self._reveals[reveal.sender] = reveal

    def close(self, model: GenerativeModel, ess: float, *, noisy: bool = False) -> np.ndarray | None:
        """Stage 5: the sum (size,) of the contributors' statistics (``noisy``: with distributed noise shares, its
        count noise centred), or None if too few arrived (``open``) or a mask cannot be removed; the unmasking is closed
        either way."""
        if self._unmasking is None:
            return None
        _, received = self._unmasking
        self._unmasking = None
        if not self._confirmed:
            return None
        return self.neighbourhoods.unmask({w: message.words for w, message in received.items()}, self._reveals, model, ess,
                                           noisy=noisy)

    @property
    def reveals(self) -> int:
        """Reveals received for the last unmasking."""
        return len(self._reveals)

    @property
    def agreements(self) -> int:
        """Agreements received for the last unmasking."""
        return len(self._agreements)

    @property
    def declines(self) -> int:
        """Declines received for the last unmasking."""
        return len(self._declines)
