"""Secure aggregation: masks cancel, one neighbour's words look uniform, the unmasked sum is the plain sum, dropouts
at each phase are recovered, requests that would reveal more than a sum are refused, and real peers equal the
simulator."""

from __future__ import annotations

import contextlib
import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from crc.cli.main import main
from crc.core.model_file import load_model
from crc.nodes.keys import new_key_pair
from crc.nodes.secure_aggregation import (
    SCALE_BITS,
    Contributor,
    Deviation,
    Neighbourhood,
    Refused,
    from_fixed,
    mask,
    shamir_join,
    shamir_split,
    threshold_for,
    to_fixed,
    unmask,
    unseal,
)
from crc.nodes.wire import NONCE_BYTES, SHARE_BYTES
from crc.protocol import SimulationConfig
from crc.protocol.neighbourhoods import fewest_survivors
from crc.protocol.repeat import prepare_repeat
from crc.protocol.simulator import make_engine
from crc.tables.datasets import load_bundled
from crc.topologies import network_factory

RECIPIENT = "tcp://127.0.0.1:7000"
CONTRIBUTORS = [f"tcp://127.0.0.1:{7001 + i}" for i in range(4)]
KEYS = {address: new_key_pair() for address in [RECIPIENT, *CONTRIBUTORS]}
SIZE = 2000


def neighbourhood(contributors=CONTRIBUTORS, run="run"):
    hood = Neighbourhood(run, RECIPIENT, contributors)
    peers = {w: Contributor(w, hood, KEYS[w].secret, {o: KEYS[o].public for o in contributors if o != w})
             for w in contributors}
    return hood, peers


def send(peers, round_=0, seed=0):
    """Every contributor's statistics (structured, far from uniform) and what it sends: words and sealed shares."""
    rng = np.random.default_rng(seed)
    stats = {w: np.round(rng.normal(size=SIZE) * 50, 1) for w in peers}
    return stats, {w: peers[w].masked(stats[w], round_) for w in peers}


def agree(peers, sent, survivors, round_=0):
    """Every survivor's vouches {w: {o: its MAC for o}} for a request naming ``survivors``."""
    return {w: peers[w].agree(round_, survivors, {o: sent[o][1][w] for o in survivors if o != w}) for w in survivors}


def ask(peers, sent, survivors, round_=0, answering=None):
    """The reveals of the survivors that answer (all of them by default) to a request naming ``survivors``, once all
    of them agreed and the recipient relayed their vouches."""
    answering = survivors if answering is None else answering
    vouches = agree(peers, sent, survivors, round_)
    return {w: peers[w].reveal(round_, {o: vouches[o][w] for o in survivors if o != w}) for w in answering}


def test_fixed_point_round_trips_within_half_a_unit_and_refuses_huge_values():
    x = np.array([0.0, 1.5, -2.25, 1e9, -1e9, 3e-7])
    np.testing.assert_allclose(from_fixed(to_fixed(x)), x, rtol=0, atol=2.0 ** -(SCALE_BITS + 1))
    with pytest.raises(ValueError, match="beyond"):
        to_fixed(np.array([2.0**35]))


def test_pairwise_and_self_masks_cancel_exactly():
    hood, peers = neighbourhood()
    stats, sent = send(peers)
    total = sum((sent[w][0] for w in peers), np.zeros(SIZE, dtype=np.uint64))
    reveals = ask(peers, sent, CONTRIBUTORS)
    for w in peers:
        total = total - mask(reveals[w]["seed"], SIZE)
    np.testing.assert_array_equal(total, sum((to_fixed(stats[w]) for w in peers), np.zeros(SIZE, dtype=np.uint64)))


def test_what_one_neighbour_sends_looks_uniform_and_the_sum_is_the_plain_sum():
    hood, peers = neighbourhood()
    stats, sent = send(peers)
    for w in peers:  # every byte value equally likely (chi-square over 256 bins), unlike the fixed-point statistics
        assert chisquare(np.bincount(sent[w][0].view(np.uint8), minlength=256)).pvalue > 1e-4
        assert chisquare(np.bincount(to_fixed(stats[w]).view(np.uint8), minlength=256)).pvalue < 1e-10
    total = unmask(hood, {w: sent[w][0] for w in peers}, ask(peers, sent, CONTRIBUTORS))
    plain = sum(stats.values())
    assert np.max(np.abs(total - plain)) <= len(peers) * 2.0 ** -(SCALE_BITS + 1)
    assert np.max(np.abs(total - plain)) <= 1e-6 * np.max(np.abs(plain))


def test_noise_shares_added_before_masking_come_out_in_the_sum_exactly():
    """Distributed noise: each contributor adds its integer share to its fixed-point words; the unmasked sum is the
    plain sum plus the shares' sum, to fixed-point rounding."""
    hood, peers = neighbourhood()
    rng = np.random.default_rng(5)
    stats = {w: np.round(rng.normal(size=SIZE) * 50, 1) for w in peers}
    shares = {w: rng.integers(-2**40, 2**40, size=SIZE) for w in peers}
    sent = {w: peers[w].masked(stats[w], 0, shares[w]) for w in peers}
    total = unmask(hood, {w: sent[w][0] for w in peers}, ask(peers, sent, CONTRIBUTORS))
    expected = sum(stats.values()) + sum(shares.values()) / 2.0**SCALE_BITS
    assert np.max(np.abs(total - expected)) <= len(peers) * 2.0 ** -(SCALE_BITS + 1)


@pytest.mark.parametrize("dropped", CONTRIBUTORS)
def test_a_contributor_lost_before_its_masked_statistics_arrive(dropped):
    hood, peers = neighbourhood()
    stats, sent = send(peers, round_=3)
    survivors = [w for w in CONTRIBUTORS if w != dropped]
    total = unmask(hood, {w: sent[w][0] for w in survivors}, ask(peers, sent, survivors, round_=3))
    np.testing.assert_allclose(total, sum(stats[w] for w in survivors), atol=1e-5)


@pytest.mark.parametrize("silent", CONTRIBUTORS)
def test_a_contributor_lost_after_its_masked_statistics_arrived(silent):
    """It never answers the request (lost in the unmasking phase): its self-mask is rebuilt from the others' shares."""
    hood, peers = neighbourhood()
    stats, sent = send(peers, round_=1)
    answering = [w for w in CONTRIBUTORS if w != silent]
    total = unmask(hood, {w: sent[w][0] for w in CONTRIBUTORS}, ask(peers, sent, CONTRIBUTORS, round_=1, answering=answering))
    np.testing.assert_allclose(total, sum(stats.values()), atol=1e-5)


def test_one_contributor_lost_in_each_phase_is_recovered_from_shares():
    """One is lost before its words arrive, another after: the second's self-mask seed and its pairwise seed with
    the first are rebuilt from the remaining answers' shares (threshold 2 of its 3 holders)."""
    hood, peers = neighbourhood()
    stats, sent = send(peers)
    survivors = CONTRIBUTORS[1:]
    reveals = ask(peers, sent, survivors, answering=survivors[1:])
    total = unmask(hood, {w: sent[w][0] for w in survivors}, reveals)
    np.testing.assert_allclose(total, sum(stats[w] for w in survivors), atol=1e-5)


def test_too_few_answers_to_rebuild_a_seed_unmask_nothing():
    hood, peers = neighbourhood()
    _, sent = send(peers)
    survivors = CONTRIBUTORS[1:]
    reveals = ask(peers, sent, survivors, answering=survivors[2:])  # one lost before, two after: 1 share of 2 needed
    assert unmask(hood, {w: sent[w][0] for w in survivors}, reveals) is None


def test_fewer_than_two_arrivals_unmask_nothing():
    hood, peers = neighbourhood()
    _, sent = send(peers)
    assert unmask(hood, {CONTRIBUTORS[0]: sent[CONTRIBUTORS[0]][0]}, {}) is None


def test_a_reveal_that_would_unmask_a_message_that_arrived_is_refused():
    """A recipient that got everyone's words asks once with w among the survivors (to get w's self-mask shares) and
    again with w left out (to get the pairwise seeds that strip w's pairwise masks): the second request is refused."""
    hood, peers = neighbourhood()
    _, sent = send(peers)
    ask(peers, sent, CONTRIBUTORS)
    without_first = CONTRIBUTORS[1:]
    for w in without_first:
        with pytest.raises(Refused, match="differs"):
            peers[w].agree(0, without_first, {o: sent[o][1][w] for o in without_first if o != w})


@pytest.mark.parametrize("survivors, message", [
    (CONTRIBUTORS[1:], "leaves this peer out"),
    (CONTRIBUTORS[:1], "fewer than"),
    ([CONTRIBUTORS[0], RECIPIENT], "outside the neighbourhood"),  # the recipient names itself
    ([*CONTRIBUTORS[:2], "tcp://127.0.0.1:9999"], "outside the neighbourhood"),
    ([CONTRIBUTORS[0], CONTRIBUTORS[0]], "twice"),
])
def test_requests_that_reveal_more_than_a_sum_are_refused(survivors, message):
    _, peers = neighbourhood()
    send(peers)
    with pytest.raises(Refused, match=message):
        peers[CONTRIBUTORS[0]].agree(0, survivors, {})


def test_a_tampered_share_is_refused():
    _, peers = neighbourhood()
    _, sent = send(peers)
    me, other = CONTRIBUTORS[:2]
    sealed = bytearray(sent[other][1][me])
    sealed[0] ^= 1
    with pytest.raises(Refused, match="does not decrypt"):
        peers[me].agree(0, CONTRIBUTORS, {**{o: sent[o][1][me] for o in CONTRIBUTORS if o != me}, other: bytes(sealed)})


def test_a_set_shown_differently_to_two_members_gets_no_reveal_from_either_side_that_did_not_see_it():
    """The inconsistent-request attack on three members a, b, c: {a, b} to a and b, {a, c} to c. Each agrees to
    what it saw; c's confirmation cannot carry a vouch of a for {a, c} (a vouched for {a, b}), so c reveals nothing:
    neither with a's vouch for {a, b} relayed, nor without it, nor with a vouch made up."""
    hood, peers = neighbourhood(CONTRIBUTORS[:3])
    a, b, c = CONTRIBUTORS[:3]
    _, sent = send(peers)
    to_ab = agree(peers, sent, [a, b])
    to_ac = {c: peers[c].agree(0, [a, c], {a: sent[a][1][c]})}
    for relayed, message in [({a: to_ab[a][b]}, "did not vouch"), ({}, "withheld"), ({a: bytes(32)}, "did not vouch")]:
        with pytest.raises(Deviation, match=message):
            peers[c].reveal(0, relayed)
    assert to_ac[c].keys() == {a}
    peers[a].reveal(0, {b: to_ab[b][a]})  # the set a and b both saw: their sum, as it should be


def test_the_split_view_attack_unmasks_no_two_disjoint_sums():
    """Bonawitz et al.'s split view on four members: the recipient asks a and b for {a, b} and c and d for {c, d}.
    Each set is consistent (its members vouch for each other), so before request sets had to be a majority of the
    neighbourhood both were answered and the recipient unmasked s_a + s_b and s_c + s_d, two sums instead of one
    (with one colluder in each pair, two peers' statistics alone). Two majorities share a member, who commits to one."""
    hood, peers = neighbourhood()
    a, b, c, d = CONTRIBUTORS
    _, sent = send(peers)
    unmasked = []
    for pair in ([a, b], [c, d]):
        try:
            unmasked.append(unmask(hood, {w: sent[w][0] for w in pair}, ask(peers, sent, pair)))
        except Refused as refusal:
            assert "fewer than" in str(refusal)
    assert unmasked == []
    reveals = ask(peers, sent, [a, b, c])  # a majority is answered, as a dropout before the words arrived needs
    assert set(reveals) == {a, b, c}


@pytest.mark.parametrize("dropouts", [0, 1])
def test_with_distributed_noise_a_request_names_every_member_but_the_dropouts_the_noise_is_sized_for(dropouts):
    """Distributed noise: shares are sized so that those of all but t colluders and ``dropouts`` members add up to
    σ². A recipient that names fewer (claiming the others dropped) would unmask a sum with less noise than the
    accountant counts: with no dropout allowed for, three of four members' shares carry 3σ²/4, and with one colluder
    among the three 2σ²/3 (answered when dropouts were taken from ``--dp-colluders``). Such a request is refused."""
    hood = Neighbourhood("run", RECIPIENT, CONTRIBUTORS, dropouts=dropouts)
    for size in (2, 3, 4):
        peers = {w: Contributor(w, hood, KEYS[w].secret, {o: KEYS[o].public for o in CONTRIBUTORS if o != w})
                 for w in CONTRIBUTORS}
        _, sent = send(peers)
        named = CONTRIBUTORS[:size]
        if size >= 4 - dropouts:
            assert set(ask(peers, sent, named)) == set(named)
        else:
            with pytest.raises(Refused, match="fewer than"):
                agree(peers, sent, named)


def test_members_resumed_from_their_checkpoint_answer_no_second_set_for_the_round_they_mask_again():
    """A peer resumed from its checkpoint masks the round it resumes at again (fresh self-mask, the same pairwise
    seeds) and has forgotten the set it committed to. A recipient answered for {a, b, c} before a and b restarted
    (so holding c's self-mask seed) asked them for {a, b} after: their pairwise seeds with c stripped c's words to
    its statistics alone (measured to 4e-7). A resumed contributor answers no request for that round."""
    a, b, c = CONTRIBUTORS[:3]
    hood, peers = neighbourhood([a, b, c])
    stats, sent = send(peers, round_=4)
    assert set(ask(peers, sent, [a, b, c], round_=4)) == {a, b, c}
    restarted = {w: Contributor(w, hood, KEYS[w].secret, {o: KEYS[o].public for o in (a, b, c) if o != w}, resumed=4)
                 for w in (a, b, c)}
    resent = {w: restarted[w].masked(stats[w], 4) for w in (a, b, c)}
    for survivors in ([a, b], [a, b, c]):
        with pytest.raises(Refused, match="resumed at round 4"):
            agree(restarted, resent, survivors, round_=4)
    resent = {w: restarted[w].masked(stats[w], 5) for w in (a, b, c)}  # the rounds after it are answered
    assert set(ask(restarted, resent, [a, b], round_=5)) == {a, b}


def test_a_dropout_claimed_in_a_later_round_strips_no_mask_of_an_earlier_one():
    """A recipient answered for {a, b, c} in round 0 (so holding c's self-mask seed of round 0) claims c dropped in
    round 1 to get a's and b's pairwise seeds with c: those are derived per round, and c's round-0 words stripped
    with them stay uniform."""
    a, b, c = CONTRIBUTORS[:3]
    _, peers = neighbourhood([a, b, c])
    stats, first = send(peers, round_=0)
    before = ask(peers, first, [a, b, c], round_=0)
    _, second = send(peers, round_=1)
    after = ask(peers, second, [a, b], round_=1)
    words = first[c][0] - mask(before[c]["seed"], SIZE)
    for w in (a, b):
        pair = mask(after[w]["pairs"][c], SIZE)
        words = words + pair if w < c else words - pair
    assert np.median(np.abs(from_fixed(words) - stats[c])) > 1e9


def test_bundles_and_vouches_replayed_from_another_round_or_run_are_refused():
    """A recipient replaying b's share bundle for a of round 0 in round 1's request (a's shares of an old self-mask
    instead of the new one), or relaying the vouches of round 0, or of another run on the same keys, for round 1:
    the sealing and vouching keys are derived per run, recipient and round, so none opens or verifies."""
    _, peers = neighbourhood()
    a, b = CONTRIBUTORS[:2]
    _, old = send(peers, round_=0)
    _, new = send(peers, round_=1)
    with pytest.raises(Refused, match=f"share from {b} does not decrypt"):
        peers[a].agree(1, CONTRIBUTORS, {o: (old if o == b else new)[o][1][a] for o in CONTRIBUTORS if o != a})
    _, elsewhere = neighbourhood(run="another run")
    _, sent_elsewhere = send(elsewhere, round_=1)
    replayed = [agree(peers, old, CONTRIBUTORS, round_=0), agree(elsewhere, sent_elsewhere, CONTRIBUTORS, round_=1)]
    agree(peers, new, CONTRIBUTORS, round_=1)
    for vouches in replayed:
        with pytest.raises(Deviation, match="did not vouch"):
            peers[a].reveal(1, {o: vouches[o][a] for o in CONTRIBUTORS if o != a})


def test_a_member_sending_a_false_vouch_is_not_reported_as_the_recipients_deviation_alone():
    """A deviating member a agrees to the honest recipient's set but sends c a false vouch (or none): c refuses, as it
    must, and the deviation it reports names a as a possible source, since the recipient cannot check the vouches
    it relays and the MACs do not tell who deviated."""
    _, peers = neighbourhood(CONTRIBUTORS[:3])
    a, b, c = CONTRIBUTORS[:3]
    _, sent = send(peers)
    vouches = agree(peers, sent, [a, b, c])
    for false in ({a: bytes(32), b: vouches[b][c]}, {b: vouches[b][c]}):
        with pytest.raises(Deviation, match=f"or {a} (sent a false vouch|made none)"):
            peers[c].reveal(0, false)


def test_vouches_cover_the_membership_a_member_is_shown():
    """A recipient shows a a membership in which an identity it controls stands for the honest c; b knows the true
    one. b's vouch for the request set {a, b} is for another membership, so a refuses, and detects it. (A membership
    of another size is refused earlier: the bundles of shares do not fit it.)"""
    a, b, c = CONTRIBUTORS[:3]
    sybil = "tcp://127.0.0.1:7666"
    controlled = new_key_pair()
    _, honest = neighbourhood([a, b, c])
    shown = Neighbourhood("run", RECIPIENT, [a, b, sybil])
    fooled = Contributor(a, shown, KEYS[a].secret, {b: KEYS[b].public, sybil: controlled.public})
    stats = np.ones(SIZE)
    sent_a, sent_b = fooled.masked(stats, 0), honest[b].masked(stats, 0)
    fooled.agree(0, [a, b], {b: sent_b[1][a]})
    vouch_b = honest[b].agree(0, [a, b], {a: sent_a[1][b]})
    with pytest.raises(Deviation, match="did not vouch"):
        fooled.reveal(0, {b: vouch_b[a]})


def test_a_restarted_contributor_never_seals_under_a_key_and_nonce_used_before():
    """A resumed peer masks its last round again (a fresh Contributor, the same pair, recipient and round, hence the
    same sealing key): its bundles carry fresh random nonces, and each still opens for its holder."""
    _, first = neighbourhood()
    _, restarted = neighbourhood()
    me, holder = CONTRIBUTORS[:2]
    stats = np.ones(SIZE)
    before, after = first[me].masked(stats, 5)[1][holder], restarted[me].masked(stats, 5)[1][holder]
    assert before[:NONCE_BYTES] != after[:NONCE_BYTES] and set(before[:NONCE_BYTES] + after[:NONCE_BYTES]) != {0}
    key = first[holder]._share_key(me, 5, me, holder)
    assert len(unseal(key, before)) == len(unseal(key, after)) == SHARE_BYTES * len(CONTRIBUTORS)
    for broken in (before[:NONCE_BYTES + 15], bytes(NONCE_BYTES) + before[NONCE_BYTES:]):
        with pytest.raises(ValueError):
            unseal(key, broken)


@pytest.mark.parametrize("colluders", [0, 2])
def test_colluders_below_the_threshold_cannot_strip_a_members_words(colluders):
    """Members a and b of four collude with the recipient and pool the shares c sealed for them. With a threshold
    of two (a majority of c's three others: the rule without --colluders) they rebuild c's self-mask seed and its
    pairwise seed with d and, with their own pairwise seeds with c, strip c's words to c's statistics alone, with no
    request at all (under distributed noise: with c's share of the noise only). With --colluders 2 the threshold is
    three, and two shares rebuild neither."""
    hood = Neighbourhood("run", RECIPIENT, CONTRIBUTORS, colluders=colluders)
    peers = {w: Contributor(w, hood, KEYS[w].secret, {o: KEYS[o].public for o in CONTRIBUTORS if o != w})
             for w in CONTRIBUTORS}
    stats, sent = send(peers)
    a, b, c, d = CONTRIBUTORS

    def opened(holder):  # c's shares held by ``holder``: of its self-mask seed, then of its pairwise seeds (a, b, d)
        plain = unseal(peers[holder]._share_key(c, 0, c, holder), sent[c][1][holder])
        return [int.from_bytes(plain[i * SHARE_BYTES:(i + 1) * SHARE_BYTES], "big") for i in range(len(CONTRIBUTORS))]

    pooled = {hood.holder(c, holder): opened(holder) for holder in (a, b)}
    rebuilt = []
    for secret in (0, 3):
        try:
            rebuilt.append(shamir_join({x: shares[secret] for x, shares in pooled.items()}))
        except ValueError:  # no seed at all
            rebuilt.append(None)
    stripped = None
    if None not in rebuilt:
        stripped = sent[c][0] - mask(rebuilt[0], SIZE)
        for other, seed in ((a, peers[a]._pair_seed(c, 0)), (b, peers[b]._pair_seed(c, 0)), (d, rebuilt[1])):
            stripped = stripped - mask(seed, SIZE) if c < other else stripped + mask(seed, SIZE)
    recovered = stripped is not None and np.allclose(from_fixed(stripped), stats[c], rtol=0, atol=1e-5)
    assert hood.threshold == (2 if colluders == 0 else 3) and recovered is (colluders == 0)


@pytest.mark.parametrize("contributors, colluders, fewest", [(3, 0, 2), (4, 0, 3), (3, 1, 3), (4, 1, 3), (6, 1, 4),
                                                             (6, 2, 5), (5, 3, 5)])
def test_with_colluders_every_request_set_holds_two_honest_members_and_any_two_share_an_honest_one(
        contributors, colluders, fewest):
    """A colluder x among three (majority two) got {x, a} answered, a's statistics alone, and {x, b} besides; with
    --colluders t a set needs more than (n + t) / 2 and at least t + 2 members."""
    assert fewest_survivors(contributors, colluders=colluders) == fewest
    assert fewest - colluders >= 2 and 2 * fewest - contributors > colluders
    with pytest.raises(ValueError, match="at least 4"):
        Neighbourhood("run", RECIPIENT, CONTRIBUTORS[:3], colluders=2)


def test_a_colluder_among_three_gets_no_set_of_two_answered():
    a, b, c = CONTRIBUTORS[:3]
    hood = Neighbourhood("run", RECIPIENT, [a, b, c], colluders=1)
    peers = {w: Contributor(w, hood, KEYS[w].secret, {o: KEYS[o].public for o in (a, b, c) if o != w}) for w in (a, b, c)}
    _, sent = send(peers)
    for pair in ([a, b], [a, c]):
        with pytest.raises(Refused, match="fewer than"):
            agree(peers, sent, pair)
    assert set(ask(peers, sent, [a, b, c])) == {a, b, c}


@pytest.mark.parametrize("contributors", [2, 3, 5, 8])
def test_shamir_rebuilds_from_any_threshold_of_shares(contributors):
    secret = bytes(range(32))
    holders = contributors - 1
    threshold = threshold_for(contributors)
    shares = dict(enumerate(shamir_split(secret, holders, threshold), start=1))
    for subset in itertools.combinations(shares, threshold):
        assert shamir_join({x: shares[x] for x in subset}) == secret
    if threshold > 1:  # fewer shares give a random field element: almost surely no seed at all, never this one
        fewer = dict(list(shares.items())[:threshold - 1])
        try:
            rebuilt = shamir_join(fewer)
        except ValueError:
            rebuilt = None
        assert rebuilt != secret


def simulated(config: SimulationConfig) -> np.ndarray:
    rep = prepare_repeat(load_bundled(config.data), config, 0)
    engine, _ = make_engine(rep, config, network_factory(config.topology))
    return engine.run(config.rounds)


@pytest.mark.parametrize("topology, loss, colluders", [("ring", 0.0, 0), ("tree", 0.3, 0), ("regular:3", 0.3, 1)])
def test_real_peers_with_secure_aggregation_equal_the_simulator(tmp_path, topology, loss, colluders):
    """With --colluders 1 on regular:3 a lost message costs its recipient the round (every set names all three)."""
    settings = {"data": "twonorm", "nodes": 6, "local_size": 30, "rounds": 6, "topology": topology, "loss": loss,
                "test_size": 300, "secure_aggregation": True, "dp_colluders": colluders}
    arguments = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items() if k != "secure_aggregation"]
    result = CliRunner().invoke(main, ["launch", *arguments, "--secure-aggregation", "--no-rc-converged", "--json",
                                       "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    expected = simulated(SimulationConfig.from_settings(**settings))
    summary = json.loads(result.stdout)["secure_aggregation"]
    assert summary["reveals_refused"] == 0 and (summary["unmask_fallbacks"] > 0) == (loss > 0)
    assert summary["colluders"] == colluders and summary["too_few_for_colluders"] == 0  # the run's --colluders
    for index in range(settings["nodes"]):
        stats = load_model(tmp_path / f"model-{index}.json").stats
        assert np.max(np.abs(stats - expected[index])) <= 1e-6 * np.max(np.abs(expected[index]))


@pytest.mark.parametrize("offset, unmasked", [(0.0, True), (1e-3, False)])
def test_the_unmasked_sum_has_exactly_the_ess_or_is_refused(offset, unmasked):
    """Fixed point moves the class counts of a sum by rounding; the sum is scaled back to ESS x survivors exactly,
    unless its counts are further off than rounding explains (a contributor with another ESS): then nothing."""
    from crc.core.models import make_model
    from crc.nodes.secure_aggregation import SecureNeighbourhoods
    from crc.nodes.settings import SecureAggregationKeys
    from support.tables import mixed_columns, prepared

    schema, x, y = prepared(mixed_columns(90, seed=2))
    model = make_model("nb", schema)
    ess = 300.0
    stats = {w: model.fit_ml(model.features(x[i::3]), y[i::3]) for i, w in enumerate(CONTRIBUTORS[:3])}
    stats = {w: s * (ess / model.ess(s)) for w, s in stats.items()}
    stats[CONTRIBUTORS[0]] = stats[CONTRIBUTORS[0]] + offset * model.uniform(1.0)  # ESS + offset
    members = {w: KEYS[w].public for w in CONTRIBUTORS[:3]}
    own = SecureNeighbourhoods(RECIPIENT, "run", tuple(CONTRIBUTORS[:3]),
                               SecureAggregationKeys(KEYS[RECIPIENT].secret, {w: {**members, RECIPIENT: KEYS[RECIPIENT].public}
                                                                     for w in CONTRIBUTORS[:3]}))
    _, peers = neighbourhood(CONTRIBUTORS[:3])
    sent = {w: peers[w].masked(stats[w], 0) for w in peers}
    reveals = ask(peers, sent, CONTRIBUTORS[:3])

    class Answer:
        def __init__(self, r):
            self.seed, self.shares, self.pairs, self.pair_shares = r["seed"], r["shares"], r["pairs"], r["pair_shares"]

    total = own.unmask({w: sent[w][0] for w in peers}, {w: Answer(r) for w, r in reveals.items()}, model, ess)
    if unmasked:
        assert float(model.ess(total)) == pytest.approx(3 * ess, rel=1e-15)
        np.testing.assert_allclose(total, sum(stats.values()), rtol=0, atol=1e-5)
    else:
        assert total is None


def _secure_frames() -> list[bytes]:
    from crc.nodes.wire import encode_secure_aggregation

    _, peers = neighbourhood()
    _, sent = send(peers)
    w = CONTRIBUTORS[0]
    reveal = ask(peers, sent, CONTRIBUTORS[:3])[w]
    vouches = peers[w].agree(0, CONTRIBUTORS[:3], {})  # committed already: the same set, its shares kept
    common = {"run": "run", "sender": w, "round_": 0}
    return [
        encode_secure_aggregation("masked", **common, schema="ab" * 32, ess=400.0, data=sent[w][0][:50], shares=sent[w][1]),
        encode_secure_aggregation("unmask", **common, survivors=CONTRIBUTORS[:3], shares={o: sent[o][1][w] for o in CONTRIBUTORS[1:3]}),
        encode_secure_aggregation("reveal", **common, seed=reveal["seed"], pairs=reveal["pairs"],
                      shares={o: v.to_bytes(66, "big") for o, v in reveal["shares"].items()},
                      pair_shares={o: {x: v.to_bytes(66, "big") for x, v in p.items()} for o, p in reveal["pair_shares"].items()}),
        encode_secure_aggregation("agree", **common, vouches=vouches),
        encode_secure_aggregation("confirm", **common, vouches=vouches),
        encode_secure_aggregation("decline", **common, to=RECIPIENT, reason="resumed"),
    ]


FRAMES = _secure_frames()


@settings(max_examples=300, deadline=None)
@given(which=st.integers(0, 5), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
       cut=st.integers(0, 10**6))
def test_damaged_secure_frames_decode_or_are_rejected(which, flips, cut):
    from crc.nodes.wire import Agree, Confirm, Decline, Expectation, Masked, Rejected, Reveal, Unmask, decode

    expect = Expectation(run="run", schema_id="ab" * 32, ess=400.0, size=50, neighbours=frozenset(CONTRIBUTORS),
                         secure_aggregation=True)
    frame = bytearray(FRAMES[which])
    for position, value in flips:
        frame[position % len(frame)] ^= value
    frame = bytes(frame[: max(1, cut % (len(frame) + 1))]) if cut % 3 == 0 else bytes(frame)
    with contextlib.suppress(Rejected):  # rejected by cause, or decoded to a well-typed message; nothing else
        assert isinstance(decode(frame, expect), (Masked, Unmask, Reveal, Agree, Confirm, Decline))


def test_intact_secure_frames_decode_to_their_types():
    from crc.nodes.wire import Agree, Confirm, Decline, Expectation, Masked, Reveal, Unmask, decode

    expect = Expectation(run="run", schema_id="ab" * 32, ess=400.0, size=50, neighbours=frozenset(CONTRIBUTORS),
                         secure_aggregation=True)
    kinds = [type(decode(frame, expect)) for frame in FRAMES]
    assert kinds == [Masked, Unmask, Reveal, Agree, Confirm, Decline]


def test_a_restarted_peers_neighbours_give_up_the_round_it_resumed_at_without_waiting_a_timeout(tmp_path):
    """A peer killed after its first send, while its neighbours have not started, resumes at round 0 and answers no
    unmasking request for it (it may have committed to a set before it stopped): it declines them, so its
    neighbours give round 0's unmasking up at once instead of waiting their --timeout (20 s here) for an answer."""
    import signal
    import time

    from crc.nodes import checkpoint
    from support.network import Network, scenario

    timeout = 20.0
    config, graph, _ = scenario(tmp_path, nodes=3, rounds=4, topology="ring", secure_aggregation=True)
    victim, others = 0, [1, 2]
    with Network(tmp_path, graph, config, timeout=timeout) as net:
        net.start(victim)
        deadline = time.monotonic() + timeout
        while not checkpoint.exists(tmp_path / f"checkpoint-{victim}"):  # written before the first send
            assert time.monotonic() < deadline and net.processes[victim].poll() is None
            time.sleep(0.02)
        net.signal(victim, signal.SIGKILL)
        net.processes[victim].wait(timeout=10)
        net.start(victim)
        net.wait_for_log(victim, "resumed from checkpoint at round 0", limit=timeout)
        started = time.monotonic()
        net.start_all(order=others)
        assert net.wait(limit=2 * timeout) == {i: 0 for i in range(3)}
        elapsed = time.monotonic() - started
    metrics = {i: load_model(net.model_path(i)).metrics for i in range(3)}
    assert metrics[victim]["reveals_refused"] == 2 and all(metrics[i]["unmask_fallbacks"] >= 1 for i in others)
    longest = max(max(metrics[i]["round_ms"]) for i in others) / 1000
    assert longest < timeout / 4 and elapsed < timeout / 2, (longest, elapsed)
