"""The vertical group's messages (crc.nodes.vertical_wire): every type round-trips; hostile frames are rejected with
their cause before anything is used."""

import contextlib
from dataclasses import replace

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crc.nodes.vertical_wire import FIELDS, GroupExpectation, PSIAnswer, PSIIds, PSIRequest, Scores, Weights, decode_group, encode_group
from crc.nodes.wire import PROTOCOL_VERSION, Rejected, Resumed, encode_resumed

ME, HOLDER, MEMBER, NEIGHBOUR = (f"tcp://127.0.0.1:{7000 + i}" for i in range(4))
SCHEMA = "ab" * 32
EXPECT = GroupExpectation(run="crc", schema_id=SCHEMA, neighbours=frozenset({HOLDER, MEMBER}), rows=5, width=2)


def frame(kind, sender=HOLDER, round_=1, **fields):
    return encode_group(kind, run="crc", sender=sender, round_=round_, schema_id=SCHEMA, **fields)


def test_every_type_round_trips():
    values = np.arange(10.0).reshape(5, 2) - 4.5
    assert decode_group(frame("psi-request", round_=0, ids=3, request=b"r"), EXPECT) == PSIRequest(HOLDER, 0, 3, b"r")
    assert decode_group(frame("psi-answer", round_=0, ids=4, block=2, setup=b"s", response=b"p"), EXPECT) == \
        PSIAnswer(HOLDER, 0, 4, 2, b"s", b"p")
    assert decode_group(frame("psi-ids", round_=0, ids=["a", "b"]), EXPECT) == PSIIds(HOLDER, 0, ("a", "b"))
    scores = decode_group(frame("scores", values=values), EXPECT)
    assert isinstance(scores, Scores) and np.array_equal(scores.values, values.reshape(-1))
    weights = decode_group(frame("weights", best=True, values=values[:0]), EXPECT)
    assert isinstance(weights, Weights) and weights.best is True and weights.values.size == 0


def packed(**changes):
    body = {"v": PROTOCOL_VERSION, "type": "scores", "run": "crc", "from": HOLDER, "round": 1, "schema": SCHEMA, "n": 1,
            "data": np.zeros(1).tobytes(), **changes}
    return msgpack.packb({k: v for k, v in body.items() if v is not None}, use_bin_type=True)


@pytest.mark.parametrize("raw, cause", [
    (packed(v=PROTOCOL_VERSION + 1), "version"), (packed(run="other"), "run"), (packed(schema="cd" * 32), "schema"),
    (packed(**{"from": "tcp://127.0.0.1:9"}), "sender"), (packed(type="stats"), "type"), (packed(n=None), "malformed"),
    (packed(round=True), "malformed"), (packed(round=-1), "malformed"), (packed(n=2), "length"),
    (packed(data=np.array([np.nan]).tobytes()), "non-finite"), (packed(data=np.array([1e300]).tobytes()), "magnitude"),
    (packed(extra=1), "malformed"), (b"\x92\x01\x02", "malformed"), (b"\xc1", "malformed"),
    (msgpack.packb({"v": PROTOCOL_VERSION, "type": "psi-ids", "run": "crc", "from": HOLDER, "round": 0, "schema": SCHEMA,
                    "ids": [str(i) for i in range(6)]}), "malformed"),  # more ids than this peer holds
    (msgpack.packb({"v": PROTOCOL_VERSION, "type": "weights", "run": "crc", "from": HOLDER, "round": 0, "schema": SCHEMA,
                    "best": 1, "n": 0, "data": b""}), "malformed"),  # best must be a bool
    (b"\x00" * (EXPECT.max_frame_bytes + 1), "oversized"),
])
def test_hostile_frames_are_rejected_with_their_cause(raw, cause):
    with pytest.raises(Rejected) as caught:
        decode_group(raw, EXPECT)
    assert caught.value.cause == cause


def test_with_keys_a_frame_must_come_with_the_key_of_the_member_it_names():
    keyed = GroupExpectation(run="crc", schema_id=SCHEMA, neighbours=frozenset({HOLDER}), rows=5, width=2,
                             known_keys={HOLDER: "k" * 40})
    good = frame("psi-request", round_=0, ids=1, request=b"r")
    assert decode_group(good, keyed, "k" * 40).sender == HOLDER
    with pytest.raises(Rejected, match="forged"):
        decode_group(good, keyed, "x" * 40)


def test_a_resumed_notice_is_the_horizontal_peers_from_a_member_or_a_block_neighbour_with_its_key():
    keys = {HOLDER: "k" * 40, NEIGHBOUR: "n" * 40}
    hybrid = replace(EXPECT, block_neighbours=frozenset({NEIGHBOUR}), known_keys=keys)
    for sender in (HOLDER, NEIGHBOUR):
        assert decode_group(encode_resumed(run="crc", sender=sender, round_=4), hybrid, keys[sender]) == Resumed(sender, 4)
    for notice, expect, key, cause in [
        (encode_resumed(run="crc", sender=NEIGHBOUR, round_=4), EXPECT, None, "sender"),  # no block neighbour here
        (encode_resumed(run="crc", sender=NEIGHBOUR, round_=4), hybrid, "k" * 40, "forged"),
        (encode_resumed(run="other", sender=HOLDER, round_=4), hybrid, "k" * 40, "run"),
        (encode_resumed(run="crc", sender=HOLDER, round_=-1), hybrid, "k" * 40, "malformed"),
        (packed(type="resumed"), EXPECT, None, "malformed"),  # a notice has no schema, no data
    ]:
        with pytest.raises(Rejected) as caught:
            decode_group(notice, expect, key)
        assert caught.value.cause == cause


def test_every_field_list_has_the_common_fields():
    assert all({"v", "type", "run", "from", "round", "schema"} <= fields for fields in FIELDS.values())


def raw(kind, **fields):
    body = {"v": PROTOCOL_VERSION, "type": kind, "run": "crc", "from": HOLDER, "round": 0, "schema": SCHEMA, **fields}
    return msgpack.packb(body, use_bin_type=True)


@pytest.mark.parametrize("frame_, cause", [
    (raw("psi-request", ids=EXPECT.max_ids + 1, request=b"r"), "malformed"),  # a request about too many ids
    (raw("psi-request", ids=0, request=b"r"), "malformed"),
    (raw("psi-request", ids=3, request="r"), "malformed"),
    (raw("psi-answer", ids=2, block=-1, setup=b"s", response=b"p"), "malformed"),
    (raw("psi-answer", ids=2, block=4096, setup=b"s", response=b"p"), "malformed"),
    (raw("psi-answer", ids=2**63, block=1, setup=b"s", response=b"p"), "malformed"),
    (raw("psi-answer", ids=2, block=1, setup=7, response=b"p"), "malformed"),
    (raw("psi-ids", ids=["a", ""]), "malformed"), (raw("psi-ids", ids=["a", 7]), "malformed"),
    (raw("psi-ids", ids="abc"), "malformed"),
    (frame("psi-request", round_=1, ids=3, request=b"r"), "malformed"),  # the alignment is round 0's
    (frame("psi-answer", round_=2**40, ids=2, block=1, setup=b"s", response=b"p"), "malformed"),
    (frame("psi-ids", round_=3, ids=["a"]), "malformed"),
    (raw("scores", n=-1, data=b""), "length"), (raw("weights", best=False, n=1, data=b"\x00" * 7), "length"),
    (raw("masked-scores", n=2, data=b"\x00" * 8), "length"), (raw("scores", n=1.0, data=b"\x00" * 8), "malformed"),
    (raw("scores", n=1, data=np.array([-np.inf]).tobytes()), "non-finite"),
    (msgpack.packb({"v": "2", "type": "scores", "run": "crc", "from": HOLDER, "round": 0, "schema": SCHEMA, "n": 0,
                    "data": b""}), "malformed"),
    (msgpack.packb({1: 2}), "malformed"), (msgpack.packb({"type": ["scores"]}), "type"),
])
def test_every_field_of_every_type_is_checked(frame_, cause):
    with pytest.raises(Rejected) as caught:
        decode_group(frame_, EXPECT)
    assert caught.value.cause == cause


VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(),
                                st.text(max_size=8), st.binary(max_size=24), st.sampled_from([HOLDER, SCHEMA, "crc"])),
                      lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner,
                                                                                          max_size=3)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(kind=st.one_of(st.sampled_from(sorted({*FIELDS, "resumed"})), VALUES), fields=st.dictionaries(
    st.sampled_from(sorted(set().union(*FIELDS.values()))), VALUES, max_size=10))
def test_any_map_of_any_values_decodes_or_is_rejected_never_raises_otherwise(kind, fields):
    """Every field of every type, any value (a map where a text belongs, too): a Rejected or a message, nothing else."""
    with contextlib.suppress(Rejected):
        decode_group(msgpack.packb({**fields, "type": kind}, use_bin_type=True), EXPECT)
