"""Which neighbours a round waits for, until when, and who is down: liveness that never punishes the living.

* A round waits ``timeout_s`` for the neighbours' statistics; only the first round of a fresh run waits
  ``first_round_timeout_s`` (the peers' start-up).
* A neighbour still waiting for its own neighbours says so (a ``waiting`` notice, every half timeout of its wait);
  a round that awaits that neighbour's next statistics then waits a timeout from each notice, at most
  ``max(timeout_s, first_round_timeout_s)`` beyond its own deadline. A live neighbour slowed by a dead one two hops
  away (or by a late start) is thus waited for, and its statistics are not lost.
* A neighbour that has sent a later round than the awaited one will not send the awaited one (its frames arrive in
  order): it is not waited for.
* A neighbour from which nothing at all arrived (no statistics of any round, no notice) during ``down_after``
  rounds in a row is marked down, whatever the round: rounds no longer wait for it until anything arrives from it
  again. A neighbour that sends, even late or behind, is never marked down.

``complete_rounds`` counts the rounds in a row in which every neighbour's statistics arrived (exact diffusion resumes
its correction only after ``crc.core.acceleration.SETTLE_ROUNDS`` of them); a run starts settled.

Counts go into the peer's ``Metrics`` (missing rounds, rounds down, seconds down); both transitions are logged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection

from crc.nodes.metrics import Metrics


class Liveness:
    """The neighbours ``peers`` of one peer: who is down since when (on ``clock``), how far each has got, and the
    deadline of the current round's wait."""

    def __init__(self, peers: tuple[str, ...], *, timeout_s: float, first_round_timeout_s: float, down_after: int,
                 clock: Callable[[], float], metrics: Metrics, log: logging.Logger):
        self.peers, self.timeout_s, self.first_round_timeout_s = peers, timeout_s, first_round_timeout_s
        self.down_after, self.clock, self.metrics, self.log = down_after, clock, metrics, log
        self.down: dict[str, float] = {}
        """Neighbours marked down -> since when, on ``clock``."""
        self.latest: dict[str, int] = {}
        """Each neighbour's round of its last statistics that arrived (frames of one sender arrive in order)."""
        self._silent = dict.fromkeys(peers, 0)  # rounds in a row without anything from the neighbour
        self._silent_s = dict.fromkeys(peers, 0.0)  # the seconds those rounds waited (notices may have extended them)
        self._heard: set[str] = set()  # neighbours heard from since the last round ended
        self._waiting_until: dict[str, float] = {}  # a neighbour's notice: its next statistics are waited for until then
        self._fresh_run = False
        self._round, self._started, self._base = 0, -math.inf, -math.inf
        self._notices = 0  # notices due so far in the current wait
        self.complete_rounds = math.inf
        """Rounds in a row, up to the last ended, in which every neighbour's statistics arrived (a run starts settled)."""

    @property
    def extension_s(self) -> float:
        """Longest a round waits beyond its own deadline for neighbours that say they are waiting."""
        return max(self.timeout_s, self.first_round_timeout_s)

    def start_run(self, *, fresh: bool) -> None:
        """A run begins now; ``fresh``: at round 0, the neighbours may still be starting."""
        self._fresh_run = fresh

    def begin_round(self, round_: int) -> None:
        """The wait for the neighbours' statistics of ``round_`` begins now."""
        first = self._fresh_run and round_ == 0
        self._round, self._started = round_, self.clock()
        self._base = self._started + (self.first_round_timeout_s if first else self.timeout_s)
        self._waiting_until, self._notices = {}, 0

    @property
    def wait_s(self) -> float:
        """The current round's own timeout (s): ``first_round_timeout_s`` in a fresh run's round 0, else
        ``timeout_s``."""
        return self._base - self._started

    def deadline(self) -> float:
        """When the current round gives up on the neighbours still missing: its own timeout, or later while an
        awaited neighbour says it is waiting."""
        extended = max(self._waiting_until.values(), default=-math.inf)
        return max(self._base, min(extended, self._base + self.extension_s))

    def awaited(self, round_: int) -> list[str]:
        """The neighbours whose statistics of ``round_`` may still come: not down, and not already past it."""
        return [peer for peer in self.peers if peer not in self.down and self.latest.get(peer, -1) < round_]

    @property
    def up(self) -> list[str]:
        return [peer for peer in self.peers if peer not in self.down]

    @property
    def all_down(self) -> bool:
        return len(self.down) == len(self.peers) > 0

    def notice_due(self) -> bool:
        """Whether this peer should tell its neighbours that it is still waiting (every half timeout of a wait)."""
        due = int((self.clock() - self._started) // (self.timeout_s / 2))
        if due > self._notices:
            self._notices = due
            return True
        return False

    def heard(self, peer: str) -> None:
        """Anything valid arrived from ``peer`` (statistics of any round, a notice, secure aggregation's frames): it
        is alive. A neighbour marked down is waited for again."""
        self._heard.add(peer)
        if peer not in self.down:
            return
        down_s = self.clock() - self.down.pop(peer)
        self.metrics.downtime_s[peer] = self.metrics.downtime_s.get(peer, 0.0) + down_s
        self._silent[peer], self._silent_s[peer] = 0, 0.0
        self.log.info("round %d: %s sent again after %.1f s down; waiting for it again", self._round + 1, peer, down_s)

    def statistics_from(self, peer: str, round_: int) -> None:
        """``peer``'s statistics of ``round_`` arrived (kept or not)."""
        self.latest[peer] = round_
        self._waiting_until.pop(peer, None)
        self.heard(peer)

    def waiting(self, peer: str, round_: int) -> None:
        """``peer`` says it still awaits its neighbours' statistics of ``round_``: if its next statistics are those
        the current round awaits, wait for them a timeout from now."""
        self.heard(peer)
        if round_ + 1 == self._round and peer in self.awaited(self._round):
            self._waiting_until[peer] = self.clock() + self.timeout_s

    def end_round(self, received: Collection[str]) -> None:
        """Count the neighbours missing from ``received`` in the current round; mark down those from which nothing
        arrived in ``down_after`` rounds in a row."""
        waited_s = self.clock() - self._started
        self.complete_rounds = self.complete_rounds + 1 if all(peer in received for peer in self.peers) else 0
        for peer in self.peers:
            self._silent[peer] = 0 if peer in self._heard else self._silent[peer] + 1
            self._silent_s[peer] = 0.0 if peer in self._heard else self._silent_s[peer] + waited_s
            if peer in received:
                continue
            self.metrics.missing[peer] = self.metrics.missing.get(peer, 0) + 1
            if peer in self.down:
                self.metrics.down_rounds[peer] = self.metrics.down_rounds.get(peer, 0) + 1
                continue
            self.log.warning("round %d: no statistics from %s within %.1f s", self._round + 1, peer, waited_s)
            if self._silent[peer] >= self.down_after:
                self.down[peer] = self.clock()
                self.log.warning("round %d: nothing from %s in %d rounds in a row: marked down, no longer waited for "
                                 "until it sends again", self._round + 1, peer, self._silent[peer])
        self._heard = set()

    def silent_s(self, peers) -> float:
        """The longest that any of ``peers`` has been silent, in seconds of the rounds' waits up to the last ended."""
        return max((self._silent_s[peer] for peer in peers), default=0.0)

    def close(self) -> None:
        """At the end of a run: the neighbours still down count their time down until now."""
        for peer, since in self.down.items():
            self.metrics.downtime_s[peer] = self.metrics.downtime_s.get(peer, 0.0) + self.clock() - since
