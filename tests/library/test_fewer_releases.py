"""``--release-every k``: a peer takes its local step and releases in rounds 1, k + 1, ... only; the rounds between
average public values, and the accountant composes ceil(rounds / k) releases."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from crc.core.engine import CRCEngine, LocalData, default_ess
from crc.core.errors import CRCError, OptionConflict
from crc.core.models import make_model
from crc.core.privacy import is_release, release, release_count
from crc.protocol import SimulationConfig
from crc.protocol.accountant import epsilon_spent, plan, plan_exact
from crc.protocol.rules import check_release_every
from crc.topologies import averaging_matrix
from support.tables import mixed_columns, prepared

GRAPH = nx.random_labeled_tree(8, seed=3)


def test_releases_are_the_first_round_and_every_kth_after_it():
    assert [round_ for round_ in range(10) if is_release(round_, 4)] == [0, 4, 8]
    assert [release_count(rounds, 4) for rounds in (1, 4, 5, 8, 9, 64)] == [1, 1, 2, 2, 3, 16]
    assert release_count(64, 1) == 64


@pytest.mark.parametrize("every", [2, 4, 5, 16])
def test_the_accountant_composes_one_release_every_k_rounds(every):
    model = make_model("nb", prepared(mixed_columns())[0])
    fewer = plan(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=64, release_every=every)
    assert fewer.releases == -(-64 // every) and fewer.release_every == every
    assert fewer.noise_multiplier == plan(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=fewer.releases).noise_multiplier
    assert fewer.noise_multiplier < plan(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=64).noise_multiplier
    assert fewer.epsilon_spent == epsilon_spent(fewer.noise_multiplier, fewer.releases, 1e-5) <= 4.0
    exact = plan_exact(model, epsilon=4.0, delta=1e-5, clip=1.0, rounds=64, release_every=every)
    assert exact.releases == fewer.releases and exact.to_json()["release_every"] == every


def _engine(every: int, rng: np.random.Generator) -> tuple[CRCEngine, np.ndarray]:
    schema, x, y = prepared(mixed_columns())
    model = make_model("nb", schema)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), GRAPH.number_of_nodes())
    mixing = averaging_matrix(GRAPH)
    engine = CRCEngine(model, LocalData.from_parts(model.features(x), y, parts), mixing,
                       ess=default_ess(len(y), len(parts)), release=lambda stats: release(model, stats, 5.0, rng),
                       release_every=every)
    return engine, mixing


def test_between_releases_a_peer_sends_the_average_of_the_public_statistics_only():
    """Rounds 2 and 3 of k = 3 are the closed-neighbourhood averages of what was released (the noisy statistics);
    rounds 1 and 4 take the local step and fresh noise."""
    engine, mixing = _engine(3, np.random.default_rng(1))
    history = [engine.stats.copy()]
    engine.run(4, lambda _, stats: history.append(stats.copy()))
    for t in (2, 3):
        np.testing.assert_allclose(history[t], mixing @ history[t - 1], rtol=1e-12)
    assert not np.allclose(history[4], mixing @ history[3])
    assert not np.allclose(history[1], mixing @ history[0])


def test_rules_refuse_exact_diffusion_and_distributed_noise_with_fewer_releases():
    check_release_every(release_every=1, rounds=1, exact_diffusion=True, dp_noise="distributed")
    with pytest.raises(OptionConflict, match="--release-every needs --no-exact-diffusion"):
        check_release_every(release_every=2, rounds=64, exact_diffusion=True)
    with pytest.raises(OptionConflict, match="--release-every is for --dp-noise local"):
        check_release_every(release_every=2, rounds=64, exact_diffusion=False, dp_noise="distributed")
    with pytest.raises(OptionConflict, match="--release-every is not available to a peer of a vertical or hybrid group"):
        check_release_every(release_every=2, rounds=64, vertical=True)
    with pytest.raises(OptionConflict, match="--release-every needs --no-exact-diffusion"):
        SimulationConfig(release_every=4, algorithm="accelerated").validate()
    with pytest.raises(OptionConflict, match="--release-every needs --classifier local or aggregate"):
        SimulationConfig(release_every=4, algorithm="paper", classifier="averaged").validate()
    with pytest.raises(CRCError, match="--release-every must be at least 1"):
        SimulationConfig(release_every=0, algorithm="paper").validate()
    SimulationConfig(release_every=4, algorithm="paper", dp_epsilon=4.0).validate()
    with pytest.raises(OptionConflict, match=r"--release-every 9 is more than --rounds 8: .* use --release-every 8$"):
        SimulationConfig(rounds=8, release_every=9, algorithm="paper").validate()
    SimulationConfig(rounds=8, release_every=8, algorithm="paper").validate()


def test_fewer_releases_without_an_algorithm_choose_the_papers_as_dp_epsilon_does():
    """A newcomer's `crc simulate --release-every 4` runs (the paper's averaging) instead of refusing the default."""
    config = SimulationConfig(release_every=4)
    config.validate()
    assert (config.algorithm, config.exact_diffusion, config.classifier) == ("paper", False, "local")
    assert SimulationConfig(release_every=1).algorithm == "accelerated"


def test_the_simulator_records_the_releases_it_planned():
    config = SimulationConfig(rounds=10, release_every=4, algorithm="paper", dp_epsilon=4.0)
    model = make_model("nb", prepared(mixed_columns())[0])
    privacy = config.privacy(model)
    assert (privacy.releases, privacy.release_every) == (3, 4)
