"""A peer's checkpoint: its last completed round, statistics and metrics, rewritten every round.

The checkpoint of round ``r`` is one binary file, ``checkpoint.<r>.bin``, compact so that writing it
every round costs little:

======  =====================================================================
bytes   content
======  =====================================================================
8       ``MAGIC`` (format name and version)
4       header length ``h``, unsigned little-endian
4       CRC-32 of everything after these 16 bytes, unsigned little-endian
h       header: compact UTF-8 JSON ``{"identity", "round", "size", "metrics", "series"}``
8·size  the statistics, raw little-endian float64
8·n     each metrics series (``"series"``: name -> length n, in that order), raw little-endian float64
======  =====================================================================

The series are the metrics' per-round lists (the local loss, the round times): as JSON in the header they cost a
round about 100 ms at 100,000 rounds (0.1 ms at 64), most of a round's time in a long run; raw they cost a fraction of
that. A checkpoint of the previous version (``OLD_MAGIC``: no series, every metric in the header) is read as well.

It is written to a temporary file and renamed to its name, then the older checkpoints are removed:
a reader sees whole files only, and a killed peer keeps its last one. Renaming onto a *new* name is
what makes this cheap: on ext4 a rename or truncation that replaces a file's data starts writing it
to the disk (``auto_da_alloc``), which cost 0.5-5 ms per round. Loading checks every field before
anything is used: length and CRC, the header by the bounded JSON reader, the round against the name
and ``0 <= round <= rounds``, the identity (a checkpoint of another configuration is refused, not
half-used), the statistics' length and finiteness, and the metrics' types.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path

import numpy as np

from crc.core import fields
from crc.core.errors import CRCError
from crc.core.files import atomic_write_bytes, parse_json, read_bytes
from crc.protocol.rules import MAX_ROUNDS

NAME = re.compile(r"checkpoint\.(\d{1,12})\.bin")
"""File name of the checkpoint of a round."""
OLD_FILE_NAME = "checkpoint.json"
"""The JSON checkpoint of earlier versions: refused with a clear message, never silently ignored."""
MAGIC = b"CRCckpt\x03"
OLD_MAGIC = b"CRCckpt\x02"
PREFIX = struct.Struct("<8sII")
MAX_HEADER_BYTES = 8 * 2**20
"""Longest header: its identity and counts take kilobytes (a few maps of one entry per neighbour); a version-2
checkpoint of ``MAX_ROUNDS`` rounds held its series there too, about 4 MB. Parsing takes some 20 times a header's
bytes, which this bounds (about 160 MB)."""
MAX_STATISTICS = 2**28
"""Largest statistics vector a checkpoint may hold (2 GiB of float64)."""
MAX_SERIES_VALUES = 4 * (MAX_ROUNDS + 1)
"""Most values all the metrics series of a checkpoint may hold together (3.2 MB of float64; a peer writes two a round
and one at its start, at most ``MAX_ROUNDS`` rounds)."""
DURABLE = False
"""No fsync per round: it cost about 5 ms of a peer's round (measured, 2-core VM). A crash of the peer
loses nothing; after a power cut the newest checkpoint may be torn, which the length and CRC checks
refuse (delete it and the peer resumes from the one before, or afresh; a masking peer starts afresh under a new run
id instead)."""


def encode(*, identity: dict, round_: int, stats: np.ndarray, metrics: dict) -> bytes:
    """The bytes of a checkpoint file; the lists among ``metrics``' values (flat, of numbers) go as raw series."""
    stats = np.ascontiguousarray(stats, dtype="<f8")
    series = {name: np.asarray(values, dtype="<f8") for name, values in metrics.items() if isinstance(values, list)}
    if any(values.ndim != 1 for values in series.values()):
        raise ValueError("a metrics list must be flat, of numbers")
    scalars = {name: value for name, value in metrics.items() if name not in series}
    header = json.dumps({"identity": identity, "round": int(round_), "size": int(stats.size), "metrics": scalars,
                         "series": {name: int(values.size) for name, values in series.items()}},
                        separators=(",", ":"), allow_nan=False).encode("utf-8")
    body = b"".join([header, stats.tobytes(), *(values.tobytes() for values in series.values())])
    return PREFIX.pack(MAGIC, len(header), zlib.crc32(body)) + body


def file_name(round_: int) -> str:
    return f"checkpoint.{int(round_)}.bin"


def save(directory, *, identity: dict, round_: int, stats: np.ndarray, metrics: dict) -> None:
    """Write the checkpoint of ``round_`` in ``directory`` (created if needed), then remove the older ones."""
    directory = Path(directory)
    name = file_name(round_)
    atomic_write_bytes(directory / name, encode(identity=identity, round_=round_, stats=stats, metrics=metrics),
                       durable=DURABLE, private=True)
    for other in _checkpoints(directory):
        if other.name != name:
            other.unlink(missing_ok=True)


def exists(directory) -> bool:
    """Whether ``directory`` holds a checkpoint file (read or not)."""
    return bool(_checkpoints(Path(directory)))


def discard(directory) -> bool:
    """Remove the checkpoint files in ``directory``, and the directory if nothing else is left in it; whether there
    were any. For a run that cannot resume from them (new keys make a new run id, which they do not match)."""
    directory = Path(directory)
    found = _checkpoints(directory)
    for path in found:
        path.unlink(missing_ok=True)
    if found and not any(directory.iterdir()):
        directory.rmdir()
    return bool(found)


def _checkpoints(directory: Path) -> list[Path]:
    """The checkpoint files in ``directory``, newest round first."""
    try:
        names = [entry.name for entry in os.scandir(directory)]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise CRCError(f"{directory}: cannot read the checkpoint directory ({exc.strerror or exc})") from None
    rounds = sorted((int(match.group(1)) for match in map(NAME.fullmatch, names) if match), reverse=True)
    return [directory / file_name(round_) for round_ in rounds]


DAMAGED = "delete it to start afresh"
"""What to do with a damaged checkpoint, or one of another version, for a peer whose earlier rounds may be sent
again."""


def decode(data: bytes, *, source, remedy: str = DAMAGED) -> tuple[dict, np.ndarray]:
    """(header, statistics (size,)) of checkpoint bytes, with the header's fields checked but not its identity; a
    CRCError ending with ``remedy`` for bytes that are no checkpoint or a damaged one."""
    if len(data) < PREFIX.size or data[:len(MAGIC)] not in (MAGIC, OLD_MAGIC):
        raise CRCError(f"{source}: not a crc checkpoint (or one of another version); {remedy}")
    _, header_bytes, checksum = PREFIX.unpack_from(data)
    body = memoryview(data)[PREFIX.size:]
    if header_bytes > min(len(body), MAX_HEADER_BYTES) or zlib.crc32(body) != checksum:
        raise CRCError(f"{source}: damaged checkpoint (truncated or altered: its length or checksum does not match); "
                       f"{remedy}")
    header = fields.mapping(parse_json(bytes(body[:header_bytes]), source=source, what="checkpoint header"), "header")
    try:
        size = fields.integer(header.get("size"), "size", low=0, high=MAX_STATISTICS)
        metrics = fields.mapping(header.get("metrics"), "metrics")
        lengths = {name: fields.integer(length, f"series.{name}", low=0, high=MAX_SERIES_VALUES)
                   for name, length in fields.mapping(header.get("series", {}), "series").items()}
        if sum(lengths.values()) > MAX_SERIES_VALUES:
            raise CRCError(f"its series hold more than {MAX_SERIES_VALUES} values")
        twice = sorted(set(lengths) & set(metrics))
        if twice:
            raise CRCError(f"series {twice[0]!r} is among the metrics too")
        expected = 8 * (size + sum(lengths.values()))
        if len(body) - header_bytes != expected:
            raise CRCError(f"holds {len(body) - header_bytes} bytes of statistics and series, not the {expected} its "
                           f"header says")
        values = np.frombuffer(body[header_bytes:], dtype="<f8").astype(np.float64)
        if not np.all(np.isfinite(values)):
            raise CRCError("statistics or series contain non-finite values")
        fields.integer(header.get("round"), "round", low=0)
        fields.mapping(header.get("identity"), "identity")
        _check_metrics(metrics, header["round"])
        stats, offset = values[:size], size
        for name, length in lengths.items():  # finite floats: checked above
            metrics[name] = values[offset:offset + length].tolist()
            offset += length
    except CRCError as exc:
        raise CRCError(f"{source}: damaged checkpoint: {exc}; {remedy}") from None
    return header, stats


def _read(directory, max_statistics: int = MAX_STATISTICS, remedy: str = DAMAGED) -> tuple[Path, tuple[dict, np.ndarray] | None]:
    """The newest checkpoint in ``directory``: its path and (header, statistics), or None if there is none; a file
    longer than a checkpoint of ``max_statistics`` statistics is refused before it is read (reading takes twice its
    size: a 1 GiB one took 2.3 GB); a CRCError ending with ``remedy`` for a damaged one."""
    directory = Path(directory)
    found = _checkpoints(directory)
    if not found:
        if (directory / OLD_FILE_NAME).exists():
            raise CRCError(f"{directory / OLD_FILE_NAME}: a checkpoint of an earlier crc version, which this one cannot "
                           f"resume; {remedy}")
        return directory / file_name(0), None
    path = found[0]
    longest = PREFIX.size + MAX_HEADER_BYTES + 8 * (max_statistics + MAX_SERIES_VALUES)
    header, stats = decode(read_bytes(path, max_bytes=longest, what="checkpoint", regular=True),
                           source=path, remedy=remedy)
    if path.name != file_name(header["round"]):
        raise CRCError(f"{path}: damaged checkpoint: it records round {header['round']}; {remedy}")
    return path, (header, stats)


def completed_round(directory) -> int | None:
    """The round a checkpoint records (0 without a checkpoint), or None if it cannot be read."""
    try:
        _, found = _read(directory)
    except CRCError:
        return None
    return 0 if found is None else found[0]["round"]


FRESH_START = "use another --checkpoint directory or delete it to start afresh"
"""What to do with a checkpoint of another configuration, for a peer whose earlier rounds may be sent again."""


def load(directory, *, identity: dict, size: int, remedy: str = FRESH_START,
         damaged: str = DAMAGED) -> tuple[int, np.ndarray, dict] | None:
    """(round, statistics, metrics) of the checkpoint in ``directory``, or None if there is none.

    A checkpoint of another configuration (different address, neighbours, schema, ESS, ...; the error ends with
    ``remedy``), a damaged one, a round beyond ``identity["rounds"]`` or statistics of another length (the error ends
    with ``damaged``) are refused rather than used.
    """
    path, found = _read(directory, max_statistics=size, remedy=damaged)
    if found is None:
        return None
    header, stats = found
    if header["identity"] != identity:
        theirs = header["identity"]
        differs = sorted(k for k in set(identity) | set(theirs) if theirs.get(k) != identity.get(k))
        listed = ", ".join(str(key)[:40] for key in differs[:8]) + (", ..." if len(differs) > 8 else "")
        raise CRCError(f"{path}: checkpoint of a different configuration ({listed} differ); {remedy}")
    rounds = identity.get("rounds")
    if isinstance(rounds, int) and header["round"] > rounds:
        raise CRCError(f"{path}: damaged checkpoint: round {header['round']} is beyond the run's {rounds} rounds; {damaged}")
    if stats.size != size:
        raise CRCError(f"{path}: damaged checkpoint: {stats.size} statistics, the model has {size}; {damaged}")
    return header["round"], stats, header["metrics"]


def _check_metrics(metrics: dict, round_: int) -> None:
    """Metrics hold finite numbers (not booleans) and strings, in lists and objects; ``rounds_done`` is the round."""
    if fields.integer(metrics.get("rounds_done"), "metrics.rounds_done") != round_:
        raise CRCError(f"metrics.rounds_done is {metrics['rounds_done']}, the round {round_}")
    pending = [("metrics", metrics)]
    while pending:  # an entry is named only when it is a list or an object, or refused: naming each took 200 B
        name, value = pending.pop()
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, (dict, list)):
                pending.append((_entry(name, value, key), item))
            elif not (fields.is_number(item) or isinstance(item, str)):
                raise CRCError(f"{_entry(name, value, key)} must be a number or a string, got {fields.shown(item)}")


def _entry(name: str, container: dict | list, key) -> str:
    """The name of ``container[key]``, ``container`` being named ``name``."""
    return f"{name}.{key}" if isinstance(container, dict) else f"{name}[{key}]"
