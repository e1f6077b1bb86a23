"""A lost message replaced by the last statistics heard on its edge (naive Bayes' categorical start under loss)."""

import numpy as np

from crc.core import acceleration as accel
from crc.core.aggregation import neighbourhood_average
from crc.core.last_heard import LastHeard
from crc.core.loss import loss_seed
from crc.core.models import make_model
from crc.protocol import SimulationConfig, simulate
from crc.protocol.loss import lossy_mixing
from crc.topologies import averaging_matrix, network_factory, random_tree_graph
from support.tables import mixed_columns, prepared


def test_a_lost_edge_carries_its_last_message_and_the_receivers_own_before_any():
    base = averaging_matrix(random_tree_graph(12, seed=1))
    lossy = lossy_mixing(base, 0.5, [loss_seed(0, 0, v) for v in range(12)])
    heard, rng = LastHeard(), np.random.default_rng(0)
    first, second = rng.random((12, 4)), rng.random((12, 4))
    rows, cols, weights, messages = heard.edges(base, lossy(1), first)
    arrived_first = lossy(1)[rows, cols] != 0
    assert arrived_first.any() and not arrived_first.all()
    np.testing.assert_array_equal(messages[arrived_first], first[cols[arrived_first]])
    np.testing.assert_array_equal(messages[~arrived_first], first[rows[~arrived_first]])
    rows2, cols2, _, messages = heard.edges(base, lossy(2), second)
    assert np.array_equal(rows2, rows) and np.array_equal(cols2, cols)
    arrived = lossy(2)[rows, cols] != 0
    np.testing.assert_array_equal(messages[arrived], second[cols[arrived]])
    stale = ~arrived & arrived_first
    assert stale.any()
    np.testing.assert_array_equal(messages[stale], first[cols[stale]])
    np.testing.assert_allclose(weights, base.toarray()[rows, cols])
    everything = LastHeard().edges(base, base, second)
    np.testing.assert_allclose(neighbourhood_average(base, second, edges=everything), base @ second, rtol=1e-14)


def test_only_exact_diffusion_from_a_start_with_local_counts_keeps_the_last_heard():
    schema, _, _ = prepared(mixed_columns())
    model = make_model("nb", schema)
    assert any(name in accel.LOCAL_BLOCKS for name, _ in model.layout.blocks)
    accelerated = accel.acceleration_of(accel.resolve({"model": "nb"}))
    assert accelerated.start == "categorical" and accel.keeps_last_heard(model, accelerated)
    assert not accel.keeps_last_heard(model, accel.acceleration_of(accel.resolve({"model": "nb", "start": "uniform"})))
    assert not accel.keeps_last_heard(model, accel.PAPER)
    continuous = {name: cells for name, cells in mixed_columns().items() if name not in ("d0", "d1")}
    without_categories = make_model("nb", prepared(continuous)[0])  # its category block is empty
    assert not accel.keeps_last_heard(without_categories, accelerated)


def test_the_simulator_replaces_lost_messages_only_under_loss(monkeypatch):
    config = {"data": "chess", "nodes": 6, "local_size": 20, "rounds": 5, "test_size": 300}
    network = network_factory("tree")
    lossy, clean = SimulationConfig(**config, loss=0.3), SimulationConfig(**config)
    kept = simulate(lossy, network), simulate(clean, network)
    monkeypatch.setattr(accel, "keeps_last_heard", lambda model, acceleration: False)
    arrived = simulate(lossy, network), simulate(clean, network)
    assert kept[0]["crc"] != arrived[0]["crc"]
    assert kept[1] == arrived[1]
