"""The plausibility bounds (crc.core.plausibility): honest runs never violate them, crafted extremes are refused."""

import numpy as np
import pytest

from crc.core import acceleration as accel
from crc.core.attacks import poison
from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.models import make_model
from crc.core.plausibility import NEGATIVE_COUNT_MASS, count_slack, plausible, problem
from crc.core.privacy import release
from crc.topologies import averaging_matrix, random_tree_graph, ring_graph
from support.tables import mixed_columns, prepared

ALGORITHMS = {"paper": accel.PAPER, "accelerated": accel.Acceleration(exact_diffusion=True)}


def negative_mass(model, stats: np.ndarray, ess: float) -> np.ndarray:
    counts = model.table(stats)[..., :, model.layout.columns("count")]
    return -np.minimum(counts, 0.0).sum(axis=(-1, -2)) / ess


@pytest.mark.parametrize("kind", ["nb", "qda", "pc"])
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("seed", [0, 1])
def test_honest_runs_never_violate_the_bounds(kind, algorithm, seed):
    """A property over seeded runs: every peer's statistics after every round pass the wire's check (label-sorted
    data, where counts dip furthest; a tree and a ring), and stay far inside the negative-count bound."""
    schema, x, y = prepared(mixed_columns(240, seed=seed))
    model = make_model(kind, schema)
    order = np.argsort(y, kind="stable")  # label drift: a peer holds mostly one class
    n = 8
    parts = np.array_split(order, n)
    for graph in (random_tree_graph(n, seed=seed), ring_graph(n)):
        ess = default_ess(len(y), n)
        engine = CRCEngine(model, LocalData.from_parts(model.features(x), y, parts), averaging_matrix(graph), ess=ess,
                           iterations=2 if algorithm == "accelerated" else 1, acceleration=ALGORITHMS[algorithm])
        worst = 0.0

        def check(round_, stats, engine=engine):
            nonlocal worst
            assert plausible(engine.stats, model, engine.ess).all(), round_
            worst = max(worst, float(negative_mass(model, engine.stats, engine.ess).max()))

        engine.run(24, check)
        assert worst < NEGATIVE_COUNT_MASS / 4


def test_honest_private_releases_pass_with_the_privacy_slack():
    schema, x, y = prepared(mixed_columns(240))
    model = make_model("nb", schema)
    n, sigma = 8, 5.0
    ess = default_ess(len(y), n)
    rng = np.random.default_rng(0)
    engine = CRCEngine(model, LocalData.from_parts(model.features(x), y, np.array_split(np.arange(len(y)), n)),
                       averaging_matrix(ring_graph(n)), ess=ess, release=lambda s: release(model, s, sigma, rng))
    slack = count_slack(model, sigma)
    engine.run(16, lambda round_, stats: None)
    assert plausible(engine.stats, model, ess, slack=slack).all()


def test_issue_29s_extreme_frame_is_refused_and_the_extreme_attack_is_plausible():
    schema, _, _ = prepared(mixed_columns())
    model = make_model("nb", schema)
    ess = 400.0
    honest = model.uniform(ess)
    issue = honest.copy()
    table = model.table(issue)
    table[:, model.layout.columns("count")] = np.array([[0.99e4 * ess], [-0.99e4 * ess], [ess]])
    table[:, model.layout.columns("sum")] = 5e29 * ess * np.array([[1.0], [-1.0], [1.0]])
    assert problem(issue, model, ess)[0] == "counts"
    extreme = poison(model, honest, "extreme", np.random.default_rng(0))
    assert problem(extreme, model, ess) is None  # the most extreme statistics that still pass
    assert np.abs(extreme).max() >= 1e29 * ess and model.table(extreme)[:, 0].min() < -0.99 * ess
    beyond = extreme.copy()
    model.table(beyond)[0, 0] += 0.01 * ess
    model.table(beyond)[1, 0] -= 0.01 * ess
    assert problem(beyond, model, ess)[0] == "counts"
