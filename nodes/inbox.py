"""The neighbours' statistics a peer has received, kept for the round they belong to.

A frame for the awaited round, or an early one at most ``window`` rounds after it, gets a slot of its own (one per
neighbour and round); a stale one (an earlier round), one beyond the run's rounds or the window, a second one for
the same slot, and one of the wrong kind (plain where masked statistics are expected, or the reverse) are refused
with their cause. What is held is thus at most neighbours x (window + 1) frames.
"""

from __future__ import annotations

from crc.nodes.wire import Masked, Message, Rejected


class Inbox:
    """Received statistics by round and sender, for a run of ``rounds`` rounds; ``masked``: whether this peer
    receives its neighbours' statistics masked (secure aggregation), else plain."""

    def __init__(self, *, rounds: int, window: int, masked: bool = False):
        self.rounds, self.window, self.masked = rounds, window, masked
        self._slots: dict[int, dict[str, Message | Masked]] = {}  # round -> sender -> its statistics message

    def put(self, message: Message | Masked, awaited: int) -> None:
        """Keep ``message`` for its round while the peer awaits round ``awaited``; raise Rejected if it cannot be."""
        if isinstance(message, Masked) != self.masked:
            expected = "masked" if self.masked else "plain"
            raise Rejected("type", f"{type(message).__name__.lower()} statistics; this peer expects {expected} ones",
                           message.sender)
        if message.round < awaited:
            raise Rejected("stale", f"round {message.round} arrived while waiting for round {awaited}", message.sender)
        if message.round >= self.rounds:
            raise Rejected("malformed", f"round {message.round} is beyond this run's {self.rounds} rounds", message.sender)
        if message.round > awaited + self.window:  # keeps the buffer of early rounds bounded
            raise Rejected("ahead", f"round {message.round} while waiting for round {awaited} (window {self.window})",
                           message.sender)
        slot = self._slots.setdefault(message.round, {})
        if message.sender in slot:
            raise Rejected("duplicate", f"second message for round {message.round}", message.sender)
        slot[message.sender] = message

    def complete(self, round_: int, senders) -> bool:
        """Whether every one of ``senders`` has sent its statistics of ``round_``."""
        slot = self._slots.get(round_, {})
        return all(sender in slot for sender in senders)

    def take(self, round_: int) -> dict[str, Message | Masked]:
        """The statistics of ``round_`` by sender, removed with those of every earlier round."""
        for old in [r for r in self._slots if r < round_]:
            del self._slots[old]
        return self._slots.pop(round_, {})
