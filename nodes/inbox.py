"""The neighbours' statistics a peer has received, kept for the round they belong to.

A frame for the awaited round, or an early one at most ``window`` rounds after it, gets a slot of its own (one per
neighbour and round). Of a neighbour's frames further ahead only the latest is kept (it replaces the one before):
it tells how far the neighbour has got, and the peer may skip ahead to it (``Peer._catch_up``). A stale frame (an
earlier round), one beyond the run's rounds, a second one for the same slot, and one of the wrong kind (plain where
masked statistics are expected, or the reverse) are refused with their cause. What is held is thus at most
neighbours x (window + 3) frames, the last round taken included.

A neighbour re-sends its frames to a peer that restarted (``crc.nodes.resend``), so a frame may come twice: a copy
of a frame held, or of one of the last round taken, is a copy (``is_copy``), which the peer drops without counting it
as received or rejected; taking it is idempotent.
"""

from __future__ import annotations

from crc.nodes.wire import Masked, Message, Rejected


class Inbox:
    """Received statistics by round and sender, for a run of ``rounds`` rounds; ``masked``: whether this peer
    receives its neighbours' statistics masked (secure aggregation), else plain."""

    def __init__(self, *, rounds: int, window: int, masked: bool = False):
        self.rounds, self.window, self.masked = rounds, window, masked
        self._slots: dict[int, dict[str, Message | Masked]] = {}  # round -> sender -> its statistics message
        self._taken: dict[str, Message | Masked] = {}  # the last round taken: sender -> its statistics message

    def put(self, message: Message | Masked, awaited: int) -> Message | Masked | None:
        """Keep ``message`` for its round while the peer awaits round ``awaited``; returns the frame of the same
        sender beyond the window that it replaces (None if none); raise Rejected if it cannot be kept."""
        if isinstance(message, Masked) != self.masked:
            expected = "masked" if self.masked else "plain"
            raise Rejected("type", f"{type(message).__name__.lower()} statistics; this peer expects {expected} ones",
                           message.sender)
        if message.round < awaited:
            raise Rejected("stale", f"round {message.round} arrived while waiting for round {awaited}", message.sender)
        if message.round >= self.rounds:
            raise Rejected("malformed", f"round {message.round} is beyond this run's {self.rounds} rounds", message.sender)
        slot = self._slots.setdefault(message.round, {})
        if message.sender in slot:
            raise Rejected("duplicate", f"second message for round {message.round}", message.sender)
        replaced = None
        if message.round > awaited + self.window:  # only the latest frame beyond the window: bounded
            for round_ in [r for r in self._slots if r > awaited + self.window and message.sender in self._slots[r]]:
                replaced = self._slots[round_].pop(message.sender)
                if not self._slots[round_]:
                    del self._slots[round_]
        slot[message.sender] = message
        return replaced

    def is_copy(self, message: Message | Masked) -> bool:
        """Whether ``message`` is a copy of the one its sender sent for its round, held or of the last round taken
        (the same statistics, or the same masked words and shares)."""
        held = self._slots.get(message.round, {}).get(message.sender)
        taken = self._taken.get(message.sender)
        return any(kept is not None and kept.round == message.round and _same(kept, message) for kept in (held, taken))

    def complete(self, round_: int, senders) -> bool:
        """Whether every one of ``senders`` has sent its statistics of ``round_``."""
        slot = self._slots.get(round_, {})
        return all(sender in slot for sender in senders)

    def holds(self, round_: int) -> bool:
        """Whether any statistics of ``round_`` are kept."""
        return bool(self._slots.get(round_))

    def earliest(self) -> int | None:
        """The earliest round of which statistics are kept, or None."""
        return min((round_ for round_, slot in self._slots.items() if slot), default=None)

    def take(self, round_: int) -> dict[str, Message | Masked]:
        """The statistics of ``round_`` by sender, removed with those of every earlier round."""
        for old in [r for r in self._slots if r < round_]:
            del self._slots[old]
        self._taken = self._slots.pop(round_, {})
        return dict(self._taken)


def _same(a: Message | Masked, b: Message | Masked) -> bool:
    """Whether two statistics messages of one sender and round carry the same bytes: bit for bit, not equal values
    (-0.0 equals 0.0 but is another frame)."""
    if isinstance(a, Message) and isinstance(b, Message):
        return a.stats.tobytes() == b.stats.tobytes()
    if isinstance(a, Masked) and isinstance(b, Masked):
        return a.words.tobytes() == b.words.tobytes() and a.shares == b.shares
    return False
