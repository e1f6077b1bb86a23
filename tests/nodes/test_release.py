"""A peer's releases in-process: the privacy noise it continues from, and what a Byzantine peer puts on the wire."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from crc.core.attacks import PEER_ATTACKS
from crc.core.distributed_noise import FIXED_POINT_BITS, Neighbourhoods, share_variance
from crc.core.models import make_model
from crc.nodes.release import Release
from crc.protocol.accountant import plan, plan_distributed
from crc.topologies import Schedule, averaging_matrix
from support.tables import mixed_columns, prepared

SCHEMA, X, Y = prepared(mixed_columns(60, seed=4))
MODEL = make_model("nb", SCHEMA)
STATS = MODEL.fit_ml(MODEL.features(X), Y) * (500.0 / len(Y))
BIND = "tcp://127.0.0.1:7100"


def test_without_privacy_or_attack_the_statistics_are_released_as_they_are():
    plain = Release(MODEL, privacy=None, privacy_seed=None, attack=None, bind=BIND)
    assert plain.private(STATS) is STATS and plain.on_the_wire(STATS) is STATS


def test_the_privacy_noise_is_seeded_keeps_the_ess_and_has_the_plans_scale():
    privacy = plan(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, releases=10)
    first, again = (Release(MODEL, privacy=privacy, privacy_seed=3, attack=None, bind=BIND) for _ in range(2))
    released = first.private(STATS)
    np.testing.assert_array_equal(released, again.private(STATS))
    assert not np.array_equal(first.private(STATS), released)  # a fresh draw every round
    assert MODEL.ess(released) == pytest.approx(MODEL.ess(STATS), rel=1e-12)
    noise = np.delete(MODEL.table(released - STATS), MODEL.layout.columns("count"), axis=-1).reshape(-1)
    assert np.std(noise) == pytest.approx(privacy.sigma, rel=0.25)
    assert first.on_the_wire(released) is released  # an honest peer sends what it released


@pytest.mark.parametrize("attack", PEER_ATTACKS)
def test_a_byzantine_peer_sends_poison_of_the_same_ess_seeded_by_its_address(attack):
    byzantine = Release(MODEL, privacy=None, privacy_seed=None, attack=attack, bind=BIND)
    sent = byzantine.on_the_wire(STATS)
    assert np.max(np.abs(sent - STATS)) > 1e-6 * np.max(np.abs(STATS))
    assert MODEL.ess(sent) == pytest.approx(MODEL.ess(STATS), rel=1e-12)
    np.testing.assert_array_equal(sent, Release(MODEL, privacy=None, privacy_seed=None, attack=attack,
                                                bind=BIND).on_the_wire(STATS))
    assert byzantine.private(STATS) is STATS  # it keeps learning from its own statistics


def test_distributed_shares_are_one_per_closed_neighbourhood_follow_the_noise_key_and_have_the_planned_scale():
    """A peer of a path a - b - c - d (this peer b) is in three closed neighbourhoods: {a, b} (a's), {a, b, c} (its
    own) and {b, c, d} (c's); recipients of one neighbourhood get one share. The shares follow the run's noise key."""
    a, b, c, d = (f"tcp://127.0.0.1:{7000 + i}" for i in range(4))
    hoods = {a: frozenset({a, b}), b: frozenset({a, b, c}), c: frozenset({b, c, d})}
    privacy = plan_distributed(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=4, colluders=0,
                               neighbourhoods=Neighbourhoods.of(averaging_matrix(Schedule("chain", 4, seed=0).graph(1))))
    first, second, resumed = (Release(MODEL, privacy=privacy, privacy_seed=0, attack=None, bind=b, hoods=hoods,
                                      noise_key=key) for key in (bytes(32), bytes(31) + b"\x01", bytes(32)))
    shares = first.shares(0)
    assert first.shares(0) is shares and first.private(STATS) is STATS  # no noise of its own: it goes into the sums
    assert not np.array_equal(shares[b], second.shares(0)[b])  # another run's key, whatever the seed: other shares
    assert not np.array_equal(shares[b], first.shares(1)[b])  # and a fresh draw each round
    np.testing.assert_array_equal(resumed.shares(0)[b], shares[b])  # the same key: the same shares
    units = privacy.sigma * 2.0**FIXED_POINT_BITS
    for recipient, hood in hoods.items():
        variance = share_variance(units, len(hood), 0)
        ratio = np.sum(shares[recipient].astype(np.float64) ** 2) / variance  # chi-square, MODEL.size degrees
        assert chi2.ppf(1e-9, MODEL.size) < ratio < chi2.ppf(1 - 1e-9, MODEL.size)
    released = first.with_share(STATS, c, 0)
    assert MODEL.ess(released) == pytest.approx(MODEL.ess(STATS), rel=1e-12)  # a plain frame keeps the ESS exact


def test_recipients_of_one_closed_neighbourhood_get_one_share():
    peers = [f"tcp://127.0.0.1:{7000 + i}" for i in range(3)]
    whole = frozenset(peers)
    privacy = plan_distributed(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=4, colluders=0,
                               neighbourhoods=Neighbourhoods.of(np.full((3, 3), 1 / 3)))
    release = Release(MODEL, privacy=privacy, privacy_seed=None, attack=None, bind=peers[0],
                      hoods={address: whole for address in peers}, noise_key=bytes(32))
    shares = release.shares(0)
    assert shares[peers[1]] is shares[peers[0]] and shares[peers[2]] is shares[peers[0]]
