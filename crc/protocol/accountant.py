"""The privacy accountant: Rényi DP of the Gaussian mechanism composed over a peer's releases, in (ε, δ).

A release with noise multiplier z = σ / Δ is (α, α / (2 z²))-RDP for every order α > 1 (Mironov 2017);
T releases compose to T α / (2 z²). ``dp-accounting`` (Google's accountant library) does the composition
over a grid of orders and converts to (ε, δ) with the tighter conversion of Balle et al. (2020). Given a
target (ε, δ) and T, the noise multiplier is solved for by bisection (ε falls as z grows).

``dp_accounting`` is imported on first use: a run without privacy does not pay for it.
"""

from __future__ import annotations

import math

from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.privacy import Privacy, sensitivity

SOLVER_TOLERANCE = 1e-4
"""Relative width of the bracket on z at which the bisection stops (z is then rounded up to the bracket's top)."""
MAX_NOISE_MULTIPLIER = 1e6


def epsilon_spent(noise_multiplier: float, releases: int, delta: float) -> float:
    """ε after ``releases`` Gaussian releases at ``noise_multiplier`` z, for ``delta``."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    if releases < 1 or not noise_multiplier > 0:
        raise CRCError(f"the accountant needs releases >= 1 and a positive noise multiplier, got {releases}, {noise_multiplier}")
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_event.GaussianDpEvent(noise_multiplier), releases)
    return float(accountant.get_epsilon(delta))


def noise_multiplier_for(epsilon: float, delta: float, releases: int) -> float:
    """The smallest z (to ``SOLVER_TOLERANCE``) whose ``releases`` compositions spend at most ``epsilon``."""
    low, high = 1e-3, 1.0
    while epsilon_spent(high, releases, delta) > epsilon:
        low, high = high, high * 2
        if high > MAX_NOISE_MULTIPLIER:
            raise CRCError(f"no noise multiplier up to {MAX_NOISE_MULTIPLIER:g} reaches epsilon {epsilon} with delta "
                           f"{delta} over {releases} releases")
    while high - low > SOLVER_TOLERANCE * high:
        middle = math.sqrt(low * high) if low > 0 else high / 2
        if epsilon_spent(middle, releases, delta) > epsilon:
            low = middle
        else:
            high = middle
    return high


def plan(model: GenerativeModel, *, epsilon: float, delta: float, clip: float, releases: int) -> Privacy:
    """The noise a peer of ``model`` needs for (``epsilon``, ``delta``) over ``releases`` releases, data clipped to B."""
    z = noise_multiplier_for(epsilon, delta, releases)
    return Privacy(epsilon=epsilon, delta=delta, clip=clip, releases=releases, sensitivity=sensitivity(model, clip),
                   noise_multiplier=z, epsilon_spent=epsilon_spent(z, releases, delta))
