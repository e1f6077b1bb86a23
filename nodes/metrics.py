"""What a peer reports about its run: counts kept as it goes, checkpointed with its statistics and written into its
model file."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from crc.core.errors import CRCError
from crc.nodes.wire import CAUSES


@dataclass
class Metrics:
    """What a peer reports about its run (all counts cumulative)."""

    rounds_done: int = 0
    soft_loss: list = field(default_factory=list)
    round_ms: list = field(default_factory=list)
    messages_sent: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    send_dropped: int = 0
    rejected: dict = field(default_factory=lambda: {cause: 0 for cause in CAUSES})
    refused: dict = field(default_factory=dict)
    """Connections the transport refused, by cause (an unknown key, a plaintext client ...)."""
    missing: dict = field(default_factory=dict)
    """Per neighbour: rounds its statistics did not arrive."""
    down_rounds: dict = field(default_factory=dict)
    """Per neighbour: rounds it was marked down (not waited for)."""
    downtime_s: dict = field(default_factory=dict)
    """Per neighbour: seconds from being marked down to sending again (or to the end of the run)."""
    unmask_fallbacks: int = 0
    """Secure aggregation: rounds whose neighbours' masked statistics could not be unmasked (fewer than two arrived,
    or a mask could not be removed), so that the peer kept its own statistics."""
    reveals_refused: int = 0
    """Secure aggregation: unmasking requests this peer refused (they would have revealed more than a sum)."""
    checkpoint_failures: int = 0
    """Checkpoint writes that failed (the previous checkpoint was kept)."""
    aggregate_fallbacks: int = 0
    """Rounds whose neighbourhood average gave statistics the neighbours would reject, so that the round started
    from the peer's own statistics (``Peer._calibrate``)."""
    rounds_kept: int = 0
    """Of those, rounds whose local step from the peer's own statistics failed too, so that it kept its last ones."""
    rounds_skipped: int = 0
    """Rounds the peer skipped to catch up with neighbours that were ahead (no local step was run for them)."""
    notices_sent: int = 0
    """Waiting notices sent: frames telling the neighbours that this peer still waits (``crc.nodes.liveness``)."""
    notices_received: int = 0
    """Waiting notices received from the neighbours."""

    @classmethod
    def for_neighbours(cls, peers) -> Metrics:
        """Fresh metrics with a zero count for every neighbour in ``peers``."""
        return cls(missing={peer: 0 for peer in peers}, down_rounds={peer: 0 for peer in peers},
                   downtime_s={peer: 0.0 for peer in peers})

    def count_rejected(self, cause: str) -> None:
        self.rejected[cause] = self.rejected.get(cause, 0) + 1

    def count_sent(self, frames: int, frame_bytes: int) -> None:
        """``frames`` copies of a frame of ``frame_bytes`` bytes were queued for neighbours."""
        self.messages_sent += frames
        self.bytes_sent += frames * frame_bytes

    def count_refused(self, before: dict, now: dict) -> None:
        """The refused connections: those of earlier runs (``before``, a resumed checkpoint's) plus the transport's
        (``now``), by cause."""
        self.refused = {cause: before.get(cause, 0) + now.get(cause, 0) for cause in sorted({*before, *now})}

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, obj: dict) -> Metrics:
        """Metrics from a checkpoint; a known field of another type than its default's is a CRCError."""
        metrics = cls()
        for key, value in obj.items():
            if hasattr(metrics, key):
                if not _same_kind(getattr(metrics, key), value, seconds=key == "downtime_s"):
                    raise CRCError(f"metric {key!r} is not what a peer writes there")
                setattr(metrics, key, value)
        return metrics


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_kind(default, value, *, seconds: bool) -> bool:
    """Whether ``value`` is a metric of the kind of ``default``: a count; a list of numbers; a map of names to
    counts (to numbers of seconds if ``seconds``)."""
    if isinstance(default, list):
        return isinstance(value, list) and all(map(_number, value))
    if isinstance(default, dict):
        valid = (lambda v: _number(v) and v >= 0) if seconds else _count
        return isinstance(value, dict) and all(isinstance(k, str) and valid(v) for k, v in value.items())
    return _count(value)
