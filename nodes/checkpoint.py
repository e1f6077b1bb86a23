"""A peer's checkpoint: its round, statistics and metrics, rewritten atomically every round."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from crc.core.errors import CRCError
from crc.core.files import atomic_write_json, read_json

FORMAT = "crc-checkpoint/1"
FILE_NAME = "checkpoint.json"


def save(directory, *, identity: dict, round_: int, stats: np.ndarray, metrics: dict) -> None:
    atomic_write_json(Path(directory) / FILE_NAME, {"format": FORMAT, "identity": identity, "round": int(round_),
                                                    "statistics": np.asarray(stats).tolist(), "metrics": metrics})


def completed_round(directory) -> int | None:
    """The round a checkpoint records (0 without a checkpoint), or None if it cannot be read."""
    path = Path(directory) / FILE_NAME
    if not path.exists():
        return 0
    try:
        round_ = read_json(path, what="checkpoint").get("round")
    except (CRCError, AttributeError):
        return None
    return round_ if isinstance(round_, int) and not isinstance(round_, bool) and round_ >= 0 else None


def load(directory, *, identity: dict, size: int) -> tuple[int, np.ndarray, dict] | None:
    """(round, statistics, metrics) of the checkpoint in ``directory``, or None if there is none.

    A checkpoint of another configuration (different address, neighbours,
    schema, ESS, ...) is refused rather than silently mixed in.
    """
    path = Path(directory) / FILE_NAME
    if not path.exists():
        return None
    obj = read_json(path, what="checkpoint")
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CRCError(f"{path}: not a crc checkpoint")
    if obj.get("identity") != identity:
        differs = sorted(k for k in set(identity) | set(obj.get("identity") or {})
                         if (obj.get("identity") or {}).get(k) != identity.get(k))
        raise CRCError(f"{path}: checkpoint of a different configuration ({', '.join(differs)} differ); "
                       "use another --checkpoint directory or delete it to start afresh")
    stats = obj.get("statistics")
    round_ = obj.get("round")
    if not isinstance(round_, int) or round_ < 0 or not isinstance(stats, list) or len(stats) != size \
            or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in stats):
        raise CRCError(f"{path}: damaged checkpoint (round or statistics invalid)")
    return round_, np.array(stats, dtype=np.float64), obj.get("metrics") or {}
