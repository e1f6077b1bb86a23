"""The network sum (``--sum-over network``) against hostile input: every frame a neighbour can send is rejected by
cause or taken, nothing it sends grows what a peer holds beyond the window, and a peer given a roster it is not in
(or under another key) is refused with one clear line."""

from __future__ import annotations

import contextlib

import msgpack
import numpy as np
import pytest

from crc.core.errors import CRCError
from crc.core.plausibility import SECURE_AGGREGATION_TERM_LIMIT
from crc.nodes.keys import new_key_pair
from crc.nodes.network_sum import NetworkSum
from crc.nodes.roster import MAX_NETWORK_PEERS, roster_of
from crc.nodes.secure_aggregation import from_fixed, to_fixed
from crc.nodes.settings import PeerSettings, SecureAggregationKeys
from crc.nodes.wire import Expectation, Rejected, decode
from support.network_sum import ADDRESS, CHAIN, CHAIN_ROOT, RELAY, RUN, network_data, roster_for

WINDOW = 8
PARENT, CHILD = CHAIN_ROOT, RELAY - 1  # the relay's neighbours; nothing below its child
ROUNDS = 64


@pytest.fixture(scope="module")
def data():
    return network_data()


@pytest.fixture
def setting(data):
    """(a relay of the chain, its expectation, the model, a frame maker)."""
    model, _, _, _, ess = data
    pairs = [new_key_pair() for _ in ADDRESS]
    roster = roster_for(CHAIN, pairs)
    relay = NetworkSum(ADDRESS[RELAY], RUN, roster, pairs[RELAY].secret, window=WINDOW, rounds=ROUNDS)
    expect = Expectation(run=RUN, schema_id=model.schema_id, ess=ess, size=model.size, model=model,
                         neighbours=frozenset({ADDRESS[PARENT], ADDRESS[CHILD]}), secure_aggregation=True, roster=roster.digest,
                         roster_size=len(ADDRESS))

    def frame(kind, sender, round_, words, contributors, **changed):
        body = {"v": 2, "type": kind, "run": RUN, "from": ADDRESS[sender], "round": round_, "roster": roster.digest,
                "schema": model.schema_id, "ess": float(ess), "n": 0 if words is None else len(words),
                "data": b"" if words is None else np.asarray(words, "<u8").tobytes(), "contributors": contributors,
                **changed}
        return msgpack.packb(body, use_bin_type=True)

    return relay, expect, model, frame


BELOW = bytes([0b1])  # peer 0: the relay's child's subtree
EVERYONE = bytes([0b11111])
HOSTILE = {  # name: (kind, sender, round, words (None: no data, "full": the model's size), contributors, changes, cause)
    "spare bits set": ("partial", CHILD, 0, "full", bytes([0b11111000]), {}, "malformed"),
    "a bitmap one byte long": ("partial", CHILD, 0, "full", bytes([0b11000, 0]), {}, "malformed"),
    "an empty bitmap": ("partial", CHILD, 0, "full", b"", {}, "malformed"),
    "a bitmap that is text": ("partial", CHILD, 0, "full", "\x18", {}, "malformed"),
    "contributors outside the subtree": ("partial", CHILD, 0, "full", bytes([0b11]), {}, "role"),
    "a total with n = 0 and data": ("total", PARENT, 0, None, EVERYONE, {"data": bytes(8)}, "length"),
    "a total with n words and no data": ("total", PARENT, 0, None, EVERYONE, {"n": 51}, "length"),
    "a partial with n = 0": ("partial", CHILD, 0, None, BELOW, {}, "length"),
    "a total from a child": ("total", CHILD, 0, "full", EVERYONE, {}, "role"),
    "a partial from the parent": ("partial", PARENT, 0, "full", bytes([0b100]), {}, "role"),
    "a round of 2^64 - 1": ("total", PARENT, 2**64 - 1, "full", EVERYONE, {}, "malformed"),
    "a round past the run": ("partial", CHILD, ROUNDS, "full", BELOW, {}, "malformed"),
    "a negative round": ("partial", CHILD, -1, "full", BELOW, {}, "malformed"),
    "n a boolean": ("partial", CHILD, 0, "full", BELOW, {"n": True}, "malformed"),
    "another roster": ("partial", CHILD, 0, "full", BELOW, {"roster": "0" * 64}, "roster"),
    "a stranger (not a neighbour)": ("partial", 4, 0, "full", bytes([0b10000]), {}, "sender"),
    "an ESS of NaN": ("partial", CHILD, 0, "full", BELOW, {"ess": float("nan")}, "ess"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_sum_frame_is_rejected_by_its_cause(setting, name):
    relay, expect, model, frame = setting
    kind, sender, round_, words, contributors, changed, cause = HOSTILE[name]
    words = np.zeros(model.size, np.uint64) if words == "full" else words
    with pytest.raises(Rejected) as caught:
        relay.take(decode(frame(kind, sender, round_, words, contributors, **changed), expect), 0)
    assert caught.value.cause == cause
    assert not relay._partials and not relay._totals and relay.latest(0) is None


def test_a_flood_of_valid_and_invalid_frames_holds_at_most_the_window(setting):
    relay, expect, model, frame = setting
    rng = np.random.default_rng(0)
    awaited = 5
    for sent in range(4000):
        kind = ("partial", "total")[sent % 2]
        words = rng.integers(0, 2**63, size=model.size, dtype=np.uint64)
        contributors = [BELOW, bytes([0b10]), bytes([0b1000])][sent % 3] if kind == "partial" else EVERYONE
        with contextlib.suppress(Rejected):
            relay.take(decode(frame(kind, CHILD if kind == "partial" else PARENT, int(rng.integers(0, 40)), words,
                                     contributors), expect), awaited)
    assert relay._partials and relay._totals  # some were taken
    assert set(relay._partials) | set(relay._totals) <= set(range(awaited, awaited + WINDOW + 1))
    assert sum(map(len, relay._partials.values())) <= WINDOW + 1 and len(relay._totals) <= WINDOW + 1
    relay.advance(awaited + WINDOW + 1)
    assert not relay._partials and not relay._totals


def test_a_peer_outside_the_roster_or_under_another_key_is_refused_clearly():
    pairs = [new_key_pair() for _ in ADDRESS]
    roster = roster_for(CHAIN, pairs)
    with pytest.raises(ValueError, match="this peer in the roster"):
        PeerSettings(bind="tcp://127.0.0.1:7999", peers=(), run=RUN, network=roster,
                     secure_aggregation=SecureAggregationKeys(pairs[0].secret, {}))
    with pytest.raises(CRCError, match="another public key than that of this peer's secret key"):
        NetworkSum(ADDRESS[2], RUN, roster, pairs[3].secret)


def test_only_the_parents_totals_lead_a_peer_ahead_and_the_latest_beyond_the_window_is_kept(setting):
    relay, expect, model, frame = setting
    words = np.zeros(model.size, np.uint64)

    def take(kind, sender, round_, contributors):
        relay.take(decode(frame(kind, sender, round_, words, contributors), expect), 0)

    take("partial", CHILD, 5, BELOW)  # a child far ahead of its parent deviates: its parent does not skip for it
    assert relay.latest(0) is None
    take("partial", CHILD, WINDOW + 5, BELOW)  # beyond the window: the child's latest is kept, one frame
    with pytest.raises(Rejected, match="a partial of round 9, .* a later one is kept"):
        take("partial", CHILD, WINDOW + 1, BELOW)
    assert relay.latest(0) is None and relay.children_ahead(0) == WINDOW + 5  # the root's rule, all its children
    take("total", PARENT, 40, EVERYONE)  # the parent is past the window: this peer was left behind
    with pytest.raises(Rejected, match="ahead"):
        take("total", PARENT, 30, EVERYONE)  # not later than the one kept
    with pytest.raises(Rejected, match="a total of round 40, .* a later one is kept"):
        take("total", PARENT, 50, EVERYONE)  # later: kept instead, the one it replaces counted as ahead
    assert relay.latest(0) == 50 and relay.total(50) is not None and relay.total(40) is None
    relay.advance(51)
    assert relay.latest(0) is None and relay.total(50) is None


def test_a_replay_of_an_earlier_round_is_stale_and_a_copy_of_a_held_frame_is_dropped(setting):
    relay, expect, model, frame = setting
    words = np.arange(model.size, dtype=np.uint64)
    partial = decode(frame("partial", CHILD, 6, words, BELOW), expect)
    relay.take(partial, 6)
    relay.take(partial, 6)  # a copy (sent again after a restart): dropped
    assert len(relay._partials[6]) == 1
    for kind, sender, contributors in [("partial", CHILD, BELOW), ("total", PARENT, EVERYONE)]:
        with pytest.raises(Rejected) as caught:
            relay.take(decode(frame(kind, sender, 5, words, contributors), expect), 6)
        assert caught.value.cause == "stale"


def test_the_largest_roster_takes_every_peers_bit_and_its_sum_at_the_term_limit_does_not_overflow():
    peers = MAX_NETWORK_PEERS
    pairs = [new_key_pair() for _ in range(peers)]
    addresses = [f"tcp://10.0.{v // 250}.{v % 250}:7000" for v in range(peers)]
    roster = roster_of({"peers": {addresses[v]: pairs[v].public for v in range(peers)},
                        "edges": [[addresses[v], addresses[(v + 1) % peers]] for v in range(peers)]})
    with pytest.raises(CRCError, match="2 to 256"):
        roster_of({"peers": {**roster.keys, "tcp://10.0.9.9:7000": pairs[0].public}, "edges": []})
    one = NetworkSum(addresses[0], RUN, roster, pairs[0].secret)
    bitmap = one.bitmap(addresses)
    assert len(bitmap) == peers // 8 and one.complete(one.contributors(bitmap))
    assert one.contributors(one.bitmap(addresses[::7])) == frozenset(addresses[::7])
    extreme = np.array([1.0, -1.0, 0.0]) * SECURE_AGGREGATION_TERM_LIMIT * (1 - 1e-9)
    total = from_fixed(np.sum([to_fixed(extreme)] * peers, axis=0, dtype=np.uint64))
    np.testing.assert_allclose(total, peers * extreme, rtol=1e-12)
