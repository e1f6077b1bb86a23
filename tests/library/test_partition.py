import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crc.core.errors import CRCError
from crc.core.partition import PARTITIONS, design_matrix, first_principal_component, local_sizes, partition
from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory


def pooled(m=600, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(n_classes, size=m)
    design = rng.normal(size=(m, 3)) + y[:, None]
    return y, design


def assert_uses_every_instance_once(parts, m):
    together = np.concatenate(parts)
    assert len(together) == m and np.array_equal(np.sort(together), np.arange(m))


@pytest.mark.parametrize("kind", PARTITIONS)
@pytest.mark.parametrize("skew", [0.0, 1.0])
def test_every_partition_uses_each_instance_once_with_the_asked_sizes(kind, skew):
    y, design = pooled()
    sizes = local_sizes(len(y), 12, skew=skew, rng=np.random.default_rng(1))
    parts = partition(kind, y, sizes, design=design, alpha=0.3, rng=np.random.default_rng(2))
    assert_uses_every_instance_once(parts, len(y))
    assert [len(p) for p in parts] == sizes.tolist()


@settings(max_examples=60, deadline=None)
@given(total=st.integers(1, 500), nodes=st.integers(1, 60), skew=st.sampled_from([0.0, 0.5, 2.0]))
def test_local_sizes_sum_to_the_pooled_size_and_are_positive(total, nodes, skew):
    if total < nodes:
        with pytest.raises(CRCError, match=f"^cannot share {total} training instances over {nodes} nodes with at least one "
                                           f"each: give at most {total} nodes, or more training instances$"):
            local_sizes(total, nodes, skew=skew)
        return
    sizes = local_sizes(total, nodes, skew=skew, rng=np.random.default_rng(0))
    assert sizes.sum() == total and sizes.min() >= 1 and len(sizes) == nodes
    if skew == 0:
        assert sizes.max() - sizes.min() <= 1


def test_skewed_sizes_are_unequal():
    sizes = local_sizes(5000, 50, skew=1.0, rng=np.random.default_rng(0))
    assert sizes.max() > 3 * sizes.min()


def test_label_partition_gives_nearly_every_node_a_single_class():
    y, design = pooled(m=1000, n_classes=4)
    parts = partition("label", y, local_sizes(1000, 50), design=design)
    classes_per_node = [len(np.unique(y[p])) for p in parts]
    # A chunk straddles two classes only at the 3 class boundaries.
    assert max(classes_per_node) <= 2 and sum(c > 1 for c in classes_per_node) <= 3


def test_covariate_partition_cuts_the_principal_component_into_contiguous_chunks():
    y, design = pooled()
    score = first_principal_component(design)
    parts = partition("covariate", y, local_sizes(len(y), 10), design=design)
    for left, right in zip(parts, parts[1:]):
        assert score[left].max() <= score[right].min()


def test_joint_partition_sorts_by_class_then_component():
    y, design = pooled()
    score = first_principal_component(design)
    order = np.concatenate(partition("joint", y, local_sizes(len(y), 10), design=design))
    assert np.all(np.diff(y[order]) >= 0)
    for k in np.unique(y):
        assert np.all(np.diff(score[order][y[order] == k]) >= 0)


def test_principal_component_follows_the_direction_of_largest_variance():
    rng = np.random.default_rng(0)
    design = np.column_stack([10 * rng.normal(size=500), rng.normal(size=500)])
    score = first_principal_component(design)
    assert abs(np.corrcoef(score, design[:, 0])[0, 1]) > 0.99


def test_dirichlet_concentration_controls_label_skew():
    y, design = pooled(m=2000, n_classes=4)
    sizes = local_sizes(2000, 40)

    def mean_majority_share(alpha):
        parts = partition("dirichlet", y, sizes, alpha=alpha, rng=np.random.default_rng(3))
        return np.mean([np.bincount(y[p], minlength=4).max() / len(p) for p in parts])

    assert mean_majority_share(0.05) > 0.8
    assert mean_majority_share(100.0) < 0.4


def test_design_matrix_one_hot_encodes_discrete_and_zeroes_missing(mixed):
    schema, x, _ = mixed
    x = x[:5].copy()
    x[0, schema.continuous[0]] = np.nan
    x[1, schema.discrete[0]] = np.nan
    design = design_matrix(schema, x)
    n_columns = len(schema.continuous) + sum(len(schema.features[j].categories) for j in schema.discrete)
    assert design.shape == (5, n_columns) and np.all(np.isfinite(design))
    assert design[0, 0] == 0.0
    one_hot_sums = design[:, len(schema.continuous):].sum(axis=1)
    assert one_hot_sums[1] == len(schema.discrete) - 1 and np.all(one_hot_sums[2:] == len(schema.discrete))


def test_partitions_need_what_they_use():
    y, _ = pooled(m=100)
    with pytest.raises(CRCError, match="training features"):
        partition("covariate", y, local_sizes(100, 4))
    with pytest.raises(CRCError, match="sum"):
        partition("iid", y, [50, 49])
    with pytest.raises(CRCError, match="unknown partition"):
        partition("sorted", y, local_sizes(100, 4))
    with pytest.raises(CRCError, match="alpha"):
        partition("dirichlet", y, local_sizes(100, 4), alpha=0.0)


def test_centralized_errors_do_not_depend_on_the_partition():
    base = SimulationConfig(data="twonorm", nodes=8, local_size=25, rounds=3, repeats=2, rc_converged=False)
    network = network_factory("tree")
    runs = {kind: simulate(base.with_settings(partition=kind), network) for kind in ("iid", "label", "covariate")}
    for kind in ("label", "covariate"):
        assert runs[kind]["rc"] == runs["iid"]["rc"] and runs[kind]["ml"] == runs["iid"]["ml"]
    assert runs["label"]["crc"] != runs["iid"]["crc"]


def test_fragmentation_keeps_the_pooled_size_fixed():
    network = network_factory("tree")
    few = simulate(SimulationConfig(data="twonorm", nodes=5, pooled_size=200, rounds=2), network)
    many = simulate(SimulationConfig(data="twonorm", nodes=40, pooled_size=200, rounds=2), network)
    assert few["rc"] == many["rc"]
    assert few["local_sizes"] == {"min": 40, "max": 40} and many["local_sizes"] == {"min": 5, "max": 5}
