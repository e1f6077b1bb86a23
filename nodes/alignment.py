"""Aligning the instances of a vertical group by their ids, with a private set intersection (PSI) and no coordinator.

The peers of a group each hold some instance ids. The label holder runs an ECDH-based PSI (OpenMined's
``openmined.psi``: both sides blind hashed ids with secret exponents on an elliptic curve) as the client with every
other member, over their encrypted channels, and learns its overlap with each; it intersects those overlaps, and
sends the group's ids, sorted, to every member. Then every member orders its rows by that list.

What is revealed: each member learns the size of the label holder's id set and the group's intersection (ids it
holds itself); the label holder learns, for every member, which of its own ids that member holds (with three or
more members this can be more than the group's intersection). Nobody learns an id it does not hold, as long as
everyone follows the protocol. PSI cannot tell an id guessed from an id held: a deviating label holder can put
guesses in its request (as many as it announces, at most ``ID_RATIO`` times the member's ids,
``crc.nodes.vertical_wire``) and learn which of them a member holds. So could a member whose PSI request reaches
another member before the label holder's, unless that member names its label holder (``--label-holder``,
``crc.nodes.group_member``); a deviating member can answer for guessed ids and learn which of them the group holds.

The messages are protobuf bytes of ``openmined.psi``; they are size-checked before parsing, must be about no more
ids than their sender announced, a member's setup must be the raw set (a filter can be filled to match every id),
and its response in order (``LabelHolderPSI`` blinds every id twice to check it). A message that does not parse
or does not fit is an ``AlignmentError``: one line, and the peer stops (the group cannot align).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from crc.core.errors import CRCError

BLINDINGS = 2
"""Times the label holder's request blinds each id (with a key and in an order of each time's own)."""
PSI_FALSE_POSITIVE_RATE = 0.0
"""The server's setup is sent raw (no Bloom or Golomb filter): the intersection is exact. The label holder takes no
other: a filter can be filled to match every id, which would make a member look as if it held them all."""
BYTES_PER_ID = 80
"""Bound on a PSI message's bytes per id (a compressed curve point is 33 bytes; protobuf adds a few)."""
MESSAGE_OVERHEAD = 4096
MAX_ID_BYTES = 256
"""Longest instance id accepted (UTF-8 bytes)."""


class PSIUnavailable(CRCError):
    """The PSI library is not installed."""


def require_psi() -> None:
    """A PSIUnavailable (one line naming the extra) unless the PSI library can be imported: checked before a vertical
    peer or group starts, so that none waits for a peer that could not align."""
    _psi()


def _psi():
    try:
        import private_set_intersection.python as psi
    except ModuleNotFoundError:
        raise PSIUnavailable("aligning a vertical group's ids needs OpenMined's PSI library: "
                             "pip install 'crc-p2p[vertical]' (or '.[vertical]' from a clone)") from None
    return psi


class AlignmentError(CRCError):
    """A PSI message that does not parse or fit (one line: who sent what)."""


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


def _limit(n_ids: int) -> int:
    return MESSAGE_OVERHEAD + BYTES_PER_ID * n_ids


def _parse(kind, raw: bytes, n_ids: int, what: str, elements=lambda message: message.encrypted_elements,
           blindings: int = 1):
    """The PSI message ``kind`` from ``raw``, about at most ``n_ids`` ids (the sender's announced count), each
    ``blindings`` times: its bytes bound before parsing, its ``elements`` (the blinded ids) after."""
    if not isinstance(raw, bytes) or len(raw) > _limit(blindings * n_ids):
        raise AlignmentError(f"{what}: a PSI message of {len(raw) if isinstance(raw, bytes) else '?'} bytes, more than "
                             f"{n_ids} ids need")
    message = kind()
    try:
        message.ParseFromString(raw)
    except Exception as exc:  # protobuf's DecodeError and its kin: anything that does not parse
        raise AlignmentError(f"{what}: a PSI message that does not parse ({type(exc).__name__})") from None
    held = len(elements(message))
    if held > blindings * n_ids:
        raise AlignmentError(f"{what}: a PSI message about {held / blindings:g} ids, more than the {n_ids} announced")
    return message


@dataclass
class LabelHolderPSI:
    """The label holder's side: ``BLINDINGS`` PSI clients (fresh secret keys), each blinding every id, in an order of
    its own (the first the ids' order, the others shuffled), and one request of all their blinded ids, sent to every
    member. A member's response is the request's elements blinded again, in the request's order, and the order is what
    maps a match to an id: a member answering out of order would be taken as holding ids it does not hold (which the
    group's id list would then name to it). It cannot tell which elements of the blindings are the same id, so such
    an answer gives the blindings different overlaps, which is refused.

    ``request`` -> bytes for each member; ``overlap(setup, response, member_size, member)`` -> the label holder's
    ids that member holds; ``intersection(overlaps)`` -> the group's ids, sorted.
    """

    ids: list[str]

    def __post_init__(self):
        self._psi = _psi()
        self._clients = [self._psi.client.CreateWithNewKey(True) for _ in range(BLINDINGS)]
        self._orders = [list(range(len(self.ids)))]
        for _ in range(BLINDINGS - 1):
            self._orders.append(random.SystemRandom().sample(range(len(self.ids)), len(self.ids)))
        request = self._psi.Request(reveal_intersection=True)
        for client, order in zip(self._clients, self._orders):
            request.encrypted_elements.extend(client.CreateRequest([self.ids[i] for i in order]).encrypted_elements)
        self.request = request.SerializeToString()

    def overlap(self, setup: bytes, response: bytes, member_size: int, member: str) -> set[str]:
        psi, n = self._psi, len(self.ids)
        parsed_setup = _parse(psi.ServerSetup, setup, member_size, f"PSI setup from {member}",
                              lambda message: message.raw.encrypted_elements)
        if parsed_setup.WhichOneof("data_structure") != "raw":  # a filter of all ones would match every id
            raise AlignmentError(f"PSI setup from {member} is not the raw set of blinded ids this group aligns with")
        elements = _parse(psi.Response, response, n, f"PSI response from {member}", blindings=BLINDINGS).encrypted_elements
        if len(elements) != BLINDINGS * n:
            raise AlignmentError(f"PSI response from {member} answers {len(elements)} blinded ids, the request has "
                                 f"{BLINDINGS * n}")
        found = []
        for k, (client, order) in enumerate(zip(self._clients, self._orders)):
            part = psi.Response(encrypted_elements=elements[k * n:(k + 1) * n])
            try:
                indices = client.GetIntersection(parsed_setup, part)
            except Exception as exc:  # the library raises its own errors on inconsistent messages
                raise AlignmentError(f"PSI answer from {member} is inconsistent ({type(exc).__name__})") from None
            if any(not 0 <= i < n for i in indices):
                raise AlignmentError(f"PSI answer from {member} names rows the label holder does not have")
            found.append({self.ids[order[i]] for i in indices})
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
    """A member's side: (setup, response) bytes answering the label holder's request, with a fresh secret key.
    ``holder_size`` bounds the request (the label holder's number of ids, which it announces)."""
    psi = _psi()
    server = psi.server.CreateWithNewKey(True)
    parsed = _parse(psi.Request, request, holder_size, f"PSI request from {holder}", blindings=BLINDINGS)
    try:
        response = server.ProcessRequest(parsed)
    except Exception as exc:
        raise AlignmentError(f"PSI request from {holder} is malformed ({type(exc).__name__})") from None
    setup = server.CreateSetupMessage(PSI_FALSE_POSITIVE_RATE, holder_size, ids, psi.DataStructure.RAW)
    return setup.SerializeToString(), response.SerializeToString()


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
