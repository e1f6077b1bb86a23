"""Aligning the instances of a vertical group by their ids, with a private set intersection (PSI) and no coordinator.

The peers of a group each hold some instance ids. The label holder runs an ECDH-based PSI as the client with every
other member, over their encrypted channels, and learns its overlap with each; it intersects those overlaps, and
sends the group's ids, sorted, to every member. Then every member orders its rows by that list.

The PSI blinds on Curve25519 with X25519 (``cryptography``): an id is hashed to the u-coordinate of a point of the
curve (``hashed``: never of its twist, which X25519 would keep it on, telling a bit of the id), and a party blinds a
u-coordinate with its secret scalar ``k`` as ``X25519(k, u)``, the u-coordinate of ``[k] P``. Blindings commute,
``X25519(a, X25519(b, u)) == X25519(b, X25519(a, u))`` (``[a][b] P == [b][a] P``, and ``u`` names ``P`` up to its sign,
which scalar multiples keep), so the label holder's ids blinded by it and then by a member equal the member's ids
blinded by the member and then by it exactly where the ids are the same. X25519's scalars are multiples of 8, the
curve's cofactor (the twist's is 4), so a blinding lands in a subgroup of prime order whatever point it is given: a
part of small order in a chosen point changes nothing of its blinding, so tells nothing of the scalar. Without the
scalars a blinded id is a pseudorandom point of the curve's subgroup (decisional Diffie-Hellman, hashing as a random
oracle). The label holder sends
its ids blinded (the request); the member sends them back blinded again, in the request's order (the response), and
its own ids blinded once, sorted (the setup); the label holder blinds the setup with its scalar and finds which of
the response's elements are among them. Every message is the concatenation of its 32-byte elements; a point of low
order (whose blinding is 0) is refused.

What is revealed: each member learns the size of the label holder's id set and the group's intersection (ids it
holds itself); the label holder learns, for every member, which of its own ids that member holds (with three or
more members this can be more than the group's intersection). Nobody learns an id it does not hold, as long as
everyone follows the protocol. PSI cannot tell an id guessed from an id held: a deviating label holder can put
guesses in its request (``BLINDINGS`` times as many as it announces, which the member cannot tell from its
blindings; it announces at most ``ID_RATIO`` times the member's ids, ``crc.nodes.vertical_wire``) and learn which of
them a member holds. So could a member whose PSI request reaches
another member before the label holder's, unless that member names its label holder (``--label-holder``,
``crc.nodes.group_member``); a deviating member can answer for guessed ids and learn which of them the group holds.

A message must hold exactly as many elements as its sender's announced count of ids says (``BLINDINGS`` times it for
a request and a response), and a response must be in the request's order (``LabelHolderPSI`` blinds every id twice
to check it). A message that does not fit is an ``AlignmentError``: one line, and the peer stops (the group cannot
align).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from crc.core.errors import CRCError

BLINDINGS = 2
"""Times the label holder's request blinds each id (with a scalar and in an order of each time's own)."""
BYTES_PER_ID = 32
"""Bytes of a blinded id in a PSI message (an X25519 u-coordinate)."""
MAX_ID_BYTES = 256
"""Longest instance id accepted (UTF-8 bytes)."""
HASH_DOMAIN = b"crc-psi-x25519-v2\x00"
"""Prefix of every hashed id, so that the hashes are this protocol's own."""
FIELD = 2**255 - 19
"""The prime of Curve25519's field."""
CURVE_A = 486662
"""The A of Curve25519, v^2 = u^3 + A u^2 + u (RFC 7748)."""


class AlignmentError(CRCError):
    """A PSI message that does not parse or fit (one line: who sent what)."""


def _jacobi(a: int, n: int) -> int:
    """The Jacobi symbol (a / n) of an odd n > 0: for a prime n, 1 if ``a`` is a non-zero square mod n, -1 if not, 0
    if n divides it."""
    a %= n
    sign = 1
    while a:
        while not a & 1:
            a >>= 1
            if n & 7 in (3, 5):
                sign = -sign
        a, n = n, a
        if a & 3 == 3 and n & 3 == 3:
            sign = -sign
        a %= n
    return sign if n == 1 else 0


def on_curve(u: int) -> bool:
    """Whether the u-coordinate ``u`` (0 <= u < FIELD) is of a point of Curve25519 of order more than 2, not of its
    twist: ``u^3 + A u^2 + u`` a non-zero square."""
    return _jacobi(u * (u * (u + CURVE_A) + 1), FIELD) == 1


def hashed(ids: list[str]) -> list[bytes]:
    """Each id as the 32-byte u-coordinate of a point of Curve25519 (not of its twist): the first of SHA-256 of
    ``HASH_DOMAIN``, a 4-byte counter 0, 1, ... and its UTF-8 bytes, the top bit cleared (X25519 ignores it, RFC 7748),
    that is below FIELD and ``on_curve`` (two tries on average). X25519 keeps a point on the curve or on the twist, so
    an id hashed to either would have its blindings tell which, a bit of the id to whoever holds them."""
    points = []
    for value in ids:
        for counter in itertools.count():
            digest = hashlib.sha256(HASH_DOMAIN + counter.to_bytes(4, "little") + value.encode()).digest()
            u = int.from_bytes(digest, "little") & ((1 << 255) - 1)
            if u < FIELD and on_curve(u):
                points.append(u.to_bytes(BYTES_PER_ID, "little"))
                break
    return points


def _blinded(key: X25519PrivateKey, points: list[bytes], what: str) -> list[bytes]:
    """``points`` (32-byte u-coordinates) blinded with ``key``; an AlignmentError naming ``what`` for a point of low
    order, whose blinding is 0 (X25519 refuses it)."""
    try:
        return [key.exchange(X25519PublicKey.from_public_bytes(point)) for point in points]
    except ValueError:
        raise AlignmentError(f"{what}: a PSI message with a point of low order (no id hashes to one)") from None


def _elements(raw: bytes, count: int, what: str) -> list[bytes]:
    """The ``count`` 32-byte elements of the PSI message ``raw``; an AlignmentError naming ``what`` if it holds
    another number of bytes."""
    if not isinstance(raw, bytes) or len(raw) != BYTES_PER_ID * count:
        size = f"{len(raw)} bytes" if isinstance(raw, bytes) else "no bytes"
        raise AlignmentError(f"{what}: a PSI message of {size}, not the {BYTES_PER_ID} x {count} of the ids announced")
    return [raw[i:i + BYTES_PER_ID] for i in range(0, len(raw), BYTES_PER_ID)]


def check_ids(ids: list[str], what: str) -> list[str]:
    """Instance ids as a peer holds them: non-empty strings of at most MAX_ID_BYTES, no duplicates; a CRCError
    naming ``what`` and the first offender otherwise."""
    seen: set[str] = set()
    for row, value in enumerate(ids, start=1):
        if not isinstance(value, str) or not value or len(value.encode()) > MAX_ID_BYTES:
            raise CRCError(f"{what}: row {row}: an instance id must be a non-empty text of at most {MAX_ID_BYTES} bytes")
        if value in seen:
            raise CRCError(f"{what}: row {row}: instance id {value!r} appears twice")
        seen.add(value)
    if not ids:
        raise CRCError(f"{what}: no instance ids")
    return list(ids)


@dataclass
class LabelHolderPSI:
    """The label holder's side: ``BLINDINGS`` fresh secret scalars, each blinding every id, in an order of its own
    (the first the ids' order, the others shuffled), and one request of all their blinded ids, sent to every member.
    A member's response is the request's elements blinded again, in the request's order, and the order is what maps a
    match to an id: a member answering out of order would be taken as holding ids it does not hold (which the group's
    id list would then name to it). It cannot tell which elements of the blindings are the same id, so such an answer
    gives the blindings different overlaps, which is refused.

    ``request`` -> bytes for each member; ``overlap(setup, response, member_size, member)`` -> the label holder's
    ids that member holds; ``intersection(overlaps)`` -> the group's ids, sorted.
    """

    ids: list[str]

    def __post_init__(self):
        self._keys = [X25519PrivateKey.generate() for _ in range(BLINDINGS)]
        self._orders = [list(range(len(self.ids)))]
        for _ in range(BLINDINGS - 1):
            self._orders.append(random.SystemRandom().sample(range(len(self.ids)), len(self.ids)))
        points = hashed(self.ids)
        self.request = b"".join(b"".join(_blinded(key, [points[i] for i in order], "the label holder's ids"))
                                for key, order in zip(self._keys, self._orders))

    def overlap(self, setup: bytes, response: bytes, member_size: int, member: str) -> set[str]:
        n = len(self.ids)
        theirs = _elements(setup, member_size, f"PSI setup from {member}")
        answered = _elements(response, BLINDINGS * n, f"PSI response from {member}")
        found = []
        for k, (key, order) in enumerate(zip(self._keys, self._orders)):
            held = set(_blinded(key, theirs, f"PSI setup from {member}"))
            found.append({self.ids[order[i]] for i, element in enumerate(answered[k * n:(k + 1) * n]) if element in held})
        if any(each != found[0] for each in found[1:]):
            raise AlignmentError(f"PSI answer from {member} is out of order: two blindings of the same ids give "
                                 "different overlaps (a member answering out of order would be taken as holding ids it "
                                 "does not hold)")
        return found[0]

    def intersection(self, overlaps: list[set[str]]) -> list[str]:
        common = set(self.ids)
        for overlap in overlaps:
            common &= overlap
        return sorted(common)


def answer_request(ids: list[str], request: bytes, holder_size: int, holder: str) -> tuple[bytes, bytes]:
    """A member's side: (setup, response) bytes answering the label holder's request, with a fresh secret scalar.
    ``holder_size`` fixes the request's size (the label holder's number of ids, which it announces)."""
    what = f"PSI request from {holder}"
    asked = _elements(request, BLINDINGS * holder_size, what)
    key = X25519PrivateKey.generate()
    response = b"".join(_blinded(key, asked, what))
    setup = b"".join(sorted(_blinded(key, hashed(ids), "this peer's ids")))
    return setup, response


def rows_in_order(ids: list[str], group_ids: list[str], what: str) -> list[int]:
    """The row of each of the group's ids in a member's ``ids`` (the member's rows in the group's order); a CRCError
    when the group names an id the member does not hold (a label holder that lies), repeats one or names none."""
    position = {value: row for row, value in enumerate(ids)}
    if not group_ids:
        raise AlignmentError(f"{what}: the group's id list names no id (the label holder finds at least one, or stops)")
    if len(set(group_ids)) != len(group_ids):
        raise AlignmentError(f"{what}: the group's id list repeats an id")
    missing = [value for value in group_ids if value not in position]
    if missing:
        raise AlignmentError(f"{what}: the group's id list names {len(missing)} id(s) this peer does not hold")
    return [position[value] for value in group_ids]
