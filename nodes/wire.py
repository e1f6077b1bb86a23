"""The wire format between peers: one msgpack map per ZeroMQ frame.

Fields (all required)::

    v       protocol version (int, PROTOCOL_VERSION)
    type    "stats"
    run     run id (str): peers of different runs ignore each other
    from    sender id: the address the sender binds (str)
    round   round whose statistics these are (int >= 0)
    schema  schema id of the model (hex str)
    ess     equivalent sample size of the sender (float)
    dtype   "<f8"
    n       number of float64 values
    data    the statistics, raw little-endian float64 bytes (bin)

With secure aggregation (``crc.nodes.secure_aggregation``) six more types share the first five fields::

    masked  + schema, ess, n, data (masked statistics: n raw little-endian uint64 words), shares (map: holder
            address -> the sender's sealed Shamir shares for it: a random 12-byte nonce, then ChaCha20-Poly1305's
            ciphertext and tag; relayed unread by the recipient)
    unmask  + survivors (array of the contributors whose masked statistics arrived), shares (map: owner address ->
            the shares that owner sealed for the addressee)
    agree   + vouches (map: member address -> the sender's 32-byte MAC of the request set and the membership for
            that member; the sender commits to the set)
    confirm + vouches (map: member address -> that member's MAC for the addressee, relayed unread)
    reveal  + seed (the sender's 32-byte self-mask seed), shares (map: owner address -> 66-byte Shamir share of
            its self-mask seed), pair_shares (map: owner address -> map: dropped contributor address -> 66-byte
            share of the owner's pairwise seed with it), pairs (map: dropped contributor address -> the sender's
            32-byte pairwise seed with it)
    decline + to (the address of the recipient whose request or confirmation the sender refuses), reason (one of
            ``DECLINE_REASONS``): the sender will not answer that recipient's unmasking of the round

Addresses inside these maps are at most ``ADDRESS_BYTES`` long.

With a network sum (``--sum-over network``, ``crc.nodes.network_sum``) two more types share the first five fields::

    partial + roster (the roster's digest, 64 hex characters), schema, ess, n, data (n raw little-endian uint64
            words: the masked sum of the sender's subtree), contributors (a bitmap over the roster's sorted
            addresses: whose words the sum holds), sent by a peer to its parent in the roster's spanning tree
    total   the same fields, sent by a parent to its children: the sum of every contributor; n = 0 and no data
            when the round releases nothing (not every peer contributed), ``contributors`` then says who did

A peer that has waited a while for its neighbours' statistics tells its other neighbours so (``crc.nodes.liveness``)::

    waiting  v, type, run, from, round (the round whose statistics the sender still awaits: its statistics of
             round + 1 come late, not never)

A peer resumed from its checkpoint tells its neighbours so, once, when it starts again (``crc.nodes.resend``)::

    resumed  v, type, run, from, round (the round the sender resumed at: what its neighbours sent its last process
             of that round and later died with it; each re-sends the frames of those rounds it still holds, once)

A peer of an earlier release rejects a ``resumed`` frame as malformed (counted, logged once) and goes on as before.

Nothing is trusted: the frame size is checked before decoding, msgpack runs
with tight limits, every field is type-checked, and the payload must be finite
and of the expected length. Given the model, the statistics must then be
plausible (``crc.core.plausibility``, the one rule the simulator's attack model
applies too): the peer's ESS as the class-count total (CRC preserves it
exactly); negative class counts totalling at most ``NEGATIVE_COUNT_MASS`` x m0
(counts can dip below zero after calibration, by at most 0.037 m0 in honest
runs; with the total m0 this bounds every count to [-m0, 2 m0]), plus the
privacy slack when the peer is private; values within
``MAX_RELATIVE_MAGNITUDE`` x m0 and class counts within ``MAX_COUNT_MAGNITUDE``
x m0 (overflow guards: standardized features are unbounded, so no tighter
bound on sums follows from the schema); values within
``SECURE_AGGREGATION_TERM_LIMIT`` where secure aggregation is on; and
parameters that ``theta`` computes and that are finite. A rejection names its
cause (see ``CAUSES``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import msgpack
import numpy as np

from crc.core.models.base import GenerativeModel
from crc.core.plausibility import (  # noqa: F401 (re-exported)
    MAX_COUNT_MAGNITUDE,
    MAX_RELATIVE_MAGNITUDE,
    NEGATIVE_COUNT_MASS,
    SECURE_AGGREGATION_TERM_LIMIT,
    STATS_ESS_TOLERANCE,
    problem,
)

PROTOCOL_VERSION = 2
"""2: secure aggregation's consistency round (agree, confirm) and random nonces in sealed shares."""
MESSAGE_TYPE = "stats"
DEFAULT_RUN = "crc"
"""The run id of peers not told one (``--run-id``): every frame names its run, and peers of other runs are ignored."""
DTYPE = "<f8"
FIELDS = frozenset({"v", "type", "run", "from", "round", "schema", "ess", "dtype", "n", "data"})
MAX_TEXT = 512
ENVELOPE_BYTES = 1024
"""Generous bound on everything but the payload, used to size frame limits."""
ESS_RELATIVE_TOLERANCE = 1e-9
SECURE_AGGREGATION_FIELDS = {
    "masked": frozenset({"v", "type", "run", "from", "round", "schema", "ess", "n", "data", "shares"}),
    "unmask": frozenset({"v", "type", "run", "from", "round", "survivors", "shares"}),
    "reveal": frozenset({"v", "type", "run", "from", "round", "seed", "shares", "pairs", "pair_shares"}),
    "agree": frozenset({"v", "type", "run", "from", "round", "vouches"}),
    "confirm": frozenset({"v", "type", "run", "from", "round", "vouches"}),
    "decline": frozenset({"v", "type", "run", "from", "round", "to", "reason"}),
}
NETWORK_SUM_FIELDS = frozenset({"v", "type", "run", "from", "round", "roster", "schema", "ess", "n", "data",
                                "contributors"})
NETWORK_SUM_TYPES = ("partial", "total")
DIGEST_CHARS = 64
MAX_ENTRIES = 64
"""Most entries of a secure message's maps and arrays: the largest neighbourhood secure aggregation takes."""
SEED_BYTES = 32
SHARE_BYTES = 66
"""A Shamir share: an element of the field of the prime 2^521 - 1, big-endian."""
NONCE_BYTES = 12
VOUCH_BYTES = 32
"""A member's vouch: an HMAC-SHA256 tag."""
SEALED_BYTES = NONCE_BYTES + SHARE_BYTES * MAX_ENTRIES + 16
"""Longest sealed bundle of shares accepted (its nonce, one share per secret of its owner, the 16-byte tag)."""
ADDRESS_BYTES = 128
DECLINE_REASONS = ("resumed", "request", "changed", "unsent", "shares", "unagreed", "deviation")
"""Why a member declines a recipient's request or confirmation (``crc.nodes.secure_aggregation.Refused``): it resumed
at or after that round from its checkpoint; the request names a stranger, a member twice, leaves the member out or
names too few; it differs from the set already committed to; no masked statistics of the round were sent to that
recipient; a share bundle is missing or does not decrypt; the confirmation is of a round nothing was agreed to; the
confirmation lacks a member's vouch for the set (``Deviation``)."""

WAITING = "waiting"
RESUMED = "resumed"
NOTICE_FIELDS = frozenset({"v", "type", "run", "from", "round"})

CAUSES = ("oversized", "malformed", "version", "type", "run", "sender", "schema", "ess", "length", "non-finite",
          "stats-ess", "magnitude", "counts", "theta", "stale", "ahead", "duplicate", "forged", "roster", "role")
"""Why a frame can be rejected: the keys of a peer's ``rejected`` counts."""


class Rejected(Exception):
    """A frame that must be ignored; ``cause`` is one of CAUSES, ``detail`` says what was wrong."""

    def __init__(self, cause: str, detail: str, sender: str | None = None):
        super().__init__(f"{cause}: {detail}")
        self.cause, self.detail, self.sender = cause, detail, sender


@dataclass(frozen=True)
class Message:
    sender: str
    round: int
    stats: np.ndarray


@dataclass(frozen=True)
class Waiting:
    """A neighbour still awaits its neighbours' statistics of ``round``: its own of round + 1 come late, not never."""

    sender: str
    round: int


@dataclass(frozen=True)
class Resumed:
    """A neighbour resumed at ``round`` from its checkpoint: the frames of that round and later sent to its last
    process are lost."""

    sender: str
    round: int


@dataclass(frozen=True)
class Masked:
    sender: str
    round: int
    words: np.ndarray
    shares: dict


@dataclass(frozen=True)
class Unmask:
    sender: str
    round: int
    survivors: tuple
    shares: dict


@dataclass(frozen=True)
class Agree:
    sender: str
    round: int
    vouches: dict


@dataclass(frozen=True)
class Confirm:
    sender: str
    round: int
    vouches: dict


@dataclass(frozen=True)
class Decline:
    """``sender`` will not answer ``recipient``'s unmasking of ``round``, for ``reason`` (one of DECLINE_REASONS)."""

    sender: str
    round: int
    recipient: str
    reason: str


@dataclass(frozen=True)
class Reveal:
    sender: str
    round: int
    seed: bytes
    shares: dict
    pairs: dict
    pair_shares: dict


@dataclass(frozen=True)
class SumFrame:
    """A network sum's ``partial`` (a subtree's masked sum, to the parent) or ``total`` (every contributor's, to the
    children; ``words`` None when the round releases nothing). ``contributors``: a bitmap over the roster's sorted
    addresses."""

    kind: str
    sender: str
    round: int
    words: np.ndarray | None
    contributors: bytes


@dataclass(frozen=True)
class Expectation:
    """What a peer accepts: its run, schema id, ESS, statistics length and neighbours."""

    run: str
    schema_id: str
    ess: float
    size: int
    neighbours: frozenset
    model: GenerativeModel | None = None
    """The peer's model: with it, the statistics' plausibility is checked too (``crc.core.plausibility``)."""
    count_slack: float = 0.0
    """Privacy's slack on the negative count mass (``crc.core.plausibility.count_slack``)."""
    known_keys: Mapping[str, str] | None = None
    """Each neighbour's public key (z85): with them, a frame must come with the key of the neighbour it names."""

    secure_aggregation: bool = False
    """Whether secure-aggregation frames are accepted (their maps make frames longer)."""
    roster: str | None = None
    """A network sum's roster digest (``crc.nodes.roster``): its partial and total frames are accepted. None: none."""
    roster_size: int = 0
    """The roster's number of peers: a sum frame's contributors bitmap is ceil(roster_size / 8) bytes."""

    @property
    def max_frame_bytes(self) -> int:
        reveal = MAX_ENTRIES * (MAX_ENTRIES + 2) * (SHARE_BYTES + ADDRESS_BYTES + 8)
        extra = max(MAX_ENTRIES * (SEALED_BYTES + ADDRESS_BYTES + 8), reveal) if self.secure_aggregation else 0
        return 8 * self.size + ENVELOPE_BYTES + extra


def encode(*, run: str, sender: str, round_: int, schema_id: str, ess: float, stats: np.ndarray) -> bytes:
    """One frame carrying ``stats`` (float64, shape (size,))."""
    payload = np.ascontiguousarray(stats, dtype=DTYPE)
    return msgpack.packb({"v": PROTOCOL_VERSION, "type": MESSAGE_TYPE, "run": run, "from": sender, "round": int(round_),
                          "schema": schema_id, "ess": float(ess), "dtype": DTYPE, "n": int(payload.size),
                          "data": payload.tobytes()}, use_bin_type=True)


def encode_waiting(*, run: str, sender: str, round_: int) -> bytes:
    """A waiting notice: ``sender`` still awaits its neighbours' statistics of ``round_``."""
    return _encode_notice(WAITING, run, sender, round_)


def encode_resumed(*, run: str, sender: str, round_: int) -> bytes:
    """A resumed notice: ``sender`` resumed at ``round_`` from its checkpoint."""
    return _encode_notice(RESUMED, run, sender, round_)


def _encode_notice(kind: str, run: str, sender: str, round_: int) -> bytes:
    return msgpack.packb({"v": PROTOCOL_VERSION, "type": kind, "run": run, "from": sender, "round": int(round_)},
                         use_bin_type=True)


def encode_secure_aggregation(kind: str, *, run: str, sender: str, round_: int, **fields) -> bytes:
    """One secure-aggregation frame of ``kind`` (``SECURE_AGGREGATION_FIELDS``); ``data`` (masked) is given as uint64 words."""
    body = {"v": PROTOCOL_VERSION, "type": kind, "run": run, "from": sender, "round": int(round_), **fields}
    if kind == "masked":
        words = np.ascontiguousarray(body["data"], dtype="<u8")
        body.update(data=words.tobytes(), n=int(words.size), ess=float(body["ess"]))
    if kind == "unmask":
        body["survivors"] = list(body["survivors"])
    if set(body) != SECURE_AGGREGATION_FIELDS[kind]:
        raise ValueError(f"a {kind} frame has fields {sorted(SECURE_AGGREGATION_FIELDS[kind])}")
    return msgpack.packb(body, use_bin_type=True)


def decode(frame: bytes, expect: Expectation, key: str | None = None
           ) -> Message | Waiting | Resumed | Masked | Unmask | Agree | Confirm | Reveal | Decline:
    """Validate a frame that came over a connection authenticated with ``key`` (z85; None: not authenticated)
    against ``expect``; raise Rejected with the first cause found."""
    if len(frame) > expect.max_frame_bytes:
        raise Rejected("oversized", f"{len(frame)} bytes, at most {expect.max_frame_bytes} expected")
    entries = MAX_ENTRIES if expect.secure_aggregation else 0
    try:
        obj = msgpack.unpackb(frame, raw=False, strict_map_key=True, use_list=False,
                              max_bin_len=expect.max_frame_bytes, max_str_len=MAX_TEXT, max_array_len=entries,
                              max_map_len=max(len(FIELDS), entries), max_ext_len=0)
    except Exception as exc:  # msgpack raises several types for hostile input; none may escape
        raise Rejected("malformed", f"not a msgpack map ({type(exc).__name__})") from None
    if isinstance(obj, dict) and obj.get("type") in (WAITING, RESUMED):
        return notice_of(obj, expect, key)
    if expect.roster is not None and isinstance(obj, dict) and obj.get("type") in NETWORK_SUM_TYPES:
        return _decode_sum_frame(obj, expect, key)
    if (expect.secure_aggregation and isinstance(obj, dict) and isinstance(obj.get("type"), str)
            and obj["type"] in SECURE_AGGREGATION_FIELDS):  # a map as the type is no key to look up
        return _decode_secure_aggregation(obj, expect, key)
    if not isinstance(obj, dict) or set(obj) != FIELDS:
        keys = sorted(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
        raise Rejected("malformed", f"fields {keys}, expected {sorted(FIELDS)}")
    sender = obj["from"]
    if not isinstance(sender, str):
        raise Rejected("malformed", "sender is not a string")
    _check_types(obj, sender)
    if obj["v"] != PROTOCOL_VERSION:
        raise Rejected("version", f"protocol version {obj['v']}, this peer speaks {PROTOCOL_VERSION}", sender)
    if obj["type"] != MESSAGE_TYPE:
        raise Rejected("type", f"message type {obj['type']!r}", sender)
    check_origin(obj, sender, expect, key)
    _check_model(obj, sender, expect)
    if obj["dtype"] != DTYPE or obj["n"] != expect.size or len(obj["data"]) != 8 * expect.size:
        raise Rejected("length", f"{obj['n']} values of {obj['dtype']!r} in {len(obj['data'])} bytes, "
                                 f"expected {expect.size} of {DTYPE!r}", sender)
    stats = np.frombuffer(obj["data"], dtype=DTYPE).astype(np.float64)
    if not np.all(np.isfinite(stats)):
        raise Rejected("non-finite", "statistics contain NaN or infinity", sender)
    if expect.model is not None:
        check_statistics(stats, expect.model, expect.ess, sender, secure_aggregation=expect.secure_aggregation,
                         slack=expect.count_slack)
    return Message(sender=sender, round=obj["round"], stats=stats)


def check_origin(obj: dict, sender: str, expect: Expectation, key: str | None) -> None:
    """Version, run, neighbour and key of a frame whose fields are typed; ``expect`` has ``run``, ``neighbours`` and
    ``known_keys`` (an ``Expectation``, or a vertical group's, ``crc.nodes.vertical_wire``)."""
    if obj["v"] != PROTOCOL_VERSION:
        raise Rejected("version", f"protocol version {obj['v']}, this peer speaks {PROTOCOL_VERSION}", sender)
    if obj["run"] != expect.run:
        raise Rejected("run", f"run id {obj['run']!r}, this peer is in run {expect.run!r}", sender)
    if sender not in expect.neighbours:
        raise Rejected("sender", f"{sender!r} is not a configured neighbour", sender)
    if expect.known_keys is not None and key != expect.known_keys.get(sender):
        raise Rejected("forged", f"claims to be {sender} but its connection has another key ({key})", key)


def _check_model(obj: dict, sender: str, expect: Expectation) -> None:
    """Schema id and ESS of a statistics frame."""
    if obj["schema"] != expect.schema_id:
        raise Rejected("schema", f"schema id {obj['schema'][:12]}…, this peer has {expect.schema_id[:12]}… "
                                 "(different schema file, model or structure)", sender)
    if not math.isclose(obj["ess"], expect.ess, rel_tol=ESS_RELATIVE_TOLERANCE):
        raise Rejected("ess", f"ESS {obj['ess']!r}, this peer uses {expect.ess!r}: give every peer the same --ess, "
                              "m / (lr n) for m instances in all on n peers (the default, local size / lr, differs "
                              "between peers that hold different numbers of instances)", sender)


def _byte_map(value, sender: str, field: str, *, exact: int | None = None, longest: int = SEALED_BYTES) -> dict:
    """A map of address strings to byte strings (each ``exact`` bytes long, or at most ``longest``)."""
    if not isinstance(value, dict) or len(value) > MAX_ENTRIES:
        raise Rejected("malformed", f"field {field!r} is not a map of at most {MAX_ENTRIES} entries", sender)
    for address, data in value.items():
        if not isinstance(address, str) or len(address) > ADDRESS_BYTES or not isinstance(data, bytes) or (
                len(data) != exact if exact is not None else len(data) > longest):
            raise Rejected("malformed", f"field {field!r} has an entry that is not an address and "
                                        f"{exact or f'at most {longest}'} bytes", sender)
    return dict(value)


def notice_of(obj: dict, expect: Expectation, key: str | None) -> Waiting | Resumed:
    """The waiting or resumed notice a decoded map of that type is, once its fields and origin are checked (``expect``
    as ``check_origin`` takes it: a vertical group's peer decodes the resumed notice too)."""
    notice = Waiting if obj["type"] == WAITING else Resumed
    return notice(_check_header(obj, NOTICE_FIELDS, expect, key), obj["round"])


def _check_header(obj: dict, fields: frozenset, expect: Expectation, key: str | None) -> str:
    """The sender of a frame of one of the small types, once its fields, their types and its origin are checked."""
    sender = obj.get("from")
    if not isinstance(sender, str) or set(obj) != fields:
        raise Rejected("malformed", f"a {obj['type']} frame needs the fields {sorted(fields)}")
    for field, typ in (("v", int), ("run", str), ("round", int)):
        if not isinstance(obj[field], typ) or isinstance(obj[field], bool):
            raise Rejected("malformed", f"field {field!r} is {type(obj[field]).__name__}, expected {typ.__name__}", sender)
    if obj["round"] < 0:
        raise Rejected("malformed", f"round {obj['round']} out of range", sender)
    check_origin(obj, sender, expect, key)
    return sender


def _decode_secure_aggregation(obj: dict, expect: Expectation, key: str | None
                               ) -> Masked | Unmask | Agree | Confirm | Reveal | Decline:
    kind = obj["type"]
    sender = _check_header(obj, SECURE_AGGREGATION_FIELDS[kind], expect, key)
    round_ = obj["round"]
    if kind == "masked":
        if not (isinstance(obj["schema"], str) and isinstance(obj["ess"], float) and isinstance(obj["n"], int)
                and isinstance(obj["data"], bytes)) or isinstance(obj["n"], bool):
            raise Rejected("malformed", "a masked frame's schema, ess, n or data has the wrong type", sender)
        _check_model(obj, sender, expect)
        if obj["n"] != expect.size or len(obj["data"]) != 8 * expect.size:
            raise Rejected("length", f"{obj['n']} words in {len(obj['data'])} bytes, expected {expect.size}", sender)
        words = np.frombuffer(obj["data"], dtype="<u8").astype(np.uint64)
        return Masked(sender, round_, words, _byte_map(obj["shares"], sender, "shares"))
    if kind == "unmask":
        survivors = obj["survivors"]
        if not isinstance(survivors, tuple) or not all(isinstance(w, str) for w in survivors):
            raise Rejected("malformed", "field 'survivors' is not an array of addresses", sender)
        return Unmask(sender, round_, survivors, _byte_map(obj["shares"], sender, "shares"))
    if kind in ("agree", "confirm"):
        vouches = _byte_map(obj["vouches"], sender, "vouches", exact=VOUCH_BYTES)
        return (Agree if kind == "agree" else Confirm)(sender, round_, vouches)
    if kind == "decline":
        to, reason = obj["to"], obj["reason"]
        if not (isinstance(to, str) and len(to) <= ADDRESS_BYTES and isinstance(reason, str) and reason in DECLINE_REASONS):
            raise Rejected("malformed", f"a decline needs an address and one of the reasons {list(DECLINE_REASONS)}", sender)
        return Decline(sender, round_, to, reason)
    if not isinstance(obj["seed"], bytes) or len(obj["seed"]) != SEED_BYTES:
        raise Rejected("malformed", f"field 'seed' is not {SEED_BYTES} bytes", sender)
    shares = {owner: int.from_bytes(data, "big")
              for owner, data in _byte_map(obj["shares"], sender, "shares", exact=SHARE_BYTES).items()}
    nested = obj["pair_shares"]
    if not isinstance(nested, dict) or len(nested) > MAX_ENTRIES or not all(
            isinstance(owner, str) and len(owner) <= ADDRESS_BYTES for owner in nested):
        raise Rejected("malformed", f"field 'pair_shares' is not a map of at most {MAX_ENTRIES} addresses", sender)
    pair_shares = {owner: {partner: int.from_bytes(data, "big")
                           for partner, data in _byte_map(value, sender, "pair_shares", exact=SHARE_BYTES).items()}
                   for owner, value in nested.items()}
    return Reveal(sender, round_, obj["seed"], shares, _byte_map(obj["pairs"], sender, "pairs", exact=SEED_BYTES),
                  pair_shares)


def encode_sum_frame(kind: str, *, run: str, sender: str, round_: int, roster: str, schema_id: str, ess: float,
                     words: np.ndarray | None, contributors: bytes) -> bytes:
    """A network sum's ``partial`` or ``total`` frame (``words`` (size,) uint64; None: a total that releases nothing)."""
    data = b"" if words is None else np.ascontiguousarray(words, dtype="<u8").tobytes()
    return msgpack.packb({"v": PROTOCOL_VERSION, "type": kind, "run": run, "from": sender, "round": int(round_),
                          "roster": roster, "schema": schema_id, "ess": float(ess), "n": len(data) // 8, "data": data,
                          "contributors": contributors}, use_bin_type=True)


def _decode_sum_frame(obj: dict, expect: Expectation, key: str | None) -> SumFrame:
    """A partial or total frame, its fields, roster, model and length checked (its sender's role is the round's to
    check, ``crc.nodes.network_sum``)."""
    sender = _check_header(obj, NETWORK_SUM_FIELDS, expect, key)
    if not (isinstance(obj["roster"], str) and isinstance(obj["schema"], str) and isinstance(obj["ess"], float)
            and isinstance(obj["n"], int) and not isinstance(obj["n"], bool) and isinstance(obj["data"], bytes)
            and isinstance(obj["contributors"], bytes)):
        raise Rejected("malformed", f"a {obj['type']} frame's roster, schema, ess, n, data or contributors has the wrong "
                                    "type", sender)
    if obj["roster"] != expect.roster:
        raise Rejected("roster", f"roster {obj['roster'][:12]}…, this peer's is {expect.roster[:12]}… (a different "
                                 "roster file)", sender)
    _check_model(obj, sender, expect)
    empty = obj["type"] == "total" and obj["n"] == 0 and obj["data"] == b""
    if not empty and (obj["n"] != expect.size or len(obj["data"]) != 8 * expect.size):
        raise Rejected("length", f"{obj['n']} words in {len(obj['data'])} bytes, expected {expect.size}", sender)
    bitmap = obj["contributors"]
    spare = 8 * len(bitmap) - expect.roster_size  # bits past the last peer: the last byte's high bits, all zero
    if len(bitmap) != -(-expect.roster_size // 8) or (spare and bitmap[-1] >> (8 - spare)):
        raise Rejected("malformed", f"contributors is not a bitmap of {expect.roster_size} peers", sender)
    words = None if empty else np.frombuffer(obj["data"], dtype="<u8").astype(np.uint64)
    return SumFrame(obj["type"], sender, obj["round"], words, bitmap)


def check_statistics(stats: np.ndarray, model: GenerativeModel, ess: float, sender: str | None = None, *,
                     secure_aggregation: bool = False, slack: float = 0.0) -> None:
    """Raise Rejected unless finite ``stats`` (size,) are plausible for a peer of ESS ``ess``
    (``crc.core.plausibility.problem``: ESS, negative count mass within its bound plus ``slack``, magnitudes, within
    SECURE_AGGREGATION_TERM_LIMIT too if ``secure_aggregation``, finite parameters)."""
    found = problem(stats, model, ess, secure_aggregation=secure_aggregation, slack=slack)
    if found is not None:
        raise Rejected(*found, sender)


def _check_types(obj: dict, sender: str) -> None:
    checks = (("v", int), ("type", str), ("run", str), ("round", int), ("schema", str), ("ess", float),
              ("dtype", str), ("n", int), ("data", bytes))
    for key, kind in checks:
        value = obj[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise Rejected("malformed", f"field {key!r} is {type(value).__name__}, expected {kind.__name__}", sender)
    if obj["round"] < 0 or not math.isfinite(obj["ess"]) or obj["ess"] <= 0:
        raise Rejected("malformed", f"round {obj['round']} or ESS {obj['ess']!r} out of range", sender)
