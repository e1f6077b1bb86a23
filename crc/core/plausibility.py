"""Plausibility of a neighbour's statistics: the bounds a receiver holds every statistics vector to, before any
aggregation rule sees it. The one rule that the wire (``crc.nodes.wire.check_statistics``) applies to every frame
and that the simulator's attack model applies to what a Byzantine peer sends (``crc.core.attacks``).

What the schema and the ESS allow, with the derivations (m0: the receiver's ESS; a *row* is a class, or a (class,
component) pair for circuits; ``count`` is the layout's count column):

* **Class-count total** ``sum_rows count = m0`` to ``STATS_ESS_TOLERANCE``: exact for honest peers. Every start
  has ESS m0; one LRC step adds ``sum_i (y_i - p_i)`` to the counts, whose total is 0 since both y_i and p_i sum
  to 1; averaging, clipping and the robust rules keep it (the coordinate-wise rules by rescaling,
  ``crc.core.aggregation``); privacy noise is drawn with centred counts.
* **Negative count mass** ``sum_rows max(0, -count) <= NEGATIVE_COUNT_MASS x m0 (+ the privacy slack)``. Counts
  *can* be negative after calibration: one step lowers a row's count by ``sum_i p_i(row)``, up to the peer's local
  instances, and exact diffusion (the default algorithm) extrapolates ``psi + x - psi_previous``. Measured over
  honest runs (letter and penbased, naive Bayes, QDA and circuits, the paper's and the accelerated algorithm, iid
  and label partitions, 20 peers on a tree, 64 rounds, 2 repeats: ``results/robust/honest_counts.py``, output in
  results/robust/honest_counts.txt): the lowest count was -0.036 m0 and the largest negative mass 0.038 m0
  (accelerated, letter, the mixture circuit under label drift); the paper's algorithm never went below 0. The bound
  is 26 times that: a derivation gives no tighter bound that holds for every run (a step can lower a count by up to
  the local data size, which the receiver does not know), so it is a plausibility bound, and
  tests/library/test_plausibility.py checks it on honest runs. With the total m0, it bounds every count to
  ``[-m0, 2 m0]``: the issue's counts of +-0.99e4 m0 that cancel are refused.
* **Magnitude** ``|value| <= MAX_RELATIVE_MAGNITUDE x m0`` and ``|count| <= MAX_COUNT_MAGNITUDE x m0``:
  overflow guards, not data bounds. Continuous features are standardized but not clipped (without ``--clip``
  under privacy they are unbounded), and a sum or sum of squares after calibration is a signed weighted sum of
  them, so no tighter bound follows from the schema: a neighbour's sums are left to the aggregation rule.
* **Parameters** ``theta(s)`` computes and is finite.

Privacy adds Gaussian noise of standard deviation sigma to every count (centred over the counts): the negative
count mass then gets ``PRIVACY_SIGMAS x sigma`` per row of slack (``count_slack``).
"""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel

STATS_ESS_TOLERANCE = 1e-9
"""Relative tolerance on the statistics' class-count total (honest peers drift by rounding only, about 1e-14)."""
MAX_RELATIVE_MAGNITUDE = 1e30
"""Largest |value| accepted, as a multiple of m0: honest statistics of standardized data are within a few powers of
ten of m0; beyond this, sums of a neighbourhood's statistics (and their squares in theta) could overflow."""
MAX_COUNT_MAGNITUDE = 1e4
"""Largest |class count| accepted, as a multiple of m0 (with privacy's slack the negative-mass bound can be wider)."""
NEGATIVE_COUNT_MASS = 1.0
"""Largest total of the negative class counts, as a multiple of m0 (honest runs: at most 0.038 m0, measured)."""
PRIVACY_SIGMAS = 8.0
"""Privacy slack of the negative count mass: this many noise standard deviations per row."""
SECURE_AGGREGATION_TERM_LIMIT = 2.0**34
"""Largest |value| secure aggregation's fixed point encodes (``crc.nodes.secure_aggregation``); a peer that
aggregates securely accepts no statistics beyond it, so that its own stay within it too."""


def count_slack(model: GenerativeModel, sigma: float | None) -> float:
    """The negative count mass allowed beyond ``NEGATIVE_COUNT_MASS x m0`` for privacy noise of ``sigma`` (None or 0:
    no privacy)."""
    return 0.0 if not sigma else PRIVACY_SIGMAS * float(sigma) * model.layout.n_classes


def problem(stats: np.ndarray, model: GenerativeModel, ess: float, *, secure_aggregation: bool = False,
            slack: float = 0.0) -> tuple[str, str] | None:
    """Why finite ``stats`` (size,) are implausible for a receiver of ESS ``ess``, as (cause, detail), or None.

    Causes: ``magnitude`` (beyond the overflow guards, or beyond what secure aggregation encodes when
    ``secure_aggregation``), ``counts`` (negative class counts beyond their bound, ``slack`` included),
    ``stats-ess`` (the class counts do not total the ESS), ``theta`` (no finite parameters)."""
    largest = float(np.abs(stats).max(initial=0.0))
    if largest > MAX_RELATIVE_MAGNITUDE * ess:
        return "magnitude", f"a value of magnitude {largest:.3g}, more than {MAX_RELATIVE_MAGNITUDE:g} x the ESS"
    if secure_aggregation and not largest < SECURE_AGGREGATION_TERM_LIMIT:
        return "magnitude", (f"a value of magnitude {largest:.3g}, beyond the {SECURE_AGGREGATION_TERM_LIMIT:g} that secure "
                             "aggregation encodes")
    counts = model.table(stats)[..., :, model.layout.columns("count")]
    largest_count = float(np.abs(counts).max(initial=0.0))
    if largest_count > MAX_COUNT_MAGNITUDE * ess:
        return "magnitude", f"a class count of magnitude {largest_count:.3g}, more than {MAX_COUNT_MAGNITUDE:g} x the ESS"
    negative = float(-np.minimum(counts, 0.0).sum())
    if negative > NEGATIVE_COUNT_MASS * ess + slack:
        return "counts", (f"negative class counts totalling {-negative:.3g}, beyond -{NEGATIVE_COUNT_MASS:g} x the ESS"
                          + (f" - {slack:.3g} (privacy)" if slack else ""))
    total = float(counts.sum(axis=(-1, -2)))  # model.ess(stats), from the counts already taken
    if not abs(total - ess) <= STATS_ESS_TOLERANCE * ess:
        return "stats-ess", f"class counts total {total!r}, the ESS is {ess!r}"
    try:
        with np.errstate(all="ignore"):
            theta = model.theta(stats)
            finite = all(np.all(np.isfinite(value)) for value in theta.values())
    except (CRCError, ArithmeticError, np.linalg.LinAlgError) as exc:
        return "theta", f"no parameters from these statistics ({exc})"
    if not finite:
        return "theta", "the parameters from these statistics are not finite"
    return None


def plausible(stats: np.ndarray, model: GenerativeModel, ess: float, *, slack: float = 0.0) -> np.ndarray:
    """For each row of ``stats`` (k, size): whether it is finite and passes ``problem`` (bool (k,))."""
    return np.array([bool(np.all(np.isfinite(row))) and problem(row, model, ess, slack=slack) is None for row in stats],
                    dtype=bool)
