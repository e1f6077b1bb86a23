"""What a peer sent lately, kept so that a neighbour that restarted gets it again.

A peer killed and restarted resumes from its checkpoint at round R and awaits its neighbours' statistics of round R;
those they had sent its last process (of round R and later) died with it, and it used to wait its full ``--timeout``
for them. On resuming it tells its neighbours (a ``resumed`` notice, ``crc.nodes.wire``), and each re-sends it the
frames of those rounds it still holds, once. A vertical or hybrid group's peers do the same (``crc.nodes.vertical_peer``):
a member keeps its scores of its last passes for its label holder, a hybrid peer its block's statistics of its last
rounds for its block neighbours (``crc.nodes.block_gossip``).

* The frames are the very bytes queued then, never a recomputation: under local or distributed noise the same
  released value (nothing new for the accountant); under secure aggregation the same masked words and sealed shares,
  so the recipient holds nothing it did not hold before the restart (a second copy of one frame). What limits what
  it can unmask is unchanged: every member commits to one request set per recipient and round and refuses any other
  (``secure_aggregation.Contributor.agree``), and a restarted member refuses the rounds up to the one it resumed at;
  the recipient learns at most one sum of a round however many copies of the words it holds. A vertical member's
  masked scores (``crc.nodes.score_masks``) likewise go again as the same words, never masked anew: their masks,
  keyed by the pass and the transcript, cancel only in the sum of every member's words of that pass, which the
  label holder's last process could decode already.
* Only frames that were queued are held, for the last ``KEEP_ROUNDS`` rounds: at most neighbours x KEEP_ROUNDS
  frames.
* Each frame goes again to a neighbour at most once: a neighbour that repeats its notice (or floods it) gets at most
  one extra copy of each round, so it can never make a peer send more than twice what the run sends it. Its notices
  are logged for the first ``LOGGED_RESUMES`` times, then at debug level.
* Only a configured neighbour's notice is taken, over a connection with its key (``wire.check_origin``).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping

from crc.nodes.wire import Resumed

KEEP_ROUNDS = 2
"""Rounds of sent frames held. A peer gets at most one round ahead of a live neighbour's checkpoint (it needs that
neighbour's statistics of the round before), so for a neighbour restarted at once these are the round it resumed at
and the next; one that stayed dead longer finds its neighbours further on, and skips ahead to the rounds re-sent
(``Peer._catch_up``)."""
LOGGED_RESUMES = 3
"""A neighbour's resumed notices logged at info level; later ones at debug level."""


class Resends:
    """The frames this peer queued for each neighbour in its last ``keep`` rounds, and which were re-sent to whom;
    ``what`` the frames hold and ``unit`` (singular, plural) what their rounds are called, for the log."""

    def __init__(self, log: logging.Logger, keep: int = KEEP_ROUNDS, *, what: str = "statistics",
                 unit: tuple[str, str] = ("round", "rounds")):
        self.log, self.keep, self.what, self.unit = log, keep, what, unit
        self._frames: dict[int, dict[str, bytes]] = {}  # round -> neighbour -> the frame queued for it
        self._resent: dict[int, set[str]] = {}  # round -> neighbours its frames were re-sent to
        self._notices: collections.Counter = collections.Counter()  # neighbour -> its resumed notices so far

    def record(self, round_: int, frames: Mapping[str, bytes]) -> None:
        """``frames`` (neighbour -> frame) of ``round_`` were queued; a round sent again (after a resume) replaces
        its entry. Rounds ``keep`` or more before it are forgotten."""
        self._frames[round_] = dict(frames)
        self._resent[round_] = set()
        for old in [r for r in self._frames if r <= round_ - self.keep]:
            del self._frames[old], self._resent[old]

    def answer(self, notice: Resumed) -> list[bytes]:
        """The frames to send ``notice``'s sender again: those of its round and later held for it and not re-sent to
        it yet, oldest first (now counted as re-sent)."""
        sender = notice.sender
        rounds = sorted(r for r, frames in self._frames.items()
                        if r >= notice.round and sender in frames and sender not in self._resent[r])
        for r in rounds:
            self._resent[r].add(sender)
        self._notices[sender] += 1
        count = self._notices[sender]
        one, many = self.unit
        self.log.log(logging.INFO if count <= LOGGED_RESUMES else logging.DEBUG,
                     "%s resumed at %s %d: sending it again this peer's %s of %s%s", sender, one, notice.round, self.what,
                     f"{many} " + ", ".join(map(str, rounds)) if rounds else f"no {one} (none held, or sent again already)",
                     " (its later notices are logged at debug level only)" if count == LOGGED_RESUMES else "")
        return [self._frames[r][sender] for r in rounds]
