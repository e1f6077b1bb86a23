"""The network sum (``--sum-over network``) in-process: peers in threads, frames through an in-memory hub, no sockets.

Every round one secure sum of all peers goes up the roster's spanning tree and back down; with every peer there,
each peer averages the whole network, as the simulator does on the complete graph.
"""

from __future__ import annotations

import logging
import re
import time

import numpy as np
import pytest

from crc.core.errors import CRCError
from crc.nodes.keys import new_key_pair
from crc.nodes.network_sum import NetworkSum
from crc.nodes.peer import Peer
from crc.nodes.roster import roster_of
from crc.nodes.secure_aggregation import to_fixed
from crc.nodes.settings import PeerSettings, SecureAggregationKeys
from crc.nodes.wire import Expectation, Rejected, decode, encode_sum_frame
from support.network_sum import (
    ADDRESS,
    CHAIN,
    CHAIN_ROOT,
    RELAY,
    ROUNDS,
    RUN,
    STAR,
    TIMEOUT_S,
    complete_graph_run,
    network_data,
    roster_for,
    run_peers,
    run_with_a_restart,
)

ROUND_LINE = re.compile(r"round \d+: ((no )?network sum[^,]*)")


def round_lines(caplog) -> list[str]:
    """What each peer's per-round log line says it heard, in the order logged."""
    matches = (ROUND_LINE.match(record.getMessage()) for record in caplog.records if record.name == "crc.node")
    return [match.group(1) for match in matches if match]


@pytest.fixture(scope="module")
def data():
    return network_data()


@pytest.mark.parametrize("graph", [CHAIN, STAR], ids=["chain", "star"])
def test_every_peer_averages_the_whole_network_as_on_the_complete_graph(data, graph, caplog):
    with caplog.at_level(logging.INFO, logger="crc.node"):
        peers = run_peers(data, graph)
    assert round_lines(caplog) == [f"network sum of {len(ADDRESS)}/{len(ADDRESS)} peers"] * ROUNDS * len(peers)
    expected = complete_graph_run(data)
    for v, peer in peers.items():
        assert peer.round == ROUNDS and peer.metrics.unmask_fallbacks == 0 and not peer.trained_alone, v
        assert not any(peer.metrics.rejected.values()), (v, peer.metrics.rejected)
        np.testing.assert_allclose(peer.stats, expected[v], rtol=1e-5, atol=1e-5 * np.abs(expected[v]).max())


def test_with_a_peer_missing_no_round_releases_anything_and_waits_stay_bounded(data, caplog):
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="crc.node"):
        peers = run_peers(data, CHAIN, absent={4}, down_after=2)
    took = time.monotonic() - started
    # a failed round's line says so, not "network sum of 4/5 peers" as if four peers' sum were averaged
    assert set(round_lines(caplog)) == {f"no network sum released (4/{len(ADDRESS)} peers' words)"}
    for v, peer in peers.items():
        assert peer.round == ROUNDS and peer.metrics.unmask_fallbacks == ROUNDS and peer.trained_alone, v
    assert peers[3].metrics.missing[ADDRESS[4]] == ROUNDS
    # every peer names the missing one: each failed total it took lacked that peer's words
    assert all(peer.metrics.absent_from_sums == {ADDRESS[4]: ROUNDS} for peer in peers.values())
    # each peer waits at most its subtree's height, then the tree's height plus one timeout, for two rounds; then the
    # silent leaf is waited for one timeout a round and the failed rounds pass down at once
    height = peers[3].network.position.tree_height
    assert took < 2 * (height + height + 1) * TIMEOUT_S + 5, took


def test_a_peer_given_another_roster_is_rejected_and_nothing_is_released(data):
    def other_roster(v, roster, pairs):
        if v != 2:
            return roster
        return roster_of({"peers": dict(roster.keys), "edges": [list(e) for e in roster.edges] + [[ADDRESS[0], ADDRESS[4]]]})

    peers = run_peers(data, CHAIN, rounds=2, rosters=other_roster)
    assert peers[1].metrics.rejected["roster"] > 0 or peers[3].metrics.rejected["roster"] > 0
    assert all(peer.metrics.unmask_fallbacks == 2 for peer in peers.values())


def test_masks_cancel_only_in_the_sum_of_every_peer(data):
    model = data[0]
    pairs = [new_key_pair() for _ in ADDRESS]
    roster = roster_for(CHAIN, pairs)
    sums = [NetworkSum(ADDRESS[v], RUN, roster, pairs[v].secret) for v in range(len(ADDRESS))]
    stats = np.random.default_rng(1).normal(size=(len(ADDRESS), model.size))
    words = [s.words(stats[v], 3) for v, s in enumerate(sums)]
    np.testing.assert_array_equal(np.sum(words, axis=0, dtype=np.uint64), np.sum([to_fixed(x) for x in stats], axis=0,
                                                                                   dtype=np.uint64))
    partial = np.sum(words[:4], axis=0, dtype=np.uint64)
    assert not np.any(partial == np.sum([to_fixed(x) for x in stats[:4]], axis=0, dtype=np.uint64))
    assert not np.any(sums[0].words(stats[0], 4) == words[0])  # fresh masks every round


def test_a_sum_frame_from_a_peer_in_the_wrong_role_is_rejected(data):
    model, ess = data[0], data[4]
    pairs = [new_key_pair() for _ in ADDRESS]
    roster = roster_for(CHAIN, pairs)
    relay = NetworkSum(ADDRESS[RELAY], RUN, roster, pairs[RELAY].secret)  # parent: the root; child: peer 0
    expect = Expectation(run=RUN, schema_id=model.schema_id, ess=ess, size=model.size, model=model,
                         neighbours=frozenset({ADDRESS[CHAIN_ROOT], ADDRESS[0]}), secure_aggregation=True, roster=roster.digest,
                         roster_size=len(ADDRESS))

    def frame(kind, sender, contributors, fill=0):
        return decode(encode_sum_frame(kind, run=RUN, sender=ADDRESS[sender], round_=0, roster=roster.digest,
                                       schema_id=model.schema_id, ess=ess, words=np.full(model.size, fill, np.uint64),
                                       contributors=relay.bitmap([ADDRESS[c] for c in contributors])), expect)

    for bad, cause in [(frame("total", 0, [0]), "role"), (frame("partial", CHAIN_ROOT, [CHAIN_ROOT]), "role"),
                       (frame("partial", 0, [0, RELAY]), "role")]:
        with pytest.raises(Rejected) as caught:
            relay.take(bad, 0)
        assert caught.value.cause == cause
    relay.take(frame("partial", 0, [0]), 0)
    relay.take(frame("partial", 0, [0]), 0)  # a copy: dropped
    with pytest.raises(Rejected, match="second, different"):
        relay.take(frame("partial", 0, [0], fill=1), 0)


def test_with_distributed_noise_the_one_total_carries_every_peers_share_once(data):
    """One round from the uniform start: each peer's aggregate is the network mean plus the sum of the five
    shares, once, divided by n (the class counts centred on the public total); every peer holds the same."""
    from crc.core.acceleration import Acceleration
    from crc.core.distributed_noise import noise_in_statistics
    from crc.protocol.accountant import plan_shares

    model, ess = data[0], data[4]
    privacy = plan_shares(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=1, sums_per_round=1, sizes=[len(ADDRESS)],
                          colluders=0)
    peers = run_peers(data, CHAIN, rounds=1, privacy=privacy, acceleration=Acceleration(classifier="aggregate"))
    aggregates = [peer.aggregated for peer in peers.values()]
    for aggregate in aggregates[1:]:
        np.testing.assert_array_equal(aggregate, aggregates[0])
    shares = sum(peer.release.shares(0)[peer.settings.bind] for peer in peers.values())
    expected = model.uniform(ess) + noise_in_statistics(model, shares) / len(ADDRESS)
    np.testing.assert_allclose(aggregates[0], expected, atol=2.0**-20)
    assert np.abs(aggregates[0] - model.uniform(ess)).max() > 100 * 2.0**-20  # the noise is there


@pytest.mark.parametrize("when", ["at-round-start", "after-its-partial"])
def test_a_peer_stopped_and_resumed_mid_run_costs_no_release(data, tmp_path, when):
    """A relay of the chain stops in round 3 (before its words go up, or after) and is started again from its
    checkpoint at once; what its last process had received is lost with it. Its neighbours send again what they sent
    that process, and every round still releases the whole network's sum; the words it sends again are the same bytes."""
    peers, partials = run_with_a_restart(data, tmp_path, when=when, at_round=3)
    assert peers[RELAY].resumed
    expected = complete_graph_run(data)
    for v, peer in peers.items():
        assert peer.round == ROUNDS and peer.metrics.unmask_fallbacks == 0, v
        np.testing.assert_allclose(peer.stats, expected[v], rtol=1e-5, atol=1e-5 * np.abs(expected[v]).max())
    assert peers[RELAY - 1].metrics.frames_resent + peers[CHAIN_ROOT].metrics.frames_resent >= 1
    assert all(len(set(sent)) == 1 for sent in partials.values())
    assert when == "at-round-start" or len(partials[3]) == 2


def test_a_checkpoint_of_another_roster_or_scope_is_refused(data, tmp_path):
    model, phi, y, parts, ess = data
    pairs = [new_key_pair() for _ in CHAIN]
    roster = roster_for(CHAIN, pairs)

    def make(network):
        return Peer(model, phi[parts[1]], y[parts[1]], ess=ess, settings=PeerSettings(
            bind=ADDRESS[1], peers=(ADDRESS[0], ADDRESS[2]), run=RUN, network=network,
            secure_aggregation=SecureAggregationKeys(pairs[1].secret, {}), checkpoint_dir=str(tmp_path)))

    first = make(roster)
    first.checkpoints.save(first.state, first.metrics)
    other = roster_of({"peers": {**roster.keys, ADDRESS[4]: new_key_pair().public},
                       "edges": [list(e) for e in roster.edges]})
    for network in (other, None):
        with pytest.raises(CRCError, match="checkpoint"):
            make(network)
    assert make(roster).resumed
