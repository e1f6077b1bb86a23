"""An empirical lower bound on ε from a distinguishing attack (Jagielski et al. 2020; Nasr et al. 2021).

An attacker scores every trial; trials run with the canary (positives) or without it (negatives). For a
threshold τ, an (ε, δ)-DP mechanism forces TPR <= e^ε FPR + δ and (1 - FPR) <= e^ε (1 - TPR) + δ, so
ε >= max(ln((TPR - δ) / FPR), ln((1 - FPR - δ) / (1 - TPR))). With finitely many trials the rates are
estimates: the bound takes the Clopper-Pearson lower end of the rate in the numerator and the upper end of the
one in the denominator (each at confidence 1 - α/2, so both hold together with probability 1 - α). The
threshold is chosen on one half of the trials and the bound computed on the other half, so choosing it does not
bias the bound.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta


def clopper_pearson(successes, trials: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided Clopper-Pearson interval (low, high) of a rate at confidence 1 - ``alpha`` (element-wise over
    ``successes``)."""
    k = np.asarray(successes, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        low = np.where(k == 0, 0.0, beta.ppf(alpha / 2, np.maximum(k, 1), trials - k + 1))
        high = np.where(k == trials, 1.0, beta.ppf(1 - alpha / 2, k + 1, np.maximum(trials - k, 1)))
    return low, high


def _bounds(positives: np.ndarray, negatives: np.ndarray, thresholds: np.ndarray, delta: float, alpha: float) -> np.ndarray:
    """The ε lower bound (thresholds,) of the test "score >= threshold" for every threshold, both directions,
    0 where neither gives one."""
    tp = len(positives) - np.searchsorted(np.sort(positives), thresholds, side="left")
    fp = len(negatives) - np.searchsorted(np.sort(negatives), thresholds, side="left")
    tpr_low, _ = clopper_pearson(tp, len(positives), alpha)
    _, fpr_high = clopper_pearson(fp, len(negatives), alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        forward = np.log(np.maximum(tpr_low - delta, 0) / fpr_high)
        backward = np.log(np.maximum(1 - fpr_high - delta, 0) / (1 - tpr_low))
    return np.nan_to_num(np.maximum(np.maximum(forward, backward), 0.0), nan=0.0, posinf=0.0, neginf=0.0)


def epsilon_lower_bound(positives: np.ndarray, negatives: np.ndarray, delta: float, alpha: float = 0.05) -> dict:
    """The empirical ε (a lower bound holding with probability 1 - ``alpha``) of an attacker's scores on trials
    with (``positives``) and without (``negatives``) the canary: the threshold chosen on the first half of each,
    the bound computed on the second half, with that half's rates at the threshold."""
    positives, negatives = np.asarray(positives, dtype=np.float64), np.asarray(negatives, dtype=np.float64)
    half_p, half_n = len(positives) // 2, len(negatives) // 2
    choose_p, choose_n = positives[:half_p], negatives[:half_n]
    thresholds = np.unique(np.concatenate([choose_p, choose_n, [np.inf]]))
    chosen = thresholds[np.argmax(_bounds(choose_p, choose_n, thresholds, delta, alpha))]
    held_p, held_n = positives[half_p:], negatives[half_n:]
    return {"epsilon": float(_bounds(held_p, held_n, np.array([chosen]), delta, alpha)[0]), "threshold": float(chosen),
            "tpr": float(np.mean(held_p >= chosen)), "fpr": float(np.mean(held_n >= chosen)),
            "trials": len(held_p) + len(held_n), "alpha": alpha}
