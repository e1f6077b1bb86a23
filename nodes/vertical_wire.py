"""The messages of a vertical group (``crc.nodes.vertical_peer``): one msgpack map per ZeroMQ frame, decoded as
strictly as the statistics frames of ``crc.nodes.wire``.

Every message has ``v`` (protocol version), ``type``, ``run`` (run id), ``from`` (the sender's bind address),
``round`` and ``schema`` (the schema id of the whole block model, which every member builds from the shared schema
and blocks file). Then, by type::

    psi-request  ids (int: the label holder's id count), request (bin: its blinded ids)              round 0
    psi-answer   ids (int: the member's id count), block (int: the block it holds), setup, response   round 0
    psi-ids      ids (array of str: the group's instance ids, sorted)                                round 0
    scores       n, data (n raw little-endian float64: the block's scores, m rows x width, by row)    round t >= 1
    weights      best (bool: the iterate just scored is the best so far), n, data (m x width          round t >= 0
                 calibration weights; round 0 the one-hot labels, the last, scoring-only pass none)
    masked-scores  n, data (n raw little-endian uint64 words: the scores masked, ``crc.nodes.score_masks``)  t >= 1

A peer resumed from its checkpoint sends the horizontal peers' ``resumed`` notice (``wire.encode_resumed``: v, type,
run, from, round, and no schema: a notice carries nothing of the model): a label holder to its members, with the pass
whose scores it awaits; in a hybrid partition every peer to its block neighbours too, with the round whose statistics
it awaits. Each sends it again, once, the frames of that pass or round and later that it still holds
(``crc.nodes.resend``). It is checked as the statistics' peers check it, its sender a member or a block neighbour;
of the group's, a peer takes only its label holder's (members never send one to their group: ``check_notice``), and
none is a sign of progress (``VerticalPeer.receive``).

Nothing is trusted: the frame size is checked before decoding, msgpack runs with tight limits, every field is
type-checked, the sender must be a configured member (and, with keys, the key of its connection the member's), the
run and schema ids must match, the alignment's frames must be of round 0, and the numbers must be finite and within
``MAX_SCORE``. What a round expects of
them (their round, their number, which member may send them) is the peer's to check
(``crc.nodes.vertical_peer``). A rejection is a ``crc.nodes.wire.Rejected`` with one of ``wire.CAUSES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import msgpack
import numpy as np

from crc.nodes.alignment import BLINDINGS, BYTES_PER_ID, MAX_ID_BYTES
from crc.nodes.wire import (
    ENVELOPE_BYTES,
    MAX_TEXT,
    PROTOCOL_VERSION,
    RESUMED,
    Rejected,
    check_origin,
    notice_of,
)

DTYPE = "<f8"
COMMON = ("v", "type", "run", "from", "round", "schema")
FIELDS = {
    "psi-request": frozenset({*COMMON, "ids", "request"}),
    "psi-answer": frozenset({*COMMON, "ids", "block", "setup", "response"}),
    "psi-ids": frozenset({*COMMON, "ids"}),
    "scores": frozenset({*COMMON, "n", "data"}),
    "weights": frozenset({*COMMON, "best", "n", "data"}),
    "masked-scores": frozenset({*COMMON, "n", "data"}),
}
ALIGNMENT = frozenset({"psi-request", "psi-answer", "psi-ids"})
"""The types of the alignment, all of round 0."""
MAX_SCORE = 1e100
"""Largest |value| of scores and weights accepted: honest block log-likelihoods of standardized data are within a
few thousands, and a group's sum of such values stays finite."""
ID_RATIO = 16
"""A peer accepts PSI messages about at most this many times its own number of ids (and at least ``MIN_IDS``): the
members of a group hold ids of mostly the same instances. It bounds a frame before it is read."""
MIN_IDS = 1024
MAX_BLOCKS = 4096


@dataclass(frozen=True)
class PSIRequest:
    sender: str
    round: int
    ids: int
    request: bytes


@dataclass(frozen=True)
class PSIAnswer:
    sender: str
    round: int
    ids: int
    block: int
    setup: bytes
    response: bytes


@dataclass(frozen=True)
class PSIIds:
    sender: str
    round: int
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Scores:
    sender: str
    round: int
    values: np.ndarray
    """(n,) float64, finite."""


@dataclass(frozen=True)
class Weights:
    sender: str
    round: int
    best: bool
    values: np.ndarray
    """(n,) float64, finite."""


@dataclass(frozen=True)
class MaskedScores:
    sender: str
    round: int
    words: np.ndarray
    """(n,) uint64: scores in fixed point under masks that cancel in the members' sum."""


@dataclass(frozen=True)
class GroupExpectation:
    """What a peer of a vertical group accepts: its run, the block model's schema id, the other members (``neighbours``,
    as ``wire.check_origin`` names them) and their keys, and its own number of instance ids and of score columns,
    which bound every frame."""

    run: str
    schema_id: str
    neighbours: frozenset
    rows: int
    """This peer's instance ids: a group's id list is at most this long, its scores and weights at most this many rows."""
    width: int
    """Columns of a row of scores or weights: the classes (sub-classes of a mixture)."""
    known_keys: Mapping[str, str] | None = None
    block_neighbours: frozenset = frozenset()
    """A hybrid partition's peers of the same block in the neighbouring groups: only their resumed notices are
    decoded here (their statistics are ``crc.nodes.block_gossip``'s)."""

    @property
    def max_ids(self) -> int:
        """Most ids another member's PSI messages may be about."""
        return ID_RATIO * max(self.rows, MIN_IDS)

    @property
    def max_frame_bytes(self) -> int:
        psi = (1 + BLINDINGS) * BYTES_PER_ID * self.max_ids  # an answer: its setup and the request blinded again
        id_list = self.rows * (MAX_ID_BYTES + 5)
        return ENVELOPE_BYTES + max(psi, id_list, 8 * self.rows * self.width)


def encode_group(kind: str, *, run: str, sender: str, round_: int, schema_id: str, **fields) -> bytes:
    """One frame of ``kind`` (a key of ``FIELDS``); ``values`` (float64) of scores and weights become ``n`` and
    ``data``."""
    body = {"v": PROTOCOL_VERSION, "type": kind, "run": run, "from": sender, "round": int(round_), "schema": schema_id}
    if "values" in fields:
        values = np.ascontiguousarray(fields.pop("values"), dtype=DTYPE).reshape(-1)
        fields.update(n=int(values.size), data=values.tobytes())
    if "words" in fields:
        words = np.ascontiguousarray(fields.pop("words"), dtype="<u8").reshape(-1)
        fields.update(n=int(words.size), data=words.tobytes())
    if kind == "psi-ids":
        fields["ids"] = list(fields["ids"])
    body.update(fields)
    if set(body) != FIELDS[kind]:
        raise ValueError(f"a {kind} frame has the fields {sorted(FIELDS[kind])}")
    return msgpack.packb(body, use_bin_type=True)


def decode_group(frame: bytes, expect: GroupExpectation, key: str | None = None):
    """A ``PSIRequest``, ``PSIAnswer``, ``PSIIds``, ``Scores``, ``Weights``, ``MaskedScores`` or ``wire.Resumed`` from a
    frame that came over a connection authenticated with ``key`` (z85; None without keys); raise Rejected with the first
    cause found."""
    if len(frame) > expect.max_frame_bytes:
        raise Rejected("oversized", f"{len(frame)} bytes, at most {expect.max_frame_bytes} expected")
    try:
        obj = msgpack.unpackb(frame, raw=False, strict_map_key=True, use_list=False, max_bin_len=expect.max_frame_bytes,
                              max_str_len=max(MAX_TEXT, MAX_ID_BYTES), max_array_len=expect.rows, max_map_len=16,
                              max_ext_len=0)
    except Exception as exc:  # msgpack raises several types for hostile input; none may escape
        raise Rejected("malformed", f"not a msgpack map ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise Rejected("malformed", f"a {type(obj).__name__}, not a map")
    kind, sender = obj.get("type"), obj.get("from")
    if kind == RESUMED:
        return notice_of(obj, replace(expect, neighbours=expect.neighbours | expect.block_neighbours), key)
    if not isinstance(kind, str) or kind not in FIELDS:  # a map or a list is no key to look up
        shown = repr(kind) if isinstance(kind, str) else f"of type {type(kind).__name__}"
        raise Rejected("type", f"message type {shown}, a vertical group's peer takes {', '.join(FIELDS)}",
                       sender if isinstance(sender, str) else None)
    if not isinstance(sender, str) or set(obj) != FIELDS[kind]:
        raise Rejected("malformed", f"a {kind} frame needs the fields {sorted(FIELDS[kind])}",
                       sender if isinstance(sender, str) else None)
    _typed(obj, sender, v=int, run=str, round=int, schema=str)
    if obj["round"] < 0 or (kind in ALIGNMENT and obj["round"]):
        raise Rejected("malformed", f"round {obj['round']} out of range for a {kind} frame", sender)
    check_origin(obj, sender, expect, key)
    if obj["schema"] != expect.schema_id:
        raise Rejected("schema", f"schema id {obj['schema'][:12]}…, this peer has {expect.schema_id[:12]}… (a different "
                                 "schema file, blocks file or model)", sender)
    return _BODIES[kind](obj, sender, expect)


def _typed(obj: dict, sender: str, **types) -> None:
    for name, kind in types.items():
        value = obj[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise Rejected("malformed", f"field {name!r} is {type(value).__name__}, expected {kind.__name__}", sender)


def _count(obj: dict, name: str, sender: str, high: int) -> int:
    value = obj[name]
    if not 1 <= value <= high:
        raise Rejected("malformed", f"field {name!r} is {value}, expected 1 to {high}", sender)
    return value


def _request(obj: dict, sender: str, expect: GroupExpectation) -> PSIRequest:
    _typed(obj, sender, ids=int, request=bytes)
    return PSIRequest(sender, obj["round"], _count(obj, "ids", sender, expect.max_ids), obj["request"])


def _answer(obj: dict, sender: str, expect: GroupExpectation) -> PSIAnswer:
    _typed(obj, sender, ids=int, block=int, setup=bytes, response=bytes)
    if not 0 <= obj["block"] < MAX_BLOCKS:
        raise Rejected("malformed", f"block {obj['block']} out of range", sender)
    return PSIAnswer(sender, obj["round"], _count(obj, "ids", sender, expect.max_ids), obj["block"], obj["setup"],
                     obj["response"])


def _ids(obj: dict, sender: str, expect: GroupExpectation) -> PSIIds:
    ids = obj["ids"]
    if not isinstance(ids, tuple) or not all(isinstance(value, str) and value for value in ids):
        raise Rejected("malformed", "field 'ids' is not an array of non-empty texts", sender)
    return PSIIds(sender, obj["round"], ids)


def _numbers(obj: dict, sender: str) -> np.ndarray:
    _typed(obj, sender, n=int, data=bytes)
    if obj["n"] < 0 or len(obj["data"]) != 8 * obj["n"]:
        raise Rejected("length", f"{obj['n']} values in {len(obj['data'])} bytes", sender)
    values = np.frombuffer(obj["data"], dtype=DTYPE).astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise Rejected("non-finite", f"{obj['type']} contain NaN or infinity", sender)
    largest = float(np.abs(values).max(initial=0.0))
    if largest > MAX_SCORE:
        raise Rejected("magnitude", f"a value of magnitude {largest:.3g} in {obj['type']}, more than {MAX_SCORE:g}", sender)
    return values


def _scores(obj: dict, sender: str, expect: GroupExpectation) -> Scores:
    return Scores(sender, obj["round"], _numbers(obj, sender))


def _weights(obj: dict, sender: str, expect: GroupExpectation) -> Weights:
    _typed(obj, sender, best=bool)
    return Weights(sender, obj["round"], obj["best"], _numbers(obj, sender))


def _masked_scores(obj: dict, sender: str, expect: GroupExpectation) -> MaskedScores:
    _typed(obj, sender, n=int, data=bytes)
    if obj["n"] < 0 or len(obj["data"]) != 8 * obj["n"]:
        raise Rejected("length", f"{obj['n']} words in {len(obj['data'])} bytes", sender)
    return MaskedScores(sender, obj["round"], np.frombuffer(obj["data"], dtype="<u8").astype(np.uint64))


_BODIES = {"psi-request": _request, "psi-answer": _answer, "psi-ids": _ids, "scores": _scores, "weights": _weights,
           "masked-scores": _masked_scores}
