"""Aligning a vertical group's instances by a private set intersection (crc.nodes.alignment), in-process."""

import pytest

from crc.core.errors import CRCError
from crc.nodes.alignment import BYTES_PER_ID, AlignmentError, LabelHolderPSI, answer_request, check_ids, hashed, rows_in_order


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
