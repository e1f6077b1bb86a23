"""The network sum (``--sum-over network``) against peers that deviate: each attack run in-process, each test asserting
that it fails (nothing learnt beyond the total of all peers, nothing crashed, every wait bounded)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from crc.nodes.keys import new_key_pair
from crc.nodes.network_sum import NO_TOTAL, NetworkSum
from crc.nodes.peer import Peer
from crc.nodes.secure_aggregation import derive, from_fixed, mask, shared_secret, to_fixed
from support.network_sum import ADDRESS, CHAIN, RELAY, ROUNDS, RUN, STAR, network_data, roster_for, run_peers, run_with_a_restart


@pytest.fixture(scope="module")
def data():
    return network_data()


class Recording(Peer):
    """A peer that keeps its statistics of each round (those its words of the round carry)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history: dict[int, np.ndarray] = {}

    def step(self, transport):
        self.history[self.round] = self.stats.copy()
        return super().step(transport)


class InconsistentRoot(Recording):
    """A root that sends its first child (``ADDRESS[1]``) the total of round 1 again in round 2 (``fail``: a total that
    released nothing), the others the real one, then everyone round 2's total again in round 3: the sums of rounds 3
    and 4 then differ by that child's response to two aggregates, a function of its data alone (a model-inconsistency
    attack, Pasquini et al. 2022)."""

    fail = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.totals: dict[int, bytes] = {}

    def _send_to(self, transport, address, frame):
        body = msgpack.unpackb(frame)
        if body["type"] == "total" and body["data"]:
            round_ = body["round"]
            self.totals.setdefault(round_, body["data"])
            if (round_, address) == (2, ADDRESS[1]):
                forged = None if self.fail else np.frombuffer(self.totals[1], dtype="<u8")
                frame = self._sum_frame("total", round_, forged, body["contributors"])
            if round_ == 3:
                frame = self._sum_frame("total", round_, np.frombuffer(self.totals[2], dtype="<u8"), body["contributors"])
        return super()._send_to(transport, address, frame)


class FailingOneChild(InconsistentRoot):
    fail = True


@pytest.mark.parametrize("root", [InconsistentRoot, FailingOneChild], ids=["an old total", "a failed total"])
def test_a_root_that_sends_one_child_another_total_learns_nothing_of_that_child(data, root):
    peers = run_peers(data, STAR, kinds={0: root, 1: Recording})
    root, target = peers[0], peers[1]
    sums = {r: np.frombuffer(root.totals[r], dtype="<u8") - to_fixed(root.history[r]) for r in (3, 4)}
    estimate = from_fixed(sums[3] - sums[4])  # what the root takes for the target's statistics of round 3 less 4
    truth = target.history[3] - target.history[4]
    assert np.abs(truth).max() > 1e-3  # there is something to learn
    assert not np.allclose(estimate, truth, atol=1e-3), "the root isolated one peer's response"
    for v in (1, 2, 3, 4):  # the sum of round 3 did not unmask: every honest peer rejected it and kept its own
        assert peers[v].metrics.rejected["stats-ess"] >= 1 and peers[v].metrics.unmask_fallbacks >= 1, v


def pair_mask(pairs, roster, inside: int, outside: int, round_: int, size: int) -> np.ndarray:
    """The mask of the pair (``inside``, ``outside``) in ``inside``'s words of ``round_`` (the first round: no total
    before), signed as it enters them: what ``outside`` can compute and hand a colluder."""
    secret = shared_secret(pairs[outside].secret, pairs[inside].public)
    words = mask(derive(secret, "network-sum", RUN, roster.digest, round_, NO_TOTAL.hex()), size)
    return words if ADDRESS[inside] < ADDRESS[outside] else np.zeros_like(words) - words


@pytest.mark.parametrize("subtree, colluders, learns", [
    ({4}, {3}, False), ({4}, {3, 0, 1}, False), ({4}, {3, 0, 1, 2}, True),
    ({3, 4}, {2}, False), ({3, 4}, {2, 0}, False), ({3, 4}, {2, 0, 1}, True)],
    ids=["leaf, its parent", "leaf, parent and two", "leaf, everyone else", "subtree, its parent",
         "subtree, parent and one", "subtree, everyone else"])
def test_a_parent_that_keeps_a_partial_learns_its_subtree_only_with_every_peer_outside(data, subtree, colluders, learns):
    """The parent keeps its child's partial sum (the chain: 4's to 3, or 3's, holding 4's, to 2) and removes every
    mask it and its colluders share with the subtree; only with every peer outside the subtree colluding (who then
    hold the total less their own) does the subtree's sum come out."""
    model = data[0]
    pairs = [new_key_pair() for _ in ADDRESS]
    roster = roster_for(CHAIN, pairs)
    stats = np.random.default_rng(2).normal(size=(len(ADDRESS), model.size))
    partial = sum((NetworkSum(ADDRESS[v], RUN, roster, pairs[v].secret).words(stats[v], 0) for v in subtree),
                  np.zeros(model.size, np.uint64))
    for inside in subtree:
        for outside in colluders:
            partial = partial - pair_mask(pairs, roster, inside, outside, 0, model.size)
    truth = stats[sorted(subtree)].sum(axis=0)
    assert np.allclose(from_fixed(partial), truth, atol=1e-5) == learns


@pytest.mark.parametrize("at_round", [0, 3])
def test_a_peer_killed_after_its_words_sends_them_again_as_the_same_bytes(data, tmp_path, at_round):
    """Under distributed noise a relay of the chain is killed right after its partial sum of a round went up
    (in round 0 too, before any round's checkpoint) and restarted: it resumes from its checkpoint and sends the same
    bytes again (same statistics, noise share, seal and masks), never a second word of the round that a parent who
    kept both could subtract; the run loses no release."""
    from crc.protocol.accountant import plan_shares

    privacy = plan_shares(data[0], epsilon=4.0, delta=1e-5, clip=1.0, rounds=ROUNDS, sums_per_round=1,
                          sizes=[len(ADDRESS)], colluders=0)
    peers, partials = run_with_a_restart(data, tmp_path, when="after-its-partial", at_round=at_round, privacy=privacy)
    assert peers[RELAY].resumed and len(partials[at_round]) == 2
    assert all(len(set(sent)) == 1 for sent in partials.values())
    assert all(peer.metrics.unmask_fallbacks == 0 for peer in peers.values())
