"""Differential privacy of what a peer releases: clipping, the sensitivity of one release, and the Gaussian
mechanism that keeps the equivalent sample size exact.

What is released. Every round a peer computes ``s_v(t) = LRC(a_v(t))`` from its aggregate ``a_v(t)`` and
releases it: it sends it to its neighbours, or, after the last round, writes it as its model. With privacy
on, the released value is ``s_v(t) + N`` (Gaussian noise), and the peer *continues from the released value*:
its own statistics, its neighbours' and its momentum memory are then all released values, so the aggregate
is public and each round touches the private data once, through one LRC step.

Sensitivity. One LRC step from a public aggregate ``a`` is ``a + sum_i s({x_i}, e_{y_i} - p_a(x_i))``, where
``s({x}, u)`` is one instance's statistics weighted by ``u`` (r,) (linear in ``u``; its E-step, for circuits,
uses the public ``theta(a)``). Replacing instance ``(x, y)`` by ``(x', y')`` changes the release by
``s({x}, u) - s({x'}, u')`` with ``u = e_y - p(x)``. Since ``p`` is a probability vector,
``||u||^2 = (1 - p_y)^2 + sum_{c != y} p_c^2 <= 2 (1 - p_y)^2 <= 2``; every model bounds
``||s({x}, u)|| <= G ||u||`` for standardized continuous values clipped to ``[-B, B]``
(``GenerativeModel.record_bound``). Hence the L2 sensitivity of one release is

    Delta = 2 sqrt(2) G(B).

The change lies in the subspace where the class counts (the ``count`` column of every row) sum to zero,
because ``sum_c u_c = 0``: that is why LRC keeps the ESS. The noise is drawn isotropic *within that
subspace* (a standard normal vector whose count coordinates are centred), so the released statistics keep the
ESS exactly and the mechanism is the Gaussian mechanism on the subspace, with the same privacy for the same
``sigma / Delta``: the direction left out (the total count) does not depend on the data. ``release`` draws it in
floating point (the simulator's noise); a real peer draws the discrete Gaussian on the fixed point instead, exact
(``crc.core.distributed_noise.exact_release``).

Fewer releases. With ``release_every`` k a peer takes its local step and releases only in rounds 1, k + 1, 2k + 1,
...; in the rounds between its statistics are the average of its closed neighbourhood's last public values (its
own last release and what its neighbours sent), post-processing that costs no privacy. The accountant then composes
``release_count(rounds, k)`` = ceil(rounds / k) releases, so the same ε needs about √k less noise per release, and
the k - 1 averaging rounds spread each release's noise over a wider neighbourhood before the next local step
(results/privacy/releases.md).

Combinations. Only one LRC step per round has this bound (a second step's ``theta`` depends on the first
step's data term), so privacy needs ``iters = 1``. A local start releases the peer's scaled ML statistics,
and the safeguard chooses a step by the local loss, both data-dependent: both are refused with privacy.
Momentum is allowed (its memory holds released aggregates), as are the uniform start and any aggregation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crc.core.acceleration import Acceleration
from crc.core.aggregation import AGGREGATIONS, rule_of
from crc.core.errors import CRCError, OptionConflict
from crc.core.models.base import GenerativeModel
from crc.core.schema import Schema

NOISES = ("local", "distributed")
DEFAULT_DELTA = 1e-5
DEFAULT_CLIP = 1.0
"""Bound B on standardized continuous values, in standard deviations of the shared standardization. Naive Bayes'
sensitivity grows like B^2 (QDA's too); on ``magic`` at ε = 16 the test gap was 0.02 with B = 0.5 or 1 and 0.16
with B = 1.5 (results/privacy.md)."""


@dataclass(frozen=True)
class Privacy:
    """The privacy of a run: target (epsilon, delta), clipping bound B, releases per peer and the noise they need.

    Attributes
    ----------
    epsilon, delta : float
        The (ε, δ) target, over all of a peer's releases.
    clip : float
        B, in standardized units.
    releases : int
        Releases per peer (one per round: the messages and the final model).
    sensitivity : float
        Δ, the L2 sensitivity of one release.
    noise_multiplier : float
        z = σ / Δ, solved for so that ``releases`` compositions spend at most ε.
    epsilon_spent : float
        The accountant's ε for ``releases`` releases at z (≤ ``epsilon``).
    accountant : str
        ``pld`` (the exact privacy loss of composed Gaussians), ``rdp`` (Rényi DP) or ``zcdp`` (sums of discrete
        Gaussians), ``crc.protocol.accountant``.
    noise : str
        ``local`` (every peer noises its own release) or ``distributed`` (shares through secure aggregation,
        ``crc.core.distributed_noise``; ``sigma`` is then the noise of one neighbourhood sum).
    colluders : int
        Distributed noise: members besides the recipient whose shares may be known to it.
    dropouts : int
        Distributed noise: members a request set may leave out, their shares missing from the sum.
    sums_per_round : int
        Releases of a peer per round (distributed noise: the most distinct neighbourhood sums holding a peer).
    release_every : int
        k: a peer releases in rounds 1, k + 1, 2k + 1, ... only (``releases`` = ceil(rounds / k)).
    """

    epsilon: float
    delta: float
    clip: float
    releases: int
    sensitivity: float
    noise_multiplier: float
    epsilon_spent: float
    accountant: str = "pld"
    noise: str = "local"
    colluders: int = 0
    dropouts: int = 0
    sums_per_round: int = 1
    release_every: int = 1

    @property
    def sigma(self) -> float:
        """Standard deviation of the noise on each coordinate of a release."""
        return self.noise_multiplier * self.sensitivity

    def to_json(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta, "clip": self.clip, "rounds": self.releases,
                "sensitivity": self.sensitivity, "noise_multiplier": self.noise_multiplier, "sigma": self.sigma,
                "epsilon_spent": self.epsilon_spent, "accountant": self.accountant, "noise": self.noise,
                "colluders": self.colluders, "dropouts": self.dropouts, "sums_per_round": self.sums_per_round,
                "release_every": self.release_every}


def check_settings(*, epsilon: float | None, delta: float, clip: float, iterations: int, acceleration: Acceleration,
                   noise: str = "local", colluders: int = 0, dropouts: int = 0, aggregate: str = "mean") -> None:
    """A CRCError naming the first privacy setting out of range, or an OptionConflict (a usage error on the command
    line) naming one combined with an option privacy cannot cover (that
    distributed noise needs secure aggregation is a rule between options, ``crc.protocol.rules``). The ``aggregate``
    rule ``screened`` (and ``robust``, which is it) admits each neighbour's statistics by a test on the peer's own
    data (``crc.core.screening``), so what it sends in a round that only averages (``release_every``), noiseless, and
    the start of its noisy step otherwise, depend on that data outside the accountant."""
    if epsilon is None:
        if noise != "local":
            raise OptionConflict("--dp-noise distributed needs --dp-epsilon")
        return
    ranges = [
        (noise in NOISES, f"--dp-noise must be one of {', '.join(NOISES)}, got {noise!r}"),
        (colluders >= 0, f"--colluders must be at least 0, got {colluders}"),
        (dropouts >= 0, f"--dp-dropouts must be at least 0, got {dropouts}"),
        (math.isfinite(epsilon) and epsilon > 0, f"--dp-epsilon must be a positive number, got {epsilon}"),
        (0 < delta < 1, f"--dp-delta must be in (0, 1), got {delta}"),
        (math.isfinite(clip) and clip > 0, f"--clip must be a positive number, got {clip}"),
    ]
    conflicts = [
        (noise != "distributed" or acceleration.classifier == "aggregate",
         "--dp-noise distributed needs --classifier aggregate: a peer's own statistics are never released, its "
         "classifier is its last (noisy) aggregate"),
        (iterations == 1, f"--dp-epsilon needs --iters 1 (got {iterations}): only one local step per round has a "
                          "bounded sensitivity"),
        (acceleration.start == "uniform", "--dp-epsilon needs --start uniform: a local start releases the peer's own "
                                          "statistics"),
        (not acceleration.safeguard, "--dp-epsilon cannot be combined with --safeguard: the safeguard picks a step by "
                                     "the local loss, a data-dependent choice; use --momentum alone"),
        (aggregate not in AGGREGATIONS or rule_of(aggregate) != "screened",
         "--dp-epsilon cannot be combined with --aggregate screened (or robust): it admits a neighbour's statistics by a "
         "test on the peer's own data, so the aggregate it sends in a round that only averages, and steps from, "
         "depends on that data outside the accountant; use --aggregate clipped, median, trimmed or geomedian"),
        (not acceleration.exact_diffusion, "--dp-epsilon cannot be combined with --exact-diffusion (or --algorithm accelerated): "
                                           "its correction sends the previous local steps again, which the accountant "
                                           "does not cover; use --momentum"),
    ]
    for checks, error in ((ranges, CRCError), (conflicts, OptionConflict)):
        for ok, message in checks:
            if not ok:
                raise error(message)


def is_release(round_: int, every: int) -> bool:
    """Whether round ``round_`` (0 for the first) takes the local step and releases, with a release every ``every``
    rounds (the others only average public values)."""
    return round_ % every == 0


def release_count(rounds: int, every: int) -> int:
    """The releases of a peer in its first ``rounds`` rounds, one every ``every`` rounds from the first:
    ceil(rounds / every)."""
    return -(-rounds // every)


def clip_standardized(schema: Schema, x: np.ndarray, bound: float) -> np.ndarray:
    """A copy of standardized instances ``x`` (m, d) with the continuous columns clipped to [-bound, bound]
    (missing cells stay missing)."""
    out = np.array(x, dtype=np.float64, copy=True)
    columns = list(schema.continuous)
    out[:, columns] = np.clip(out[:, columns], -bound, bound)
    return out


def sensitivity(model: GenerativeModel, clip: float) -> float:
    """Δ = 2 sqrt(2) G(B): the largest L2 change of one release when one local instance is replaced."""
    return 2.0 * math.sqrt(2.0) * model.record_bound(clip)


def centre_counts(model: GenerativeModel, values: np.ndarray, total: float | np.ndarray = 0.0) -> np.ndarray:
    """``values`` (..., size) with their class counts shifted equally, in place, to add up to ``total`` (noise: 0,
    its projection onto the subspace where the counts sum to 0; a noisy sum of statistics: its public ESS; a batch's
    totals of shape (..., 1, 1)); returned."""
    counts = model.table(values)[..., :, model.layout.columns("count")]  # a view into ``values``
    counts -= (counts.sum(axis=(-1, -2), keepdims=True) - total) / (counts.shape[-1] * counts.shape[-2])
    return values


def ess_preserving_noise(model: GenerativeModel, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Standard normal noise of shape (..., size), projected onto the subspace where the class counts sum to 0."""
    return centre_counts(model, rng.standard_normal(shape + (model.size,)))


def release(model: GenerativeModel, stats: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``stats`` (..., size) plus ESS-preserving Gaussian noise of standard deviation ``sigma`` per coordinate."""
    if sigma < 0 or not math.isfinite(sigma):
        raise CRCError(f"noise scale must be a finite non-negative number, got {sigma}")
    return stats + sigma * ess_preserving_noise(model, stats.shape[:-1], rng)
