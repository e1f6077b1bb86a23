"""FedPC's one-pass baseline (crc.protocol.fedpc) on vertical and hybrid partitions."""

import numpy as np

from crc.core.models import make_model
from crc.core.models.blocks import block_schema
from crc.protocol.config import SimulationConfig
from crc.protocol.fedpc import fedpc_log_joint
from crc.protocol.repeat import prepare_repeat
from crc.protocol.vertical import resolve_partition
from crc.tables.datasets import load_dataset


def _repeat(partition):
    dataset = load_dataset("wdbc")
    config = resolve_partition(SimulationConfig.from_settings(data="wdbc", partition=partition, rc_converged=False), dataset)
    return prepare_repeat(dataset, config, 0)


def test_with_one_cluster_a_vertical_fedpc_classifies_with_the_label_holder_s_features_alone():
    """Without clusters the root is one product: the label-free blocks add the same log-density to every class."""
    rep = _repeat("vertical:3")
    split = rep.split
    scores = fedpc_log_joint(rep, split.x_train, [split.x_train], clusters=1)[0]
    block = split.model.blocks[0]
    alone = make_model("nb", block_schema(split.model.schema, block))
    phi = alone.features(split.x_train[:, block])
    expected = alone.log_joint(alone.theta(alone.fit_ml(phi, split.y_train)), phi)
    np.testing.assert_array_equal(scores.argmax(axis=1), expected.argmax(axis=1))
    np.testing.assert_allclose(np.diff(scores, axis=1), np.diff(expected, axis=1), rtol=1e-9, atol=1e-9)


def test_clusters_couple_the_blocks_in_a_vertical_fedpc():
    rep = _repeat("vertical:2")
    split = rep.split
    one, two = (fedpc_log_joint(rep, split.x_train, [split.x_train], clusters=k)[0] for k in (1, 2))
    assert np.abs(np.diff(one) - np.diff(two)).max() > 0.1  # the clustered blocks move the classes' log-odds
    assert np.all(np.isfinite(two))


def test_in_a_hybrid_fedpc_only_the_label_holders_block_decides_the_class():
    """Every block is held by several groups: one product of sum nodes, and only block 0's sum holds the label."""
    rep = _repeat("hybrid:2")
    split = rep.split
    x = split.x_train[:50].copy()
    shuffled = x.copy()
    for block in split.model.blocks[1:]:
        shuffled[:, block] = shuffled[::-1][:, block]
    scores, moved = fedpc_log_joint(rep, split.x_train, [x, shuffled])
    np.testing.assert_allclose(np.diff(scores, axis=1), np.diff(moved, axis=1), rtol=1e-9, atol=1e-9)
