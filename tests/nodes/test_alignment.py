"""Aligning a vertical group's instances by a private set intersection (crc.nodes.alignment), in-process."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crc.core.errors import CRCError
from crc.nodes.alignment import (
    BLINDINGS,
    BYTES_PER_ID,
    CURVE_A,
    FIELD,
    AlignmentError,
    LabelHolderPSI,
    _blinded,
    answer_request,
    check_ids,
    hashed,
    on_curve,
    rows_in_order,
)


def _align(holder_ids, members):
    holder = LabelHolderPSI(holder_ids)
    overlaps = []
    for name, ids in members.items():
        setup, response = answer_request(ids, holder.request, len(holder_ids), "holder")
        overlaps.append(holder.overlap(setup, response, len(ids), name))
    return holder, overlaps, holder.intersection(overlaps)


def test_the_group_learns_exactly_the_ids_every_member_holds_and_orders_its_rows_by_them():
    holder_ids = [f"p{i}" for i in range(300)]
    members = {"a": [f"p{i}" for i in range(100, 400)][::-1], "b": [f"p{i}" for i in range(0, 600, 2)]}
    _, overlaps, group = _align(holder_ids, members)
    assert overlaps[0] == {f"p{i}" for i in range(100, 300)}  # the holder's overlap with member a
    assert group == sorted(f"p{i}" for i in range(100, 300, 2))
    for ids in (holder_ids, *members.values()):
        rows = rows_in_order(ids, group, "peer")
        assert [ids[row] for row in rows] == group


def test_no_overlap_gives_an_empty_group():
    assert _align(["x", "y"], {"a": ["z"]})[2] == []


@pytest.mark.parametrize("ids, message", [(["a", "a"], "appears twice"), (["a", ""], "non-empty"), ([], "no instance ids"),
                                          (["x" * 300], "at most 256 bytes")])
def test_duplicated_missing_or_oversized_ids_are_refused(ids, message):
    with pytest.raises(CRCError, match=message):
        check_ids(ids, "node.csv")


def elements(raw: bytes) -> list[bytes]:
    return [raw[i:i + BYTES_PER_ID] for i in range(0, len(raw), BYTES_PER_ID)]


@pytest.mark.parametrize("setup, response", [(b"\x00garbage" * 3, None), (None, b"\x0a\x05hello"), (b"x" * 10**6, None),
                                             (None, b"")])
def test_a_psi_answer_that_does_not_fit_is_refused(setup, response):
    holder = LabelHolderPSI(["a", "b", "c"])
    good_setup, good_response = answer_request(["b", "c"], holder.request, 3, "holder")
    with pytest.raises(AlignmentError, match="from member"):
        holder.overlap(setup or good_setup, good_response if response is None else response, 2, "member")


def test_a_point_of_low_order_is_refused_on_either_side():
    """u = 0 and u = 1 are of low order: their blinding is 0, whatever the scalar (which X25519 refuses); no id hashes
    to one."""
    holder = LabelHolderPSI(["a", "b"])
    setup, response = answer_request(["b", "c"], holder.request, 2, "holder")
    low = bytes(32), (1).to_bytes(32, "little")
    with pytest.raises(AlignmentError, match="PSI setup from member: a PSI message with a point of low order"):
        holder.overlap(low[0] + setup[BYTES_PER_ID:], response, 2, "member")
    with pytest.raises(AlignmentError, match="PSI request from holder: a PSI message with a point of low order"):
        answer_request(["a"], low[1] + holder.request[BYTES_PER_ID:], 2, "holder")


def test_blinding_commutes_and_hides_the_ids():
    """What the protocol rests on: the same id blinded by both parties, in either order, is the same element; the
    elements differ from the hashed ids, between the label holder's two blindings, and between runs."""
    first, second = LabelHolderPSI(["a", "b"]), LabelHolderPSI(["a", "b"])
    assert first.request != second.request
    points = hashed(["a", "b"])
    assert not set(elements(first.request)) & set(points)
    assert len(set(elements(first.request))) == 4
    assert hashed(["a"]) == hashed(["a"]) and len(points[0]) == BYTES_PER_ID and points[0][31] < 0x80
    setup, _ = answer_request(["a", "b"], first.request, 2, "holder")
    assert first.overlap(setup, answer_request(["a", "b"], first.request, 2, "holder")[1], 2, "member") == set()
    setup, response = answer_request(["a", "b"], first.request, 2, "holder")
    assert first.overlap(setup, response, 2, "member") == {"a", "b"}


def test_a_request_that_does_not_fit_is_refused_and_a_lying_group_list_is_caught():
    with pytest.raises(AlignmentError, match="request from holder: a PSI message of 3 bytes, not the 32 x 6"):
        answer_request(["a"], b"\x00\x01\x02", 3, "holder")
    with pytest.raises(AlignmentError, match="does not hold"):
        rows_in_order(["a", "b"], ["a", "c"], "peer")
    with pytest.raises(AlignmentError, match="repeats"):
        rows_in_order(["a", "b"], ["a", "a"], "peer")


def test_a_psi_message_about_more_ids_than_announced_is_refused():
    """The announced counts fix what a PSI message may ask or tell: a label holder announcing 2 ids asks about 40, a
    member announcing 1 id answers with 3."""
    crafted = LabelHolderPSI([f"guess-{i}" for i in range(40)])
    with pytest.raises(AlignmentError, match="a PSI message of 2560 bytes, not the 32 x 4 of the ids announced"):
        answer_request(["a", "b"], crafted.request, 2, "holder")
    holder = LabelHolderPSI(["a", "b", "c"])
    setup, response = answer_request(["a", "b", "c"], holder.request, 3, "holder")
    with pytest.raises(AlignmentError, match="PSI setup from member: a PSI message of 96 bytes, not the 32 x 1"):
        holder.overlap(setup, response, 1, "member")


def halves_reversed(elements):
    half = len(elements) // 2
    return elements[:half][::-1] + elements[half:][::-1]


def held_and_not_swapped(elements):
    """p0 (held) and p150 (not) swapped in the first blinding, which is in the ids' order."""
    swapped = list(elements)
    swapped[0], swapped[150] = elements[150], elements[0]
    return swapped


@pytest.mark.parametrize("deviation, refused", [(lambda elements: elements[::-1], False), (halves_reversed, True),
                                                (held_and_not_swapped, True)])
def test_a_member_that_answers_out_of_order_learns_no_id_it_does_not_hold(deviation, refused):
    """The response is the request's blinded ids, blinded again, in the request's order: a member holding p0 .. p99
    that reversed it was taken as holding p100 .. p199, which the group's id list would then have named to it. The
    label holder blinds its ids twice, in two orders, with two keys: the member cannot tell which elements are the
    same id, so an answer out of order gives the two blindings different overlaps (refused), or none."""
    held = {f"p{i}" for i in range(100)}
    holder = LabelHolderPSI([f"p{i}" for i in range(200)])
    setup, response = answer_request(sorted(held), holder.request, 200, "holder")
    assert holder.overlap(setup, response, 100, "member") == held
    try:
        taken = holder.overlap(setup, b"".join(deviation(elements(response))), 100, "member")
    except AlignmentError as error:
        assert "out of order" in str(error)
        taken = None
    assert (taken is None) if refused else taken <= held


def u_of(element: bytes) -> int:
    return int.from_bytes(element, "little")


def element(u: int) -> bytes:
    return u.to_bytes(BYTES_PER_ID, "little")


def test_every_hashed_and_blinded_id_is_of_the_curve_so_that_no_message_tells_a_bit_of_an_id():
    """X25519 keeps a point on the curve or on its twist: with ids hashed to either (about half each), a member read,
    of every element of the request, on which its id was hashed, a bit of each of the label holder's ids, in its rows'
    order (and the label holder a bit of each of the member's). Every id is hashed to the curve: the bit is the same
    for all."""
    ids = [f"patient-{i:05d}" for i in range(0, 600, 3)]
    assert [on_curve(u_of(point)) for point in hashed(ids)] == [True] * len(ids)
    assert all(u_of(point) < FIELD for point in hashed(ids))
    holder = LabelHolderPSI(ids)
    setup, response = answer_request([f"patient-{i:05d}" for i in range(300)], holder.request, len(ids), "holder")
    for message in (holder.request, setup, response):
        assert all(on_curve(u_of(each)) for each in elements(message))
    assert holder.overlap(setup, response, 300, "member") == {f"patient-{i:05d}" for i in range(0, 300, 3)}


@given(u=st.integers(0, FIELD - 1))
def test_on_curve_is_euler_s_criterion(u):
    """The Jacobi symbol behind ``on_curve`` against the plain definition: u^3 + A u^2 + u a non-zero square mod p
    when its (p - 1) / 2 power is 1."""
    assert on_curve(u) == (pow((u**3 + CURVE_A * u**2 + u) % FIELD, (FIELD - 1) // 2, FIELD) == 1)


def test_the_twist_is_of_about_half_the_u_coordinates():
    """What ``on_curve`` tells apart: u-coordinates of the twist are as common as the curve's (the bit above was
    random), and points the tests below use are where they say."""
    import hashlib

    coordinates = [u_of(hashlib.sha256(bytes([i])).digest()) % FIELD for i in range(256)]
    assert 90 < sum(map(on_curve, coordinates)) < 166
    assert on_curve(9) and not on_curve(2)  # the base point of X25519, a point of the twist


LOW_ORDER = (0, 1, 325606250916557431795983626356110631294008115727848805560023387167927233504,
             39382357235489614581723060781553021112529911719440698176882885853963445705823, FIELD - 1, FIELD, FIELD + 1)
"""The u-coordinates of points of order 1, 2, 4 and 8 of the curve and the twist, and the non-canonical encodings
of 0 and 1 (RFC 7748's caveat, libsodium's list)."""


@pytest.mark.parametrize("u", [*LOW_ORDER, *(u + 2**255 for u in LOW_ORDER[:5])])
def test_every_point_of_low_order_is_refused_in_any_encoding_on_either_side(u):
    """A point of low order blinds to 0 whatever the scalar: in a request it would make the member's response say
    nothing, in a setup it would match a response of 0. Each of them, also with the top bit set (X25519 ignores it),
    is refused."""
    holder = LabelHolderPSI(["a", "b"])
    setup, response = answer_request(["b", "c"], holder.request, 2, "holder")
    with pytest.raises(AlignmentError, match="point of low order"):
        holder.overlap(element(u) + setup[BYTES_PER_ID:], response, 2, "member")
    with pytest.raises(AlignmentError, match="point of low order"):
        answer_request(["a"], holder.request[:BYTES_PER_ID] + element(u) + holder.request[2 * BYTES_PER_ID:], 2,
                       "holder")


@pytest.mark.parametrize("u", [u_of(hashed(["a"])[0]), 2, 5])
def test_a_part_of_small_order_in_a_request_tells_nothing_of_the_members_scalar(u):
    """A deviating label holder may send a point plus one of order 2, T = (0, 0), whose u-coordinate is 1/u, on the
    curve (a hashed id) or on the twist (2, 5). A scalar k blinds it to the u of [k] P + [k] T: [k] P's if k is even,
    1 / that if k is odd, a bit of k. X25519's scalars are multiples of 8: the two blind alike, whatever the key."""
    assert on_curve(u) == (u != 2 and u != 5)
    for _ in range(4):
        holder = LabelHolderPSI(["a"])
        request = element(u) + element(pow(u, -1, FIELD))
        _, response = answer_request(["a"], request, len(request) // (BLINDINGS * BYTES_PER_ID), "holder")
        first, second = elements(response)
        assert first == second and u_of(first) != 0
        assert holder.request != request


def test_a_member_that_echoes_or_repeats_elements_is_taken_as_holding_no_id_it_did_not_guess():
    """A deviating member without the label holder's scalars: echoing the request as its response and the request's
    elements as its setup matches nothing; its setup of one blinded id many times, or with the top bit set (the same
    point to X25519), is at most that id; echoing the request with hashed guesses as its setup (a member of scalar 1)
    is the guesses the label holder holds, as the docs say: an answer for guessed ids, no more of them than announced."""
    ids = [f"p{i}" for i in range(50)]
    holder = LabelHolderPSI(ids)
    n = len(ids)
    assert holder.overlap(holder.request[:n * BYTES_PER_ID], holder.request, n, "member") == set()
    setup, response = answer_request(["p7"], holder.request, n, "holder")
    assert holder.overlap(setup * 5, response, 5, "member") == {"p7"}
    top_bit = setup[:-1] + bytes([setup[-1] | 0x80])
    assert holder.overlap(setup + top_bit, response, 2, "member") == {"p7"}
    guesses = [f"p{i}" for i in range(40, 60)]
    assert holder.overlap(b"".join(hashed(guesses)), holder.request, len(guesses), "member") == set(guesses) & set(ids)


def test_a_deviating_label_holder_learns_which_of_its_blindings_times_its_count_of_guesses_a_member_holds():
    """The bound the docs give: the member cannot tell the label holder's blindings apart, so a label holder
    announcing n ids may send BLINDINGS x n guesses in one blinding and learns which of them the member holds (and
    ``test_a_psi_message_about_more_ids_than_announced_is_refused``: no more)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    announced, guesses = 10, [f"g{i}" for i in range(BLINDINGS * 10)]
    key = X25519PrivateKey.generate()
    request = b"".join(_blinded(key, hashed(guesses), "guesses"))
    held = guesses[3:17:2]
    setup, response = answer_request(held + ["other"], request, announced, "holder")
    theirs = set(_blinded(key, elements(setup), "setup"))
    assert {guess for guess, each in zip(guesses, elements(response)) if each in theirs} == set(held)


def test_the_setup_is_sorted_so_it_says_nothing_of_the_members_rows_order():
    """The setup's elements are fresh pseudorandom points, sent sorted: in the member's rows' order they would tell
    the label holder, with the matches, the row of each id it holds."""
    holder = LabelHolderPSI([f"p{i}" for i in range(40)])
    ids = [f"p{i}" for i in range(60)][::-1]
    setup, _ = answer_request(ids, holder.request, 40, "holder")
    assert elements(setup) == sorted(elements(setup)) and len(set(elements(setup))) == len(ids)
