"""Which neighbours a peer waits for, and until when.

A round waits ``timeout_s`` for the neighbours' statistics; the first round of a fresh run waits
``first_round_timeout_s`` from the start, and no later round gives up before then (the peers' start-up). A
neighbour that misses ``down_after`` rounds in a row is marked down: no longer waited for until it sends again.
Counts go into the peer's ``Metrics`` (missing rounds, rounds down, seconds down); both transitions are logged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection

from crc.nodes.metrics import Metrics


class Liveness:
    """The neighbours ``peers`` of one peer: who is down since when (on ``clock``), and each round's deadline."""

    def __init__(self, peers: tuple[str, ...], *, timeout_s: float, first_round_timeout_s: float, down_after: int,
                 clock: Callable[[], float], metrics: Metrics, log: logging.Logger):
        self.peers, self.timeout_s, self.first_round_timeout_s = peers, timeout_s, first_round_timeout_s
        self.down_after, self.clock, self.metrics, self.log = down_after, clock, metrics, log
        self.down: dict[str, float] = {}
        """Neighbours marked down -> since when, on ``clock``."""
        self._misses = {peer: 0 for peer in peers}
        self._startup_deadline = -math.inf  # on ``clock``: no wait of a fresh run gives up before it

    def start_fresh_run(self) -> None:
        """The peers may still be starting: the first-round window opens now."""
        self._startup_deadline = self.clock() + self.first_round_timeout_s

    def deadline(self, waiting_since: float) -> float:
        """When a round whose wait began at ``waiting_since`` gives up on the neighbours still missing."""
        return max(waiting_since + self.timeout_s, self._startup_deadline)

    @property
    def awaited(self) -> list[str]:
        """The neighbours a round waits for: those not down."""
        return [peer for peer in self.peers if peer not in self.down]

    @property
    def all_down(self) -> bool:
        return len(self.down) == len(self.peers) > 0

    def end_round(self, received: Collection[str], waited_s: float, round_: int) -> None:
        """Count the neighbours missing from ``received`` in round ``round_`` (1-based, as logged); mark down those
        that missed ``down_after`` rounds in a row."""
        for peer in self.peers:
            if peer in received:
                self._misses[peer] = 0
                continue
            self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
            self._misses[peer] += 1
            if peer in self.down:
                self.metrics.down_rounds[peer] = self.metrics.down_rounds.get(peer, 0) + 1
                continue
            self.log.warning("round %d: no statistics from %s within %.1f s", round_, peer, waited_s)
            if self._misses[peer] >= self.down_after:
                self.down[peer] = self.clock()
                self.log.warning("round %d: %s missed %d rounds in a row: marked down, no longer waited for until it "
                                 "sends again", round_, peer, self._misses[peer])

    def heard_from(self, peer: str, round_: int) -> None:
        """``peer``'s statistics arrived during round ``round_`` (1-based): a neighbour marked down is waited for again."""
        if peer not in self.down:
            return
        down_s = self.clock() - self.down.pop(peer)
        self.metrics.downtime_s[peer] = self.metrics.downtime_s.get(peer, 0.0) + down_s
        self._misses[peer] = 0
        self.log.info("round %d: %s sent again after %.1f s down; waiting for it again", round_, peer, down_s)

    def close(self) -> None:
        """At the end of a run: the neighbours still down count their time down until now."""
        for peer, since in self.down.items():
            self.metrics.downtime_s[peer] = self.metrics.downtime_s.get(peer, 0.0) + self.clock() - since
