"""Files that survive a crash (atomic writes) and the one bounded reader of untrusted JSON files.

Every JSON file the project reads from outside — schema, features and blocks files, model file, checkpoint
header, results, graph, and the known-peers and neighbourhoods files of a secure deployment — goes through
``read_json`` (or ``parse_json`` for bytes already read): a size limit checked before reading, a nesting limit
checked before parsing (the stdlib parser recurses), no more values than ``MAX_JSON_MEMORY`` holds, no NaN/Infinity
or numbers that overflow a float, no integers of more than ``MAX_INT_DIGITS`` digits, no key twice in an object.
Every failure is a one-line CRCError naming the file. The values are then checked field by field with
``crc.core.fields`` before anything is built from them. ``crc.topologies`` reads graph files with it too: this module
imports only numpy and ``crc.core.errors``.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path

import numpy as np

from crc.core.errors import CRCError

MAX_JSON_BYTES = 256 * 2**20
MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects accepted; the project's files nest at most 5 deep."""
MAX_INT_DIGITS = 20
"""Longest integer literal accepted (int64 has 19 digits); longer ones cost quadratic time to parse."""
MAX_NUMBER_CHARS = 400
"""Longest number literal of a suspect shape (below) accepted; a float needs at most 17 significant digits."""
MAX_JSON_MEMORY = 2**30
"""Most memory the parsed value may take, estimated before parsing (``parsed_bytes``): the byte limits alone let a
400 MB model file of one long list take 4.8 GB before its length was refused."""
PARSED_BYTES = {b",": 32, b"[": 64, b"{": 64, b'""': 64, b":": 64}
"""Bytes a parsed value costs per separator, container, string and object member (measured with ``json.loads`` on
2^25 of each: a float about 27 B with its list slot, an empty list or a short string about 58, an object member
about 130 with its key)."""

_QUOTE = ord('"')
_SHAPES = bytes.maketrans(b"0123456789E", b"0000000000e")
"""Digits to 0 and E to e: the shapes of suspect numbers below become plain substrings, found at C speed."""
_SUSPECT_SHAPES = (b"0" * (MAX_INT_DIGITS + 1), b"e000", b"e+000")
"""Where a number may overflow a float (a 3-digit positive exponent, 21 digits) or be a too long integer."""
_NUMBER_BYTES = frozenset(b"0123456789+-.eE")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENING = np.frombuffer(b"[{", dtype=np.uint8)
_DEPTH_CHUNK = 2**20


def _process_umask() -> int:
    """The process's file-creation mask. Reading it means setting it: done once, at import, before any thread
    writes a file (and set to 0o077 meanwhile, so that a file created in between would only be more private)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


NEW_FILE_MODE = 0o666 & ~_process_umask()
"""Permissions of a new output file, as ``open`` would give it; ``mkstemp`` alone gives 0o600."""


def atomic_write_bytes(path, data: bytes, *, durable: bool = True, private: bool = False) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one, never a part.

    ``durable`` also flushes the data to the disk before the replace (fsync), so that the new file
    survives a power cut, not only a crash of the process; it costs milliseconds on most disks.
    The file gets the permissions the process's umask gives new files; ``private`` keeps it to its owner (0o600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if not private:
            os.chmod(handle, NEW_FILE_MODE)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            if durable:
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


def read_bytes(path, *, max_bytes: int, what: str, regular: bool = False) -> bytes:
    """The bytes of ``path`` if it holds at most ``max_bytes`` (refused before reading when its size says so);
    ``regular``: only a regular file (a file the program wrote itself), refused if it is a FIFO, device or directory.

    A FIFO is never waited for: opened without blocking, it reads as empty if no process has it open for writing
    (a blocking open waited for a writer forever); a pipe with a writer (``<(command)``) is read to its end.
    """
    try:
        with open(path, "rb", opener=_without_waiting) as stream:
            found = os.fstat(stream.fileno())
            if regular and not stat.S_ISREG(found.st_mode):
                raise CRCError(f"{path}: {what} is not a regular file; delete it")
            if found.st_size > max_bytes:
                raise CRCError(f"{path}: {what} larger than {max_bytes} bytes")
            os.set_blocking(stream.fileno(), True)  # a pipe's writer may write later; a regular file is unaffected
            raw = stream.read(max_bytes + 1)  # a pipe or device has no size: read one byte past the limit
    except OSError as exc:
        raise CRCError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise CRCError(f"{path}: {what} larger than {max_bytes} bytes")
    return raw


def _without_waiting(name, flags: int) -> int:
    """``open``'s opener that does not block on a FIFO without a writer."""
    return os.open(name, flags | os.O_NONBLOCK)


def read_json(path, *, max_bytes: int = MAX_JSON_BYTES, what: str = "JSON file", max_depth: int = MAX_JSON_DEPTH):
    """Parse the JSON file ``path`` within the limits above; anything else is a one-line CRCError naming the file."""
    return parse_json(read_bytes(path, max_bytes=max_bytes, what=what), source=path, what=what, max_depth=max_depth)


def parse_json(raw: bytes, *, source, what: str = "JSON", max_depth: int = MAX_JSON_DEPTH):
    """Parse JSON bytes (UTF-8, -16 or -32) from ``source`` (named in errors) within the limits above."""
    try:
        encoding = json.detect_encoding(raw)
        if encoding not in ("utf-8", "utf-8-sig"):
            raw = raw.decode(encoding).encode("utf-8")
        outside_strings = without_strings(raw)
    except (UnicodeError, LookupError):
        raise CRCError(f"{source}: {what} is not valid JSON (not UTF-8, -16 or -32 text)") from None
    if nesting_depth(outside_strings, stop_above=max_depth) > max_depth:
        raise CRCError(f"{source}: {what} nests arrays and objects more than {max_depth} deep")
    problem = _suspect_number(outside_strings)
    if problem:
        raise CRCError(f"{source}: {what} has {problem}")
    estimate = parsed_bytes(outside_strings)
    if estimate > MAX_JSON_MEMORY:
        raise CRCError(f"{source}: {what} holds too many values (about {estimate / 2**30:.1f} GiB parsed, more than "
                       f"{MAX_JSON_MEMORY / 2**30:g} GiB)")
    del outside_strings
    if not raw.strip():
        raise CRCError(f"{source}: {what} is empty")
    try:
        return json.loads(raw, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as exc:
        raise CRCError(f"{source}: {what} is not valid JSON (not UTF-8 text at byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CRCError(f"{source}: {what} is not valid JSON ({detail})") from None


def without_strings(raw: bytes) -> bytes:
    """UTF-8 JSON text with every string emptied (``"..."`` -> ``""``): what the checks below look at.

    Escaped backslashes go first, then escaped quotes, so every quote left delimits a string: a byte is inside one
    after an odd number of quotes. Counted in chunks, memory stays about the text's size (``re.sub`` kept a piece per
    string: 12 times the text of a file of short keys). The text of an unterminated string is dropped too (the parser
    refuses it).
    """
    text = np.frombuffer(raw.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=np.uint8)
    kept, inside = [], np.uint8(0)
    for start in range(0, len(text), _DEPTH_CHUNK):
        chunk = text[start:start + _DEPTH_CHUNK]
        quotes = chunk == _QUOTE
        parity = np.bitwise_xor.accumulate(quotes.view(np.uint8)) ^ inside  # 1 from an opening quote to its closing one
        kept.append(chunk[quotes | (parity == 0)].tobytes())
        inside = parity[-1]
    return b"".join(kept)


def parsed_bytes(outside_strings: bytes) -> int:
    """An upper estimate of the memory (bytes) that parsing JSON text whose strings were removed takes
    (``PARSED_BYTES``); linear time, no parsing."""
    return sum(cost * outside_strings.count(token) for token, cost in PARSED_BYTES.items())


def nesting_depth(outside_strings: bytes, *, stop_above: int | None = None) -> int:
    """How deep arrays and objects nest in JSON text whose strings were removed; linear time, memory bounded
    by chunks, no parsing. Counting stops once the depth exceeds ``stop_above``.

    An unbalanced text gets some depth; the parser refuses it afterwards.
    """
    brackets = np.frombuffer(outside_strings.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    depth = deepest = 0
    for start in range(0, len(brackets), _DEPTH_CHUNK):
        chunk = brackets[start:start + _DEPTH_CHUNK]
        running = depth + np.cumsum(np.where(np.isin(chunk, _OPENING), 1, -1))
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


def _suspect_number(text: bytes) -> str | None:
    """What is wrong with the first number literal of ``text`` that overflows a float, is an integer of more
    than ``MAX_INT_DIGITS`` digits or is longer than ``MAX_NUMBER_CHARS``, or None. Only literals of a suspect
    shape are looked at, each once."""
    shapes = text.translate(_SHAPES)
    for shape in _SUSPECT_SHAPES:
        at = shapes.find(shape)
        while at >= 0:
            start, end = at, at + len(shape)
            while start > 0 and at - start < MAX_NUMBER_CHARS and text[start - 1] in _NUMBER_BYTES:
                start -= 1
            while end < len(text) and end - start <= MAX_NUMBER_CHARS and text[end] in _NUMBER_BYTES:
                end += 1
            if end - start > MAX_NUMBER_CHARS or (start > 0 and text[start - 1] in _NUMBER_BYTES):
                return f"a number literal of more than {MAX_NUMBER_CHARS} characters"
            literal = text[start:end].decode("ascii")
            if not any(c in literal for c in ".eE"):
                return f"an integer of {len(literal.lstrip('-'))} digits (at most {MAX_INT_DIGITS})"
            try:
                finite = math.isfinite(float(literal))
            except ValueError:
                finite = True  # not a number: the parser says so
            if not finite:
                return f"a number that overflows a float ({literal[:30]})"
            at = shapes.find(shape, end)
    return None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object that names each key once: ``json`` keeps the last of duplicates silently, another reader may
    keep the first, so a file that names a key twice means two things."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"key {twice[:80]!r} appears twice in an object")
    return obj


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")
