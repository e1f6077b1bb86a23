"""Vertical and hybrid runs in the simulator (crc.core.feature_partition, crc.protocol.vertical): a vertical group
runs centralized RC of the block product exactly; hybrid groups on a complete graph follow centralized RC from the
uniform start (Theorem 1 for groups)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from crc.core.calibration import rc
from crc.core.errors import CRCError
from crc.core.feature_partition import FeaturePartition, feature_blocks, parse_feature_partition
from crc.core.threads import blas_threads
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import prepare_repeat
from crc.protocol.simulator import make_engine, simulate
from crc.protocol.vertical import BestIterate, resolve_partition
from crc.tables.datasets import load_dataset
from crc.topologies import network_factory


@pytest.mark.parametrize("spec, expected", [
    ("vertical", FeaturePartition("vertical", 1, 2)), ("vertical:3", FeaturePartition("vertical", 1, 3)),
    ("hybrid", FeaturePartition("hybrid", 2, 2)), ("hybrid:3", FeaturePartition("hybrid", 3, 3)),
    ("hybrid:2x4", FeaturePartition("hybrid", 2, 4)),
])
def test_partition_specs(spec, expected):
    assert parse_feature_partition(spec) == expected
    assert parse_feature_partition(expected.spec) == expected


@pytest.mark.parametrize("spec", ["vertical:0", "vertical:2x2", "hybrid:1x3", "hybrid:", "vertical:-1", "hybrid:2x"])
def test_malformed_partition_specs_are_refused(spec):
    with pytest.raises(CRCError, match="partition"):
        parse_feature_partition(spec)


def test_feature_blocks_are_a_seeded_disjoint_cover():
    blocks = feature_blocks(30, 3, seed=4)
    assert sorted(j for block in blocks for j in block) == list(range(30))
    assert [len(block) for block in blocks] == [10, 10, 10]
    assert blocks == feature_blocks(30, 3, seed=4) != feature_blocks(30, 3, seed=5)
    with pytest.raises(CRCError, match="^cannot cut 2 features into 3 blocks of at least one feature: give at most 2 blocks$"):
        feature_blocks(2, 3)


def _engine_and_reference(data, model, partition, pooled, algorithm=None, **settings):
    config = SimulationConfig.from_settings(data=data, model=model, partition=partition, pooled_size=pooled,
                                            rc_converged=False, algorithm=algorithm)
    dataset = load_dataset(data)
    config = resolve_partition(config, dataset).with_settings(**settings)
    rep = prepare_repeat(dataset, config, 0)
    engine, _ = make_engine(rep, config, network_factory(config.topology))
    return config, rep, engine


def _normalised(stats, model):
    return stats / model.ess(stats)[..., None]


def assert_same_statistics(actual, desired):
    """Equal to 1e-9 of the largest statistic: an entry that nearly cancels is compared on the vector's scale."""
    np.testing.assert_allclose(actual, desired, rtol=1e-9, atol=1e-9 * np.abs(desired).max())


@pytest.mark.parametrize("data, model", [("wdbc", "nb"), ("wdbc", "qda"), ("german", "nb"), ("german", "qda"),
                                         ("penbased", "nb"), ("penbased", "qda"), ("magic", "qda"), ("wdbc", "pc")])
def test_a_vertical_group_runs_centralized_rc_of_the_block_model_round_by_round(data, model):
    config, rep, engine = _engine_and_reference(data, model, "vertical:3", 400)
    split = rep.split
    iterates = []
    rc(split.model, split.phi_train, split.y_train, lr=config.lr, iterations=12, select_best=False,
       callback=lambda _, stats: iterates.append(stats))
    np.testing.assert_allclose(_normalised(engine.stats[0], split.model), _normalised(iterates[0], split.model), rtol=1e-12)
    for t in range(1, 13):
        engine.run(1)
        assert_same_statistics(_normalised(engine.stats[0], split.model), _normalised(iterates[t], split.model))


@pytest.mark.parametrize("model", ["nb", "qda"])
def test_hybrid_groups_on_a_complete_graph_follow_centralized_rc_from_the_uniform_start(model):
    config, rep, engine = _engine_and_reference("wdbc", model, "hybrid:3x2", 420, algorithm="paper", topology="complete",
                                                 start="uniform")
    split = rep.split
    iterates = []
    rc(split.model, split.phi_train, split.y_train, lr=config.lr, iterations=10, select_best=False,
       init=split.model.uniform(engine.ess * config.lr * config.nodes), callback=lambda _, stats: iterates.append(stats))
    for t in range(1, 11):
        aggregated = engine.step()
        assert_same_statistics(_normalised(aggregated, split.model), np.tile(_normalised(iterates[t - 1], split.model), (3, 1)))



def test_the_best_iterate_is_chosen_with_blas_on_one_thread():
    """Its posteriors of every training instance, each round, ran with the machine's BLAS threads, outside the engine's
    limit, and a threaded BLAS on a busy machine stalled them."""
    _, rep, engine = _engine_and_reference("wdbc", "nb", "vertical:2", 400)
    split = rep.split
    best = BestIterate(split.model, split.phi_train, split.y_train, split.parts, engine.stats)
    seen = []
    posteriors = split.model.posteriors
    split.model.posteriors = lambda *args: (seen.append(blas_threads()), posteriors(*args))[1]
    with threadpool_limits(limits=2, user_api="blas"):
        engine.run(2, lambda _, stats: best.offer(stats))
        assert blas_threads() == 2
    assert seen == [1, 1]

def test_a_vertical_run_is_centralized_rc_and_names_its_blocks():
    config = SimulationConfig.from_settings(data="wdbc", model="nb", partition="vertical:3", rc_converged=False)
    results = simulate(config, network_factory(config.topology))
    assert results["crc"]["test_error"] == pytest.approx(results["rc"]["test_error"], abs=1e-12)
    assert results["crc"]["train_error"] == pytest.approx(results["rc"]["train_error"], abs=1e-12)
    assert results["config"]["partition"] == "vertical:3" and results["config"]["peers"] == 3 == results["config"]["blocks"]
    assert results["config"]["nodes"] == 1 and results["config"]["pooled_size"] == 569 - 142
    blocks = results["config"]["block_features"]
    assert sorted(name for block in blocks for name in block) == sorted(f"x{j}" for j in range(1, 31))
    assert 1 - results["crc"]["test_error"] > 0.9 and 0.85 < results["crc"]["test_f1"] <= 1



def test_a_training_size_is_checked_against_the_groups_not_the_nodes():
    """--train-size below --nodes (50 by default, which a vertical or hybrid partition does not use) was refused:
    '--train-size 30 leaves some of the 50 nodes without data'."""
    config = SimulationConfig.from_settings(data="wdbc", partition="vertical:2", pooled_size=30, rc_converged=False)
    results = simulate(config, network_factory(config.topology))
    assert results["config"]["pooled_size"] == 30 and results["config"]["nodes"] == 1
    assert results["crc"]["test_error"] == results["rc"]["test_error"]
    with pytest.raises(CRCError, match="^--train-size 30 is fewer than the 40 groups of partition hybrid:40x2$"):
        simulate(config.with_settings(partition="hybrid:40x2"), network_factory(config.topology))
    with pytest.raises(CRCError, match="^569 instances leave 142 for training, fewer than the 300 groups of partition "
                                       "hybrid:300x2$"):
        simulate(config.with_settings(partition="hybrid:300x2", pooled_size=None, test_size=0.75),
                 network_factory(config.topology))

def test_blocks_can_be_named_and_must_match_the_partition():
    names = (tuple(f"x{j}" for j in range(1, 11)), tuple(f"x{j}" for j in range(11, 31)))
    config = SimulationConfig.from_settings(data="wdbc", partition="vertical:2", feature_blocks=names, rc_converged=False)
    results = simulate(config, network_factory(config.topology))
    assert results["config"]["block_features"] == [list(block) for block in names]
    with pytest.raises(CRCError, match="lists 2 blocks, partition vertical:3 has 3"):
        simulate(config.with_settings(partition="vertical:3"), network_factory(config.topology))
    with pytest.raises(CRCError, match="unknown feature"):
        simulate(config.with_settings(feature_blocks=(("x1", "nope"), names[1])), network_factory(config.topology))


def test_vertical_options_that_do_not_apply_are_refused():
    with pytest.raises(CRCError, match="needs a vertical or hybrid"):
        SimulationConfig.from_settings(feature_blocks=(("x1",),)).validate()
    with pytest.raises(CRCError, match="products split by feature block"):
        simulate(SimulationConfig.from_settings(data="wdbc", model="pc", structure="region-graph", partition="vertical:2",
                                                rc_converged=False), network_factory("tree"))
