"""A peer's secure-aggregation session: the stages of ``crc.nodes.secure_aggregation`` as the round driver calls them.

Each round, as a contributor, the peer sends every neighbour its statistics masked for that neighbour's
neighbourhood (``frames``) and answers the neighbours' unmasking requests (``answer``). As a recipient (with at
least two neighbours) it then, after gathering the round's masked statistics:

1. ``open``: names the contributors whose words arrived and builds the unmasking request for every neighbour;
2. ``take_reveal``: keeps each contributor's reveal (a reveal for another round, or from a peer not asked, is
   refused: the stages cannot be taken out of order);
3. ``close``: removes the masks and returns the contributors' sum, or None if it cannot be unmasked.

After its last round the peer still answers the requests for that round (``final_answered``), since its neighbours
unmask after its last message. The session keeps only the current round's reveals: its state is bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from crc.core.models.base import GenerativeModel
from crc.nodes.metrics import Metrics
from crc.nodes.secure_aggregation import Refused, SecureNeighbourhoods
from crc.nodes.settings import SecureAggregationKeys
from crc.nodes.wire import Masked, Rejected, Reveal, Unmask


class SecureAggregationSession:
    """Secure aggregation for peer ``me`` of run ``run`` with neighbours ``peers`` over ``rounds`` rounds; refusals
    are counted in ``metrics`` and logged to ``log``."""

    def __init__(self, me: str, run: str, peers: tuple[str, ...], keys: SecureAggregationKeys, *, rounds: int,
                 metrics: Metrics, log: logging.Logger):
        self.neighbourhoods = SecureNeighbourhoods(me, run, peers, keys)
        self.peers, self.rounds, self.metrics, self.log = peers, rounds, metrics, log
        self._unmasking: tuple[int, dict[str, Masked]] | None = None  # (round, survivors' masked statistics)
        self._reveals: dict[str, Reveal] = {}
        self._final_asked: set[str] = set()  # neighbours that sent their unmasking request for the last round
        self._refused_senders: set[str] = set()  # neighbours whose requests were refused (logged once each)

    @property
    def receives_masked(self) -> bool:
        """Whether this peer's neighbours send it masked statistics (it has at least two neighbours)."""
        return self.neighbourhoods.receives_masked

    def frames(self, stats: np.ndarray, round_: int, *, schema_id: str, ess: float, plain: bytes) -> dict[str, bytes]:
        """The frame for each neighbour carrying ``stats`` (size,) of ``round_``: masked for its neighbourhood, or
        ``plain`` where that neighbourhood is too small to hide them."""
        return {address: self.neighbourhoods.masked_frame(address, stats, round_, schema_id=schema_id, ess=ess) or plain
                for address in self.peers}

    def answer(self, request: Unmask) -> bytes | None:
        """This peer's reveal for a neighbour's unmasking request; None for a notice that asks nothing, or for a
        request refused (counted; logged as a warning the first time for each neighbour)."""
        if request.round == self.rounds - 1:
            self._final_asked.add(request.sender)
        try:
            return self.neighbourhoods.reveal_frame(request)
        except Refused as refusal:
            self.metrics.reveals_refused += 1
            level = logging.DEBUG if request.sender in self._refused_senders else logging.WARNING  # a flood logs once
            self._refused_senders.add(request.sender)
            self.log.log(level, "refused %s's unmasking request for round %d: %s", request.sender, request.round, refusal)
            return None

    def final_answered(self) -> bool:
        """Whether every neighbour this peer's statistics reach masked has sent its request for the last round."""
        return set(self.neighbourhoods.protected) <= self._final_asked

    def open(self, received: Mapping[str, Masked], round_: int) -> dict[str, bytes]:
        """Stage 1: the unmasking request for every neighbour (to one left out of ``received``, a notice); the
        unmasking of ``round_`` is open if at least two contributors' statistics arrived."""
        self._reveals = {}
        self._unmasking = (round_, dict(received)) if len(received) >= 2 else None
        return {address: self.neighbourhoods.unmask_frame(address, received, round_) for address in self.peers}

    @property
    def unmasking(self) -> bool:
        """Whether reveals are awaited (between ``open`` and ``close``)."""
        return self._unmasking is not None

    def revealed(self) -> bool:
        """Whether every contributor of the open unmasking has revealed."""
        return self._unmasking is not None and len(self._reveals) == len(self._unmasking[1])

    def take_reveal(self, reveal: Reveal) -> None:
        """Stage 2: keep a contributor's reveal; raise Rejected for one this peer is not awaiting, or a second one."""
        if self._unmasking is None or reveal.round != self._unmasking[0] or reveal.sender not in self._unmasking[1]:
            raise Rejected("stale", f"a reveal for round {reveal.round} that this peer is not unmasking", reveal.sender)
        if reveal.sender in self._reveals:
            raise Rejected("duplicate", f"second reveal for round {reveal.round}", reveal.sender)
        self._reveals[reveal.sender] = reveal

    def close(self, model: GenerativeModel, ess: float) -> np.ndarray | None:
        """Stage 3: the sum (size,) of the contributors' statistics, or None if fewer than two arrived or a mask
        cannot be removed; the unmasking is closed either way."""
        if self._unmasking is None:
            return None
        _, received = self._unmasking
        self._unmasking = None
        return self.neighbourhoods.unmask({w: message.words for w, message in received.items()}, self._reveals, model, ess)

    @property
    def reveals(self) -> int:
        """Reveals received for the last unmasking."""
        return len(self._reveals)
