"""Distributed noise through secure aggregation: each member of a neighbourhood adds a discrete Gaussian share
to its integer (fixed-point) statistics, so that the sum its recipient unmasks carries the full noise once
(Kairouz, Liu & Steinke 2021).

What is released. With secure aggregation, the recipient w of a closed neighbourhood N[w] (itself and its
neighbours) learns only S_w = Σ_{u ∈ N[w]} (F(s_u) + η_{u,w}), where F is the fixed point of ``FIXED_POINT_BITS``
fractional bits and η_{u,w} ~ N_Z(0, v) independent shares (``crc.core.discrete_gaussian``). Its aggregate is
S_w / (2^F |N[w]|), with the noise on the class counts centred (the counts' total, |N[w]| times the ESS, is
public): post-processing. A peer continues from its aggregate (its own statistics s_u stay private) and its
classifier is its last aggregate (``--classifier aggregate``), so everything it writes is post-processing of
released sums.

Collusion and dropouts. The recipient knows its own share; if besides it at most ``colluders`` (t) members
collude, their shares known to it, and a request set may leave out at most ``dropouts`` (d) members whose words
did not arrive (``crc.protocol.neighbourhoods.fewest_survivors``), their shares missing from the sum, the noise the
others add is at least (|N[w]| - 1 - t - d) v. Shares are sized so that this is σ², the noise of one release:
v = ⌈σ² / (|N[w]| - 1 - t - d)⌉ in integer units, which needs |N[w]| >= 2 + t + d for every neighbourhood. The
two are kept apart because a recipient may itself claim that honest members dropped: the d members it leaves out
are then honest ones, and the t colluders still sit in its set. Beyond t, the guarantee degrades to what the honest
shares give (with all others colluding, one share); every member's share is larger by (|N[w]| - 1 - t) /
(|N[w]| - 1 - t - d) for each dropout tolerated, the price of sums that survive a dead member.

What it costs. A peer's statistics enter every neighbourhood sum it is a member of: its own and each
neighbour's. Recipients with the same closed neighbourhood (a complete graph: all of them) share one sum, whose
members add one share for all of them; distinct neighbourhoods get independent shares. So each round a peer u
is released k_u times, k_u the number of distinct closed neighbourhoods holding u, and the accountant composes
T max_u k_u releases (``crc.protocol.accountant``, ``zcdp``). On a tree k_u = degree + 1, and distributed noise
buys nothing over local noise; on a complete graph k_u = 1 and every aggregate carries σ / n instead of σ / √n.
Sharing holds only while every such recipient unmasks the same members: with dropouts tolerated (d > 0) two of
them may unmask sets that differ, one left x out (x dropped on its link, or it claims so), and two sums of the
same shares differ by x's statistics plus its one share, of variance σ² / (|N[w]| - 1 - t - d). So with d > 0
every recipient's sum has shares of its own (``Neighbourhoods.of``), and k_u = |N[u]|: a complete graph then
buys nothing over local noise either.

Sensitivity. One release changes s_u by at most Δ (``crc.core.privacy``); rounding to fixed point adds at most
½ per coordinate to each of the two neighbouring values, so the integer sensitivity is Δ 2^F + √size.

The simulator adds each sum's noise to the exact average and leaves out the rounding of the statistics themselves
(at most 2^-(F+1) per coordinate, inside the accounted sensitivity). It draws a sum's noise at once, seeded from the
run's seed for reproducible runs: a Gaussian of the shares' total variance |N[w]| v rounded to an integer, vectorized.
Its distance from the sum of |N[w]| exact discrete Gaussian shares is of the order of exp(-π² v) (the τ of
``divergence``), below 10^-40 once v >= 10, that is once σ >= 3.1e-6 √|N[w]| in statistics units; a private run's σ
is z Δ with Δ >= 2√2 (the class counts' part of the bound alone), so only a z below 10^-5, an ε in the hundreds of
thousands, comes near. The exact sampler costs about 100 µs a draw, which made a simulated run on 50 peers take a
minute and more a round. Real peers (``crc.nodes.release``) draw every share exactly, keyed with fresh bytes from
``os.urandom`` each run, add them to the fixed-point words before masking (``crc.nodes.secure_aggregation``), and
centre the counts of what they unmask on their public total (``centre_counts``): the same mechanism, on noise
nobody can predict, and the one the accountant bounds.

A real peer's local noise is exact too (``exact_release``): its statistics rounded to the same fixed point, plus one
discrete Gaussian of the whole release's variance per coordinate, accounted like one share's sum (``zcdp``, the
integer sensitivity, ``crc.protocol.accountant.plan_exact``). The simulator's local noise stays a seeded
floating-point Gaussian (``crc.core.privacy.release``), accounted by the PLD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crc.core.discrete_gaussian import KeyedRandom, discrete_gaussian_array
from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.privacy import centre_counts

FIXED_POINT_BITS = 20
"""Fractional bits of secure aggregation's fixed point."""


def noise_in_statistics(model: GenerativeModel, units: np.ndarray) -> np.ndarray:
    """Integer noise (..., size) in fixed-point units as noise in statistics units, its class counts centred (the
    ESS of what it is added to stays exact)."""
    return centre_counts(model, units.astype(np.float64) / 2.0**FIXED_POINT_BITS)


def integer_sensitivity(sensitivity: float, size: int) -> float:
    """Δ in fixed-point units, rounding included: Δ 2^F + √size."""
    return sensitivity * 2.0**FIXED_POINT_BITS + math.sqrt(size)


def sum_key(recipient, members, dropouts: int) -> tuple:
    """Which sum of independent shares ``recipient``'s unmasking of its closed neighbourhood ``members`` takes: one
    per distinct closed neighbourhood, shared by the recipients that have it, or, with ``dropouts`` (``--dp-dropouts``)
    > 0, one per recipient (module docstring)."""
    return members, recipient if dropouts > 0 else ""


@dataclass(frozen=True)
class Neighbourhoods:
    """The closed-neighbourhood sums of a mixing: one per distinct closed neighbourhood, or, with dropouts
    tolerated, one per recipient (``of``).

    Attributes
    ----------
    members : list of (k,) int arrays
        Each sum's peers.
    recipient_set : (n,) int array
        The index in ``members`` of each peer's own closed neighbourhood.
    """

    members: list[np.ndarray]
    recipient_set: np.ndarray

    @classmethod
    def of(cls, mixing, dropouts: int = 0) -> Neighbourhoods:
        """From a closed-neighbourhood averaging matrix (n, n); with ``dropouts`` (``--dp-dropouts``) > 0 every
        recipient's sum is its own, even where closed neighbourhoods coincide (module docstring)."""
        import scipy.sparse as sp  # on use: importing this module (crc --help does) loads no scipy

        csr = sp.csr_array(mixing)
        members: list[np.ndarray] = []
        index: dict[tuple, int] = {}
        recipient_set = np.empty(csr.shape[0], dtype=np.int64)
        for w in range(csr.shape[0]):
            hood = tuple(sorted(set(csr.indices[csr.indptr[w]:csr.indptr[w + 1]].tolist()) | {w}))
            key = sum_key(w, hood, dropouts)
            if key not in index:
                index[key] = len(members)
                members.append(np.array(hood, dtype=np.int64))
            recipient_set[w] = index[key]
        return cls(members, recipient_set)

    @classmethod
    def whole(cls, n: int) -> Neighbourhoods:
        """One sum of all ``n`` peers, every peer its recipient: the network sum (``--sum-over network``), which is
        the complete graph's closed neighbourhood, a release of every peer once a round."""
        return cls([np.arange(n, dtype=np.int64)], np.zeros(n, dtype=np.int64))

    def sums_per_peer(self, n: int) -> np.ndarray:
        """k_u (n,): how many neighbourhood sums of independent shares hold each peer each round."""
        return np.bincount(np.concatenate(self.members), minlength=n)

    def smallest(self) -> int:
        return min(len(m) for m in self.members)


def grid_variance(sigma_units: float, draws: int = 1) -> int:
    """The integer variance of each of ``draws`` discrete Gaussians whose sum has variance at least ``sigma_units``²
    (σ in fixed-point units; rounded up, which only adds noise)."""
    return max(1, math.ceil(sigma_units**2 / draws))


def share_variance(sigma_units: float, members: int, colluders: int, dropouts: int = 0) -> int:
    """v, the integer variance of one member's share, so that the shares of all but the recipient, ``colluders``
    members and ``dropouts`` members left out of the sum add up to at least ``sigma_units``² (σ in fixed-point
    units)."""
    honest = members - 1 - colluders - dropouts
    if honest < 1:
        raise CRCError(f"distributed noise needs every closed neighbourhood to have at least {colluders + dropouts + 2} "
                       f"peers (the recipient, {colluders} colluder(s), {dropouts} dropout(s) and one honest member), "
                       f"got one of {members}: use a denser --topology, or fewer --colluders or --dp-dropouts")
    return grid_variance(sigma_units, honest)


def fixed_point(stats: np.ndarray) -> np.ndarray:
    """``stats`` (..., size) rounded to the fixed point, in its units (int64)."""
    return np.rint(stats * 2.0**FIXED_POINT_BITS).astype(np.int64)


def exact_release(model: GenerativeModel, stats: np.ndarray, sigma: float, rng: KeyedRandom) -> np.ndarray:
    """A real peer's local noise, exact: ``stats`` (..., size) rounded to the fixed point plus N_Z(0, ⌈(σ 2^F)²⌉) on
    every coordinate, in statistics units (σ too), the class counts centred on the statistics' ESS (kept exact).

    The rounded statistics are integers of sensitivity ``integer_sensitivity`` (rounding included), so this is the
    discrete Gaussian mechanism of Canonne, Kamath & Steinke (2020), followed by post-processing (the division and
    the centring on the public ESS); without the rounding the fractional parts of the release would show those of
    the statistics."""
    noise = discrete_gaussian_array(rng, grid_variance(sigma * 2.0**FIXED_POINT_BITS), stats.shape)
    return centre_counts(model, (fixed_point(stats) + noise) / 2.0**FIXED_POINT_BITS, model.ess(stats)[..., None, None])


def divergence(variance: int, members: int, size: int) -> float:
    """½ τ d of Kairouz, Liu & Steinke (2021) for ``members`` shares of variance ``variance`` in ``size``
    coordinates (``crc.protocol.accountant``), τ = 10 Σ_{k=1}^{n-1} exp(-2π² v k / (k+1))."""
    tau = 10 * sum(math.exp(-2 * math.pi**2 * variance * k / (k + 1)) for k in range(1, members))
    return 0.5 * tau * size


class DistributedNoise:
    """Each round's noise on every peer's aggregate (n, size), in statistics units: its neighbourhood's shares
    summed, centred on the class counts, divided by 2^F |N[w]|.

    Parameters
    ----------
    model : GenerativeModel
    neighbourhoods : Neighbourhoods
    sigma : float
        σ, the noise of one neighbourhood sum beyond the recipient, the colluders and the dropouts, in statistics
        units.
    colluders, dropouts : int
        ``--colluders`` and ``--dp-dropouts`` (``share_variance``); the simulator's sums have every member.
    rng : numpy.random.Generator
        The run's seeded noise.
    """

    def __init__(self, model: GenerativeModel, neighbourhoods: Neighbourhoods, sigma: float, colluders: int,
                 rng: np.random.Generator, dropouts: int = 0):
        self.model, self.neighbourhoods, self.rng = model, neighbourhoods, rng
        units = sigma * 2.0**FIXED_POINT_BITS
        self.variances = [share_variance(units, len(m), colluders, dropouts) for m in neighbourhoods.members]
        self._scales = np.sqrt([len(m) * v for m, v in zip(neighbourhoods.members, self.variances)])[:, None]

    def sums(self) -> np.ndarray:
        """One round's noise of every distinct neighbourhood sum (sets, size), in fixed-point units (int64): the sum of
        its members' shares, drawn at once (a rounded Gaussian of their total variance; module docstring)."""
        return np.rint(self.rng.standard_normal((len(self._scales), self.model.size)) * self._scales).astype(np.int64)

    def __call__(self) -> np.ndarray:
        noise = noise_in_statistics(self.model, self.sums())
        sizes = np.array([len(m) for m in self.neighbourhoods.members], dtype=np.float64)
        return (noise / sizes[:, None])[self.neighbourhoods.recipient_set]
