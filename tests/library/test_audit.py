"""The privacy audit's estimator: Clopper-Pearson intervals and the empirical ε lower bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crc.protocol.accountant import epsilon_spent
from crc.protocol.audit import clopper_pearson, epsilon_lower_bound


def test_clopper_pearson_has_the_closed_form_ends():
    n, alpha = 200, 0.05
    assert clopper_pearson(0, n, alpha) == (0.0, pytest.approx(1 - (alpha / 2) ** (1 / n)))
    assert clopper_pearson(n, n, alpha) == (pytest.approx((alpha / 2) ** (1 / n)), 1.0)
    lows, highs = clopper_pearson(np.array([0, n]), n, alpha)
    assert lows[0] == 0.0 and highs[1] == 1.0
    low, high = clopper_pearson(50, n, alpha)
    assert low < 0.25 < high and high - low < 0.13


def test_perfectly_separated_scores_give_the_largest_bound_the_trials_allow():
    n = 1000
    found = epsilon_lower_bound(np.ones(n), np.zeros(n), delta=1e-5)
    held = n // 2
    expected = math.log(((0.025) ** (1 / held) - 1e-5) / (1 - 0.025 ** (1 / held)))
    assert found["epsilon"] == pytest.approx(expected) and found["tpr"] == 1.0 and found["fpr"] == 0.0
    assert found["epsilon"] > 4.5


def test_indistinguishable_scores_give_a_bound_near_zero():
    rng = np.random.default_rng(0)
    assert epsilon_lower_bound(rng.normal(size=4000), rng.normal(size=4000), delta=1e-5)["epsilon"] < 0.3


@pytest.mark.parametrize("z", [0.5, 1.0, 2.0])
def test_the_bound_on_a_gaussian_mechanism_is_positive_and_below_its_true_epsilon(z):
    rng = np.random.default_rng(1)
    positives, negatives = rng.normal(1 / z, 1, size=20000), rng.normal(0, 1, size=20000)
    found = epsilon_lower_bound(positives, negatives, delta=1e-5)["epsilon"]
    assert 0 < found <= epsilon_spent(z, 1, 1e-5)
