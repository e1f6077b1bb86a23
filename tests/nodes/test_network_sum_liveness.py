"""The network sum (``--sum-over network``) with peers that die or deviate: every peer finishes its rounds within the
waits' bounds (children up to the subtree's height in timeouts, the total up to the tree's height plus one; a neighbour
silent ``down_after`` rounds in a row not waited for), and a peer that joins far behind catches up."""

from __future__ import annotations

import threading
import time

import msgpack
import pytest

from crc.nodes.keys import new_key_pair
from crc.nodes.peer import Peer
from crc.nodes.settings import PeerSettings, SecureAggregationKeys
from crc.nodes.wire import encode_waiting
from support.network_sum import ADDRESS, CHAIN, CHAIN_ROOT, RELAY, RUN, STAR, Hub, network_data, roster_for, run_peers, run_with_a_restart

TIMEOUT_S = 0.3
ROUNDS = 6
DOWN_AFTER = 3
HEIGHT = 2  # the chain's tree, from its centre


@pytest.fixture(scope="module")
def data():
    return network_data()


def bound_s(rounds_waited: int) -> float:
    """Longest a run can take when its first ``rounds_waited`` rounds wait the most: a peer's children up to the
    subtree's height (at most the tree's less one), its total up to the tree's height plus one; then one timeout a
    round for a parent that is down; plus the first round's start-up and two seconds for the rounds' work."""
    return (rounds_waited * (HEIGHT - 1 + HEIGHT + 1) + (ROUNDS - rounds_waited)) * TIMEOUT_S + TIMEOUT_S + 2.0


def finished_within(data, bound: float, **run) -> dict:
    started = time.monotonic()
    peers = run_peers(data, CHAIN, rounds=ROUNDS, timeout_s=TIMEOUT_S, down_after=DOWN_AFTER, **run)
    took = time.monotonic() - started
    assert all(peer.round == ROUNDS for peer in peers.values())
    assert took < bound, took
    return peers


@pytest.mark.parametrize("dead", [CHAIN_ROOT, RELAY], ids=["root", "relay"])
def test_with_the_root_or_a_relay_dead_every_peer_finishes_in_bounded_time(data, dead):
    peers = finished_within(data, bound_s(DOWN_AFTER), absent={dead})
    assert all(peer.metrics.unmask_fallbacks == ROUNDS for peer in peers.values())


class NoticesOnly(Peer):
    """A peer that sends waiting notices in place of its sums."""

    def _send_to(self, transport, address, frame):
        if msgpack.unpackb(frame)["type"] in ("partial", "total"):
            frame = encode_waiting(run=self.settings.run, sender=self.settings.bind, round_=self.round)
        return super()._send_to(transport, address, frame)


class Withholding(Peer):
    """A relay that never passes the total down."""

    def _send_to(self, transport, address, frame):
        return msgpack.unpackb(frame)["type"] == "total" or super()._send_to(transport, address, frame)


class StaleTotals(Peer):
    """A relay that passes down the total of the round before in place of the round's: its children never find it
    silent, so they wait the longest every round."""

    def _send_to(self, transport, address, frame):
        body = msgpack.unpackb(frame)
        if body["type"] == "total":
            frame = msgpack.packb({**body, "round": max(0, body["round"] - 1)}, use_bin_type=True)
        return super()._send_to(transport, address, frame)


@pytest.mark.parametrize("kind, rounds_waited", [(NoticesOnly, DOWN_AFTER), (Withholding, DOWN_AFTER),
                                                 (StaleTotals, ROUNDS)], ids=["notices only", "withholding", "stale"])
def test_a_relay_that_deviates_delays_every_peer_at_most_the_waits_bounds(data, kind, rounds_waited):
    peers = finished_within(data, bound_s(rounds_waited), kinds={RELAY: kind})
    if kind is not StaleTotals:  # cut off from the root's totals, the peer below never releases
        assert peers[RELAY - 1].metrics.unmask_fallbacks == ROUNDS


def test_a_peer_that_joins_far_behind_catches_up_and_the_sums_release_again(data):
    """The leaf joins once the others are more than a window of rounds on (what was sent to it meanwhile is lost):
    it skips ahead to its parent's latest total as soon as one is held (the total of its own round will not come),
    takes it (the next masks need its seal), and the network's sums release again within a round or two."""
    model, phi, y, parts, ess = data
    rounds, pairs = 400, [new_key_pair() for _ in CHAIN]
    roster = roster_for(CHAIN, pairs)
    joined = threading.Event()
    hub = Hub({ADDRESS[v]: pairs[v].public for v in CHAIN}, lambda s, r, f: r == ADDRESS[4] and not joined.is_set())
    peers = {v: Peer(model, phi[parts[v]], y[parts[v]], ess=ess, settings=PeerSettings(
        bind=ADDRESS[v], peers=tuple(ADDRESS[u] for u in sorted(CHAIN.neighbors(v))), rounds=rounds, timeout_s=0.1,
        first_round_timeout_s=0.1, run=RUN, network=roster, secure_aggregation=SecureAggregationKeys(pairs[v].secret, {}),
        final_linger_ms=0)) for v in CHAIN}
    threads = {v: threading.Thread(target=peer.run, args=(hub.transport(ADDRESS[v], peer.settings.peers),))
               for v, peer in peers.items()}
    for v in range(4):
        threads[v].start()
    deadline = time.monotonic() + 60
    while peers[0].round < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    behind = peers[0].round
    assert 40 <= behind < rounds - 100
    joined.set()
    threads[4].start()
    for thread in threads.values():
        thread.join(timeout=120)
    assert all(peer.round == rounds for peer in peers.values())
    assert peers[4].metrics.rounds_skipped > 0
    released = rounds - peers[0].metrics.unmask_fallbacks
    assert released >= rounds - behind - 10, (behind, released)  # measured: 1 or 2 rounds lost after joining


def test_a_peer_that_starts_late_within_the_start_up_costs_no_release(data):
    """A leaf of the star starts 1.5 s after the others, within the first round's 2 s: the other leaves, whose words
    went up at once, wait for the total from the start-up's end too (not racing through the run alone, every round
    releasing nothing)."""
    peers = run_peers(data, STAR, rounds=ROUNDS, timeout_s=0.2, first_round_timeout_s=2.0, late={4: 1.5})
    assert all(peer.round == ROUNDS and peer.metrics.unmask_fallbacks == 0 for peer in peers.values())


@pytest.mark.parametrize("graph, victim", [(STAR, 0), (CHAIN, CHAIN_ROOT), (CHAIN, RELAY)],
                         ids=["star root", "chain root", "relay"])
def test_a_root_or_relay_restarted_after_the_others_went_on_catches_up_with_them(data, tmp_path, graph, victim):
    """The root stops in round 3 and comes back from its checkpoint after 1.5 s, timeout 0.2 s: its neighbours, which
    stopped waiting for it after --down-after rounds and went on, wait for it again once it says it resumed, and it
    goes to the round all its children have reached (before, it stayed behind: 37 of 40 rounds released nothing on the
    star). A relay of the chain down as long: the peers on either side wait for it one timeout a round,
    rather than racing through the run without it (before: 37 of 40 lost). With --down-after 1, measured: 8 lost in
    each case, the rounds it was away."""
    rounds, timeout_s, dead_s = 40, 0.2, 1.5
    peers, _ = run_with_a_restart(data, tmp_path, when="at-round-start", at_round=3, graph=graph, victim=victim,
                                  rounds=rounds, timeout_s=timeout_s, dead_s=dead_s, down_after=1)
    assert all(peer.round == rounds for peer in peers.values())
    lost = max(peer.metrics.unmask_fallbacks for peer in peers.values())
    assert lost <= dead_s / timeout_s + 3, lost  # the rounds it was away (a timeout each, at most), and the catch-up's
