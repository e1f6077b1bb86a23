"""A peer's releases in-process: the privacy noise it continues from, and what a Byzantine peer puts on the wire."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2

import crc.nodes
from crc.core.attacks import PEER_ATTACKS
from crc.core.distributed_noise import FIXED_POINT_BITS, Neighbourhoods, share_variance
from crc.core.models import make_model
from crc.nodes.release import Release
from crc.protocol.accountant import plan_distributed, plan_exact
from crc.topologies import Schedule, averaging_matrix
from support.tables import mixed_columns, prepared

SCHEMA, X, Y = prepared(mixed_columns(60, seed=4))
MODEL = make_model("nb", SCHEMA)
STATS = MODEL.fit_ml(MODEL.features(X), Y) * (500.0 / len(Y))
BIND = "tcp://127.0.0.1:7100"


KEY = bytes(32)


def _not_counts(stats: np.ndarray) -> np.ndarray:
    """The coordinates of ``stats`` (..., size) that are not class counts, flattened."""
    return np.delete(MODEL.table(stats), MODEL.layout.columns("count"), axis=-1).reshape(-1)


def test_without_privacy_or_attack_the_statistics_are_released_as_they_are():
    plain = Release(MODEL, privacy=None, attack=None, bind=BIND)
    assert plain.private(STATS, 0) is STATS and plain.on_the_wire(STATS) is STATS
    with pytest.raises(ValueError, match="noise key"):
        Release(MODEL, privacy=plan_exact(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=10), attack=None, bind=BIND)


def test_the_local_noise_is_the_discrete_gaussian_of_the_plan_on_the_fixed_point_keeping_the_ess():
    """50 rounds of releases with a fixed key: the noise's sum of squares over the coordinates that are not counts,
    divided by the planned σ², is chi-square (the rounding to the grid is 2^-21 against σ); every such coordinate is
    on the fixed-point grid (no floating-point Gaussian); the counts are centred (the ESS exact)."""
    privacy = plan_exact(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=10)
    release = Release(MODEL, privacy=privacy, attack=None, bind=BIND, noise_key=KEY)
    released = np.stack([release.private(STATS, round_) for round_ in range(50)])
    noise = _not_counts(released - STATS)
    ratio = np.sum(noise**2) / privacy.sigma**2
    assert chi2.ppf(1e-9, noise.size) < ratio < chi2.ppf(1 - 1e-9, noise.size)
    units = _not_counts(released) * 2.0**FIXED_POINT_BITS
    np.testing.assert_array_equal(units, np.rint(units))
    np.testing.assert_allclose(MODEL.ess(released), MODEL.ess(STATS), rtol=1e-12)
    first = released[0]
    assert release.on_the_wire(first) is first  # an honest peer sends what it released


def test_the_local_noise_follows_the_noise_key_the_round_and_the_statistics():
    """The same key, round and statistics give the same release (a resumed peer releases a round again as it was);
    another key, another round or other statistics (a round computed again from other neighbours) fresh noise."""
    privacy = plan_exact(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=10)
    first, resumed, other = (Release(MODEL, privacy=privacy, attack=None, bind=BIND, noise_key=key)
                             for key in (KEY, KEY, bytes(31) + b"\x01"))
    released = first.private(STATS, 3)
    np.testing.assert_array_equal(resumed.private(STATS.copy(), 3), released)
    shifted = STATS + _unit_shift()
    for fresh in (other.private(STATS, 3), first.private(STATS, 4), first.private(shifted, 3) - _unit_shift()):
        assert np.all(_not_counts(fresh) != _not_counts(released))


def _unit_shift() -> np.ndarray:
    """One fixed-point unit on every coordinate (size,)."""
    return np.full(MODEL.size, 2.0**-FIXED_POINT_BITS)


def test_no_floating_point_gaussian_is_left_on_a_real_peers_path():
    """No module of a real peer draws numpy Gaussians or imports the simulator's floating-point release."""
    for path in Path(crc.nodes.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        called = {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names}
        assert not called & {"normal", "standard_normal", "multivariate_normal"}, path
        assert ("crc.core.privacy", "release") not in imported and ("crc.core.privacy", "ess_preserving_noise") not in imported, path


@pytest.mark.parametrize("attack", PEER_ATTACKS)
def test_a_byzantine_peer_sends_poison_of_the_same_ess_seeded_by_its_address(attack):
    byzantine = Release(MODEL, privacy=None, attack=attack, bind=BIND)
    sent = byzantine.on_the_wire(STATS)
    assert np.max(np.abs(sent - STATS)) > 1e-6 * np.max(np.abs(STATS))
    assert MODEL.ess(sent) == pytest.approx(MODEL.ess(STATS), rel=1e-12)
    np.testing.assert_array_equal(sent, Release(MODEL, privacy=None, attack=attack,
                                                bind=BIND).on_the_wire(STATS))
    assert byzantine.private(STATS, 0) is STATS  # it keeps learning from its own statistics


def test_distributed_shares_are_one_per_closed_neighbourhood_follow_the_noise_key_and_have_the_planned_scale():
    """A peer of a path a - b - c - d (this peer b) is in three closed neighbourhoods: {a, b} (a's), {a, b, c} (its
    own) and {b, c, d} (c's); recipients of one neighbourhood get one share. The shares follow the run's noise key."""
    a, b, c, d = (f"tcp://127.0.0.1:{7000 + i}" for i in range(4))
    hoods = {a: frozenset({a, b}), b: frozenset({a, b, c}), c: frozenset({b, c, d})}
    privacy = plan_distributed(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=4, colluders=0,
                               neighbourhoods=Neighbourhoods.of(averaging_matrix(Schedule("chain", 4, seed=0).graph(1))))
    first, second, resumed = (Release(MODEL, privacy=privacy, attack=None, bind=b, hoods=hoods,
                                      noise_key=key) for key in (bytes(32), bytes(31) + b"\x01", bytes(32)))
    shares = first.shares(0)
    assert first.shares(0) is shares and first.private(STATS, 0) is STATS  # no noise of its own: it goes into the sums
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
    release = Release(MODEL, privacy=privacy, attack=None, bind=peers[0],
                      hoods={address: whole for address in peers}, noise_key=bytes(32))
    shares = release.shares(0)
    assert shares[peers[1]] is shares[peers[0]] and shares[peers[2]] is shares[peers[0]]


def test_with_dropouts_tolerated_recipients_of_one_closed_neighbourhood_get_independent_shares():
    """With ``--dp-dropouts 1`` on a complete graph of four, a recipient may unmask {b, c, d} and another {a, c} (d
    dropped on its link, or it claims so): with one share for both, the difference of their sums would be d's
    statistics plus its one share, of variance sigma^2 / 2. Each recipient's share is its own draw instead."""
    peers = [f"tcp://127.0.0.1:{7000 + i}" for i in range(4)]
    whole = frozenset(peers)
    privacy = plan_distributed(MODEL, epsilon=4.0, delta=1e-5, clip=1.0, rounds=4, colluders=0, dropouts=1,
                               neighbourhoods=Neighbourhoods.of(np.full((4, 4), 1 / 4), 1))
    assert privacy.sums_per_round == 4  # every recipient's sum holds this peer and is accounted
    release = Release(MODEL, privacy=privacy, attack=None, bind=peers[0], hoods={address: whole for address in peers},
                      noise_key=bytes(32))
    shares = release.shares(0)
    assert all(not np.array_equal(shares[a], shares[b]) for a in peers for b in peers if a < b)
    resumed = Release(MODEL, privacy=privacy, attack=None, bind=peers[0], hoods={address: whole for address in peers},
                      noise_key=bytes(32))  # restarted from its checkpoint: a round sent again carries the same shares
    assert all(np.array_equal(resumed.shares(0)[address], shares[address]) for address in peers)
    units = privacy.sigma * 2.0**FIXED_POINT_BITS
    for recipient in peers:  # each of the planned variance, sized for |N| - 1 - 1 honest members
        ratio = np.sum(shares[recipient].astype(np.float64) ** 2) / share_variance(units, 4, 0, 1)
        assert chi2.ppf(1e-9, MODEL.size) < ratio < chi2.ppf(1 - 1e-9, MODEL.size)
