"""A peer's releases in-process: the privacy noise it continues from, and what a Byzantine peer puts on the wire."""

from __future__ import annotations

import numpy as np
import pytest

from crc.core.attacks import PEER_ATTACKS
from crc.core.models import make_model
from crc.nodes.release import Release
from crc.protocol.accountant import plan
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
