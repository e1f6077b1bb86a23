"""Differential privacy: the sensitivity bound of one release, the ESS-preserving Gaussian noise, the accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from crc.core.acceleration import PAPER, PRESET, Acceleration
from crc.core.calibration import lrc
from crc.core.distributed_noise import FIXED_POINT_BITS
from crc.core.errors import CRCError
from crc.core.models import make_model
from crc.core.models.base import labelled_weights
from crc.core.privacy import check_settings, clip_standardized, ess_preserving_noise, release, sensitivity
from crc.protocol.accountant import epsilon_spent, noise_multiplier_for, plan, plan_exact
from support.tables import mixed_columns, prepared

KINDS = {
    "nb": {},
    "qda": {},
    "pc-mixture": {"components": 3},
    "pc-region-graph": {"structure": "region-graph", "depth": 2, "repetitions": 2, "sums": 2},
}
SCHEMA, X, Y = prepared(mixed_columns(400, seed=3))


def _model(kind: str):
    return make_model(kind.split("-")[0], SCHEMA, **KINDS[kind])


def _extreme_rows(rng: np.random.Generator, m: int, clip: float) -> np.ndarray:
    """Rows of X with continuous values pushed out (so that clipping puts many of them on the bound)."""
    rows = X[rng.integers(len(X), size=m)].copy()
    continuous = list(SCHEMA.continuous)
    rows[:, continuous] *= rng.uniform(0.5, 4.0, size=(m, len(continuous)))
    return clip_standardized(SCHEMA, rows, clip)


@pytest.mark.parametrize("kind", list(KINDS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), clip=st.sampled_from([0.5, 1.0, 3.0]), m=st.integers(1, 12))
def test_one_release_moves_at_most_the_sensitivity(kind, seed, clip, m):
    """Replace one instance of a peer's local data: its LRC release from the same public aggregate moves by at most
    Delta (the largest change over random aggregates, instances and replacements)."""
    model = _model(kind)
    rng = np.random.default_rng(seed)
    local = _extreme_rows(rng, m, clip)
    y = Y[rng.integers(len(Y), size=m)]
    aggregate = model.fit_ml(model.features(_extreme_rows(rng, 30, clip)), Y[rng.integers(len(Y), size=30)])
    aggregate = aggregate * (200.0 / model.ess(aggregate))
    neighbour, y_neighbour = local.copy(), y.copy()
    replaced = rng.integers(m)  # one instance, features and label: two instances could move it by 2 Delta
    neighbour[replaced] = _extreme_rows(rng, 1, clip)[0]
    y_neighbour[replaced] = rng.integers(SCHEMA.n_classes)
    before = lrc(model, aggregate, model.features(local), labelled_weights(y, model.n_classes))
    after = lrc(model, aggregate, model.features(neighbour), labelled_weights(y_neighbour, model.n_classes))
    assert np.linalg.norm(before - after) <= sensitivity(model, clip) * (1 + 1e-12)


@pytest.mark.parametrize("kind", list(KINDS))
def test_one_instance_statistics_are_within_the_record_bound(kind):
    """||s({x}, u; theta)|| <= G ||u|| for instances on the clipping box's corners and random weights and theta."""
    model = _model(kind)
    rng = np.random.default_rng(0)
    clip = 2.0
    worst = 0.0
    thetas = [model.theta(model.fit_ml(model.features(_extreme_rows(rng, 20, clip)), Y[rng.integers(len(Y), size=20)]))
              for _ in range(5)]
    for trial in range(200):
        x = _extreme_rows(rng, 1, clip)
        x[:, list(SCHEMA.continuous)] = clip * rng.choice([-1.0, 1.0], size=len(SCHEMA.continuous))
        u = rng.normal(size=(1, model.n_classes))
        one = model.labelled(thetas[trial % len(thetas)], model.features(x), u)
        worst = max(worst, np.linalg.norm(one) / np.linalg.norm(u))
    bound = model.record_bound(clip)
    assert worst <= bound * (1 + 1e-12)
    if kind in ("nb", "qda"):  # linear models reach their bound at a corner with every feature present
        assert worst >= 0.999 * bound


@pytest.mark.parametrize("kind", list(KINDS))
def test_noise_keeps_the_ess_exactly_and_has_the_planned_scale(kind):
    model = _model(kind)
    rng = np.random.default_rng(1)
    stats = np.broadcast_to(model.uniform(500.0), (400, model.size))
    sigma = 7.5
    noisy = release(model, stats, sigma, rng)
    np.testing.assert_allclose(model.ess(noisy), 500.0, rtol=1e-12)
    noise = (noisy - stats) / sigma
    counts = model.table(noise)[..., :, model.layout.columns("count")].reshape(len(noise), -1)
    others = np.delete(model.table(noise), model.layout.columns("count"), axis=-1).reshape(-1)
    n_counts = counts.shape[1]
    # per coordinate: variance 1 off the counts, 1 - 1/n on the counts (the projection removes one direction)
    assert abs(others.var() - 1.0) < 6 * math.sqrt(2 / others.size)
    assert abs(counts.var() - (1 - 1 / n_counts)) < 6 * math.sqrt(2 / counts.size)
    assert abs(others.mean()) < 6 / math.sqrt(others.size)


def test_noise_is_seeded_and_fresh_without_a_seed():
    model = _model("nb")
    a = ess_preserving_noise(model, (2,), np.random.default_rng(5))
    b = ess_preserving_noise(model, (2,), np.random.default_rng(5))
    c = ess_preserving_noise(model, (2,), np.random.default_rng())
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact ε of a Gaussian mechanism with sensitivity/σ = mu (Balle & Wang 2018, Theorem 8), by bisection."""

    def delta_of(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    low, high = 0.0, 1000.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if delta_of(middle) > delta else (low, middle)
    return high


@pytest.mark.parametrize("z, releases", [(1.0, 1), (1.1, 64), (4.0, 64), (10.0, 256), (30.0, 64)])
def test_the_accountants_bracket_the_exact_gaussian_epsilon(z, releases):
    """T Gaussian releases at noise multiplier z are exactly one Gaussian mechanism with mu = sqrt(T) / z. The PLD
    accountant gives that exact ε (rounded up); the RDP accountant's ε is a valid bound (never below the exact ε)
    and not loose (within 40 % of it here); and it is at most the closed-form conversion of Mironov (2017,
    Prop. 3), min over α of T α / (2 z^2) + log(1/δ) / (α - 1) = T / (2 z^2) + sqrt(2 T log(1/δ)) / z, which it
    improves on."""
    delta = 1e-5
    exact = _exact_gaussian_epsilon(math.sqrt(releases) / z, delta)
    assert epsilon_spent(z, releases, delta) == pytest.approx(exact, rel=1e-8)
    rdp = epsilon_spent(z, releases, delta, "rdp")
    mironov = releases / (2 * z**2) + math.sqrt(2 * releases * math.log(1 / delta)) / z
    assert exact <= rdp <= 1.4 * exact
    assert rdp <= mironov


@pytest.mark.parametrize("epsilon", [1.0, 4.0, 16.0])
def test_the_pld_accountant_gives_the_same_epsilon_with_less_noise_than_rdp(epsilon):
    """64 releases, δ = 1e-5: 5-8 % less noise for the same ε (the exact ε of the noise is still within it)."""
    pld, rdp = noise_multiplier_for(epsilon, 1e-5, 64), noise_multiplier_for(epsilon, 1e-5, 64, "rdp")
    assert 0.90 * rdp < pld < 0.96 * rdp
    assert _exact_gaussian_epsilon(8 / pld, 1e-5) <= epsilon * (1 + 1e-8)


def test_epsilon_falls_with_the_noise_and_grows_with_the_releases():
    delta = 1e-5
    by_noise = [epsilon_spent(z, 64, delta) for z in (0.8, 1.0, 2.0, 4.0, 8.0, 16.0)]
    by_rounds = [epsilon_spent(4.0, t, delta) for t in (1, 8, 16, 64, 256)]
    assert all(a > b for a, b in zip(by_noise, by_noise[1:]))
    assert all(a < b for a, b in zip(by_rounds, by_rounds[1:]))


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 16.0])
def test_the_solved_noise_spends_the_target_and_no_less_noise_would(epsilon):
    z = noise_multiplier_for(epsilon, 1e-5, 64)
    assert epsilon_spent(z, 64, 1e-5) <= epsilon
    assert epsilon_spent(z * (1 - 1e-3), 64, 1e-5) > epsilon * (1 - 1e-2)


def test_the_plan_records_what_it_was_asked_and_what_it_spends():
    model = _model("nb")
    privacy = plan(model, epsilon=2.0, delta=1e-6, clip=1.5, rounds=32)
    assert (privacy.epsilon, privacy.delta, privacy.clip, privacy.releases) == (2.0, 1e-6, 1.5, 32)
    assert privacy.sensitivity == sensitivity(model, 1.5)
    assert privacy.sigma == privacy.noise_multiplier * privacy.sensitivity
    assert privacy.epsilon_spent <= 2.0
    assert set(privacy.to_json()) == {"epsilon", "delta", "clip", "rounds", "sensitivity", "noise_multiplier", "sigma",
                                      "epsilon_spent", "accountant", "noise", "colluders", "dropouts", "sums_per_round",
                                      "release_every"}


def test_the_exact_plan_accounts_the_discrete_gaussian_by_zcdp_on_the_integer_sensitivity():
    """A real peer's local noise: ρ = T / (2 z²) spends the target, the sensitivity is Δ with the rounding to the
    fixed point (√size units), and the noise is the zCDP conversion's, a few per cent above the PLD's."""
    model = _model("nb")
    exact, floating = (make(model, epsilon=2.0, delta=1e-6, clip=1.5, rounds=32) for make in (plan_exact, plan))
    assert exact.accountant == "zcdp" and exact.noise == "local"
    assert exact.sensitivity == pytest.approx(sensitivity(model, 1.5) + math.sqrt(model.size) * 2.0**-FIXED_POINT_BITS,
                                              rel=1e-12)
    assert exact.epsilon_spent <= 2.0 and epsilon_spent(exact.noise_multiplier * (1 - 1e-3), 32, 1e-6, "zcdp") > 2.0 * 0.99
    assert 1.0 < exact.sigma / floating.sigma < 1.15


@pytest.mark.parametrize("settings_, message", [
    ({"iterations": 2}, "--iters 1"),
    ({"acceleration": Acceleration(start="local")}, "--start uniform"),
    ({"acceleration": Acceleration(momentum=0.5, safeguard=True)}, "--safeguard"),
    ({"acceleration": PRESET}, "--exact-diffusion"),
    ({"delta": 0.0}, "--dp-delta"),
    ({"clip": math.inf}, "--clip"),
    ({"epsilon": math.nan}, "--dp-epsilon"),
    ({"noise": "distributed"}, "--classifier aggregate"),
    ({"noise": "shared"}, "--dp-noise"),
    ({"colluders": -1}, "--colluders"),
    ({"aggregate": "screened"}, "--aggregate screened"),
    ({"aggregate": "robust"}, "--aggregate screened"),
])
def test_settings_privacy_cannot_cover_are_refused(settings_, message):
    base = {"epsilon": 1.0, "delta": 1e-5, "clip": 1.0, "iterations": 1, "acceleration": PAPER}
    with pytest.raises(CRCError, match=message):
        check_settings(**{**base, **settings_})


def test_momentum_alone_is_covered():
    check_settings(epsilon=1.0, delta=1e-5, clip=1.0, iterations=1, acceleration=Acceleration(momentum=0.7))


@pytest.mark.parametrize("aggregate", ["mean", "clipped", "median", "trimmed", "geomedian"])
def test_rules_of_public_values_only_are_covered(aggregate):
    """They combine the peer's last release with what its neighbours sent; ``screened`` also tests them on its data."""
    check_settings(epsilon=1.0, delta=1e-5, clip=1.0, iterations=1, acceleration=PAPER, aggregate=aggregate)


def test_without_epsilon_nothing_is_checked():
    check_settings(epsilon=None, delta=1e-5, clip=1.0, iterations=3, acceleration=Acceleration(start="local", momentum=0.5,
                                                                                               safeguard=True))


def test_clipping_touches_only_continuous_values_and_keeps_missing_cells():
    x = X[:5].copy()
    x[0, SCHEMA.continuous[0]] = np.nan
    clipped = clip_standardized(SCHEMA, x * 10, 1.0)
    continuous = list(SCHEMA.continuous)
    assert np.isnan(clipped[0, continuous[0]])
    assert np.nanmax(np.abs(clipped[:, continuous])) <= 1.0
    discrete = list(SCHEMA.discrete)
    np.testing.assert_array_equal(clipped[:, discrete], (x * 10)[:, discrete])
