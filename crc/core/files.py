"""Files that survive a crash: atomic writes, and JSON reads with a size limit."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from crc.core.errors import CRCError

MAX_JSON_BYTES = 256 * 2**20


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path, value) -> None:
    atomic_write_text(path, json.dumps(value, indent=1, allow_nan=False) + "\n")


def read_json(path, *, max_bytes: int = MAX_JSON_BYTES, what: str = "JSON file"):
    """Parse a JSON file of at most ``max_bytes``; anything else is a CRCError naming the file."""
    try:
        with open(path, "rb") as stream:
            raw = stream.read(max_bytes + 1)
    except OSError as exc:
        raise CRCError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise CRCError(f"{path}: {what} larger than {max_bytes} bytes")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CRCError(f"{path}: not valid JSON ({exc})") from None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")
