"""A hybrid partition's exchange across groups: the peer holding block b of group g averages its block's statistics
with the peers holding block b in the neighbouring groups (on the graph over the groups), as a horizontal peer does
with its neighbours (``crc.nodes.peer``): the same statistics frames (``crc.nodes.wire``, with the block model's
schema id), the same ``Inbox`` (early frames kept for their round, bounded) and ``Liveness`` (a neighbour that
misses ``down_after`` rounds is no longer waited for, until it sends again).

Round t: every peer sends its block's statistics of round t - 1; once its neighbours' are in (or the wait ran out)
it averages them with its own (the closed neighbourhood's mean), and the group's step starts from that average.

As a horizontal peer does, it keeps the frames of its last rounds (``crc.nodes.resend``) and sends them again, once,
to a block neighbour that tells it resumed from its checkpoint; a copy of a frame held or just taken (a block
neighbour sent it again after this peer restarted) is dropped, uncounted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from crc.core.aggregation import peer_average
from crc.core.models.base import GenerativeModel
from crc.nodes.inbox import Inbox
from crc.nodes.liveness import Liveness
from crc.nodes.metrics import Metrics
from crc.nodes.resend import Resends
from crc.nodes.settings import PeerSettings
from crc.nodes.wire import Expectation, Message, decode, encode


class BlockGossip:
    """The statistics (size,) of block ``part`` exchanged with ``neighbours`` (addresses) at ESS ``ess``."""

    def __init__(self, part: GenerativeModel, neighbours: tuple[str, ...], *, ess: float, settings: PeerSettings,
                 rounds: int, clock: Callable[[], float], metrics: Metrics, log: logging.Logger):
        self.part, self.neighbours, self.ess, self.settings, self.clock = part, neighbours, float(ess), settings, clock
        self.expect = Expectation(run=settings.run, schema_id=part.schema_id, ess=self.ess, size=part.size,
                                  neighbours=frozenset(neighbours), model=part, known_keys=settings.known_keys)
        self.inbox = Inbox(rounds=rounds, window=settings.window_rounds)
        self.liveness = Liveness(neighbours, timeout_s=settings.timeout_s,
                                 first_round_timeout_s=settings.first_round_timeout_s, down_after=settings.down_after,
                                 clock=clock, metrics=metrics, log=log)
        self.resends = Resends(log)
        """This block's statistics frames of the last rounds, for a block neighbour that restarted."""
        self.round = 0
        """The round whose statistics are awaited, or will be next."""
        self.awaiting = False
        """Whether the round's wait is on (from ``await_round`` to ``average``)."""
        self.deadline = float("inf")
        self._since = 0.0

    def decode(self, frame: bytes, key: str | None) -> Message:
        """A neighbour's statistics frame, checked as a horizontal peer checks it (``wire.decode``)."""
        return decode(frame, self.expect, key)

    def send(self, stats: np.ndarray, round_: int) -> list[tuple[str, bytes]]:
        """This block's statistics (size,) of ``round_`` to every block neighbour: (address, frame) pairs, the frames
        kept to be sent again."""
        frame = encode(run=self.settings.run, sender=self.settings.bind, round_=round_, schema_id=self.part.schema_id,
                       ess=self.ess, stats=stats)
        self.resends.record(round_, dict.fromkeys(self.neighbours, frame))
        return [(peer, frame) for peer in self.neighbours]

    def await_round(self, round_: int) -> None:
        """Wait for the neighbours' statistics of ``round_`` from now."""
        self.round, self.awaiting, self._since = round_, True, self.clock()
        self.liveness.begin_round(round_)
        self.deadline = self.liveness.deadline()

    def take(self, message: Message) -> None:
        """Keep a neighbour's statistics for its round (raise Rejected if they cannot be): an earlier round's are stale,
        a later one's are kept (beyond the window only its latest, ``Inbox``); a copy of one held or taken is dropped."""
        if not self.inbox.is_copy(message):
            self.inbox.put(message, self.round)
        self.liveness.statistics_from(message.sender, message.round)

    @property
    def complete(self) -> bool:
        """Every neighbour not down has sent its statistics of the awaited round."""
        return self.awaiting and self.inbox.complete(self.round, self.liveness.awaited(self.round))

    def average(self, own: np.ndarray) -> np.ndarray:
        """The closed neighbourhood's mean (size,) of the awaited round: ``own`` and what arrived (the wait is over)."""
        received = self.inbox.take(self.round)
        self.liveness.end_round(received)
        self.round, self.awaiting, self.deadline = self.round + 1, False, float("inf")
        return peer_average(own, [received[peer].stats for peer in self.neighbours if peer in received])
