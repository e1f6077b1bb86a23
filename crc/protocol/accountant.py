"""The privacy accountant: the Gaussian mechanism composed over a peer's releases, in (ε, δ).

Two accountants, both from ``dp-accounting`` (Google's accountant library):

- ``pld`` (the default): the privacy loss distribution. The privacy loss of a Gaussian release with noise
  multiplier z = σ / Δ is normal, N(μ²/2, μ²) with μ = 1/z, and losses add under composition, so T releases
  have exactly the privacy loss of one Gaussian mechanism with μ = √T / z (Dong, Roth & Su 2019; Balle & Wang
  2018). ``GaussianPrivacyLoss`` gives its δ(ε) in closed form; ε for a δ is found by bisection (δ falls as ε
  grows). This is the exact ε, up to floating point, rounded up.
- ``rdp``: Rényi DP. A release is (α, α / (2 z²))-RDP for every order α > 1 (Mironov 2017); T releases compose
  to T α / (2 z²), over a grid of orders, converted to (ε, δ) with the conversion of Balle et al. (2020). A valid
  bound, 7-8 % above the exact ε at the settings used here: the same ε needs about that much more noise.

A third, ``zcdp``, accounts distributed noise (``crc.core.distributed_noise``): a neighbourhood's sum carries
the sum of its members' discrete Gaussian shares, which is not exactly a discrete Gaussian. Kairouz, Liu &
Steinke (2021, Theorem 2) bound it: n independent N_Z(0, σ²) shares on an integer release of L2 sensitivity Δ in d
coordinates are ½ε²-concentrated DP with ε² ≤ Δ² / (n σ²) + τ d, τ = 10 Σ_{k=1}^{n-1} exp(-2π² σ² k / (k+1))
(τ d enters with a factor ½ there; here with 1, conservatively). That is the Gaussian's ρ = 1 / (2 z²), z² =
n σ² / Δ², plus ½ τ d; T such releases compose to T ρ, valid for every Rényi order α as α T ρ, converted to
(ε, δ) by Balle et al. (2020), ``dp_accounting.rdp.rdp_privacy_accountant.compute_epsilon``.

The same ``zcdp`` accounts a real peer's local noise (``plan_exact``), the discrete Gaussian on the fixed-point
statistics (``crc.core.distributed_noise.exact_release``): N_Z(0, σ²) on each coordinate of an integer release of L2
sensitivity Δ is Δ² / (2σ²)-zCDP (Canonne, Kamath & Steinke 2020, the multivariate discrete Gaussian), exactly the continuous Gaussian's ρ
at the same σ / Δ, with Δ the integer sensitivity (rounding to the grid included, ``integer_sensitivity``). The
``pld`` accountant's tighter ε is the continuous Gaussian's exact privacy loss, which is not established for the
multivariate discrete Gaussian, so a real peer does not use it: for the same (ε, δ) its z is that of ``zcdp``
(the simulator's floating-point noise keeps ``pld``).

Given a target (ε, δ) and T, the noise multiplier is solved for by bisection (ε falls as z grows).

``dp_accounting`` is imported on first use: a run without privacy does not pay for it.
"""

from __future__ import annotations

import math

from crc.core.distributed_noise import FIXED_POINT_BITS, Neighbourhoods, divergence, integer_sensitivity, share_variance
from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.privacy import Privacy, release_count, sensitivity

SOLVER_TOLERANCE = 1e-4
"""Relative width of the bracket on z at which the bisection stops (z is then rounded up to the bracket's top)."""
MAX_NOISE_MULTIPLIER = 1e6


ACCOUNTANTS = ("pld", "rdp", "zcdp")
ORDERS = tuple([1 + k / 20 for k in range(1, 140)] + list(range(8, 64)) + [64 * 2**k for k in range(8)])
"""Rényi orders of the ``zcdp`` conversion."""
EPSILON_TOLERANCE = 1e-10
"""Relative width of the bracket on ε at which the PLD accountant's bisection stops (ε is the bracket's top)."""
MAX_EPSILON = 1e4


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε for ``delta`` of a ρ-zCDP mechanism (Rényi DP α ρ at every order α)."""
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    return float(compute_epsilon(ORDERS, [order * rho for order in ORDERS], delta)[0])


def epsilon_spent(noise_multiplier: float, releases: int, delta: float, accountant: str = "pld",
                  divergence: float = 0.0) -> float:
    """ε after ``releases`` Gaussian releases at ``noise_multiplier`` z, for ``delta``, by ``accountant``;
    ``divergence``: the ``zcdp`` accountant's ½ τ d per release (a sum of discrete Gaussians, module docstring)."""
    if releases < 1 or not noise_multiplier > 0:
        raise CRCError(f"the accountant needs releases >= 1 and a positive noise multiplier, got {releases}, {noise_multiplier}")
    if accountant == "zcdp":
        return zcdp_epsilon(releases * (1 / (2 * noise_multiplier**2) + divergence), delta)
    if accountant == "rdp":
        from dp_accounting import dp_event
        from dp_accounting.rdp import rdp_privacy_accountant

        rdp = rdp_privacy_accountant.RdpAccountant()
        rdp.compose(dp_event.GaussianDpEvent(noise_multiplier), releases)
        return float(rdp.get_epsilon(delta))
    if accountant != "pld":
        raise CRCError(f"unknown accountant {accountant!r}: one of {', '.join(ACCOUNTANTS)}")
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    composed = GaussianPrivacyLoss(standard_deviation=noise_multiplier / math.sqrt(releases), sensitivity=1.0)
    if composed.get_delta_for_epsilon(0.0) <= delta:
        return 0.0
    low, high = 0.0, 1.0
    while composed.get_delta_for_epsilon(high) > delta:
        low, high = high, high * 2
        if high > MAX_EPSILON:
            return math.inf
    while high - low > EPSILON_TOLERANCE * high:
        middle = (low + high) / 2
        low, high = (middle, high) if composed.get_delta_for_epsilon(middle) > delta else (low, middle)
    return high


def noise_multiplier_for(epsilon: float, delta: float, releases: int, accountant: str = "pld") -> float:
    """The smallest z (to ``SOLVER_TOLERANCE``) whose ``releases`` compositions spend at most ``epsilon``."""
    low, high = 1e-3, 1.0
    while epsilon_spent(high, releases, delta, accountant) > epsilon:
        low, high = high, high * 2
        if high > MAX_NOISE_MULTIPLIER:
            raise CRCError(f"no noise multiplier up to {MAX_NOISE_MULTIPLIER:g} reaches epsilon {epsilon} with delta "
                           f"{delta} over {releases} releases")
    while high - low > SOLVER_TOLERANCE * high:
        middle = math.sqrt(low * high) if low > 0 else high / 2
        if epsilon_spent(middle, releases, delta, accountant) > epsilon:
            low = middle
        else:
            high = middle
    return high


def plan(model: GenerativeModel, *, epsilon: float, delta: float, clip: float, rounds: int, release_every: int = 1,
         accountant: str = "pld") -> Privacy:
    """The noise a peer of ``model`` needs for (``epsilon``, ``delta``) over ``rounds`` rounds releasing every
    ``release_every``-th (``crc.core.privacy.release_count`` releases), data clipped to B."""
    releases = release_count(rounds, release_every)
    z = noise_multiplier_for(epsilon, delta, releases, accountant)
    return Privacy(epsilon=epsilon, delta=delta, clip=clip, releases=releases, sensitivity=sensitivity(model, clip),
                   noise_multiplier=z, epsilon_spent=epsilon_spent(z, releases, delta, accountant), accountant=accountant,
                   release_every=release_every)


def plan_exact(model: GenerativeModel, *, epsilon: float, delta: float, clip: float, rounds: int,
               release_every: int = 1) -> Privacy:
    """A real peer's local noise (``crc.core.distributed_noise.exact_release``) for (``epsilon``, ``delta``) over
    ``rounds`` rounds releasing every ``release_every``-th: the discrete Gaussian on the integer sensitivity,
    accounted by ``zcdp``."""
    releases = release_count(rounds, release_every)
    z = noise_multiplier_for(epsilon, delta, releases, "zcdp")
    units = integer_sensitivity(sensitivity(model, clip), model.size)
    return Privacy(epsilon=epsilon, delta=delta, clip=clip, releases=releases, sensitivity=units / 2.0**FIXED_POINT_BITS,
                   noise_multiplier=z, epsilon_spent=epsilon_spent(z, releases, delta, "zcdp"), accountant="zcdp",
                   release_every=release_every)


def plan_distributed(model: GenerativeModel, *, epsilon: float, delta: float, clip: float, rounds: int,
                     neighbourhoods: Neighbourhoods, colluders: int, dropouts: int = 0) -> Privacy:
    """The noise of every neighbourhood sum for (``epsilon``, ``delta``) over ``rounds`` rounds of distributed noise
    (``crc.core.distributed_noise``): a peer is released in up to k distinct sums a round, T k releases of the
    integer sensitivity, accounted by ``zcdp`` with the shares' τ."""
    per_round = int(neighbourhoods.sums_per_peer(len(neighbourhoods.recipient_set)).max())
    return plan_shares(model, epsilon=epsilon, delta=delta, clip=clip, rounds=rounds, sums_per_round=per_round,
                       sizes=[len(m) for m in neighbourhoods.members], colluders=colluders, dropouts=dropouts)


def plan_shares(model: GenerativeModel, *, epsilon: float, delta: float, clip: float, rounds: int, sums_per_round: int,
                sizes: list[int], colluders: int, dropouts: int = 0) -> Privacy:
    """``plan_distributed`` from its parts: k = ``sums_per_round`` (the most distinct sums holding a peer each round)
    and the ``sizes`` of the closed neighbourhoods whose shares are checked (a real peer knows those it is in)."""
    releases = rounds * sums_per_round
    units = integer_sensitivity(sensitivity(model, clip), model.size)
    z = noise_multiplier_for(epsilon, delta, releases, "zcdp")
    variances = [(share_variance(z * units, n, colluders, dropouts), n) for n in sizes]
    spent = epsilon_spent(z, releases, delta, "zcdp", max(divergence(v, n, model.size) for v, n in variances))
    if spent > epsilon:
        raise CRCError(f"distributed noise: the discrete shares spend {spent:.4g} > epsilon {epsilon}")
    return Privacy(epsilon=epsilon, delta=delta, clip=clip, releases=releases, sensitivity=units / 2.0**FIXED_POINT_BITS,
                   noise_multiplier=z, epsilon_spent=spent, accountant="zcdp", noise="distributed", colluders=colluders,
                   dropouts=dropouts, sums_per_round=sums_per_round)
