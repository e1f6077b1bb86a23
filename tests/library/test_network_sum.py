"""The simulator's network sum (``--sum-over network``, ``crc.protocol.network_sum``): the whole network's mean a
round on any connected static graph, one sum of all peers carrying the distributed noise."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from crc.core.distributed_noise import Neighbourhoods
from crc.core.errors import CRCError, OptionConflict
from crc.core.models import make_model
from crc.experiments.cells import Cell
from crc.protocol import SimulationConfig, simulate
from crc.protocol.network_sum import network_sum_summary, tree_height
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import first_graph, make_engine
from crc.topologies import averaging_matrix, chain_graph, complete_graph, network_factory
from support.tables import mixed_columns, prepared

PRIVATE = {"secure_aggregation": True, "dp_epsilon": 2.0, "dp_noise": "distributed"}


def _config(**settings) -> SimulationConfig:
    return SimulationConfig.from_settings(data="twonorm", nodes=8, local_size=20, rounds=6, algorithm="paper",
                                          classifier="aggregate", rc_iterations=2, rc_converged=False, test_size=200,
                                          **settings)


def _run(config: SimulationConfig) -> tuple[dict, np.ndarray]:
    """The results of ``config`` and its first repeat's final statistics (n, size), from the same seeds."""
    results = simulate(config, network_factory(config.topology, math.inf))
    rep = prepare_repeat(load_for(config), config, 0)
    network = network_factory(config.topology, math.inf)
    engine, _ = make_engine(rep, config, network, config.privacy(rep.split.model,
                                                                 first_graph(network(config.nodes, rep.graph_seed))))
    return results, engine.run(config.rounds)


def test_a_network_sum_on_the_tree_is_the_complete_graph_and_not_the_tree():
    """Every peer averages all n each round, one noisy sum: the complete graph's run, whatever the graph (the
    statistics to the last bits: the matrices add the same terms in another order)."""
    network, network_stats = _run(_config(topology="tree", sum_over="network", **PRIVATE))
    complete, complete_stats = _run(_config(topology="complete", **PRIVATE))
    tree, tree_stats = _run(_config(topology="tree", **PRIVATE))
    assert network["config"]["sum_over"] == "network" and complete["config"]["sum_over"] == "neighbourhood"
    for part in ("crc", "ml", "rc"):
        assert network[part] == pytest.approx(complete[part], rel=1e-12, abs=0)
    np.testing.assert_allclose(network_stats, complete_stats, rtol=1e-12, atol=0)
    assert network["privacy"] == complete["privacy"] and network["privacy"]["sums_per_round"] == 1
    assert tree["privacy"]["sums_per_round"] > 1
    assert network["crc"]["test_loglik"] != tree["crc"]["test_loglik"]
    assert not np.allclose(network_stats, tree_stats)


def test_the_network_sum_summary_counts_the_frames_along_the_spanning_tree():
    network, _ = _run(_config(topology="star", sum_over="network", secure_aggregation=True))
    assert network["secure_aggregation"] == {"sum_over": "network", "protected_fraction": 1.0, "messages_per_round": 14,
                                             "plain_messages_per_round": 14, "tree_height": 1, "colluders": 0}
    summary = network_sum_summary(averaging_matrix(nx.path_graph(5)))
    assert (summary["messages_per_round"], summary["plain_messages_per_round"], summary["tree_height"]) == (8, 8, 2)
    assert network_sum_summary(averaging_matrix(complete_graph(5)))["plain_messages_per_round"] == 20
    assert tree_height(averaging_matrix(nx.star_graph(4))) == 1


def test_a_graph_in_two_parts_cannot_relay_a_network_sum():
    graph = nx.union(chain_graph(4), nx.relabel_nodes(chain_graph(4), {v: v + 4 for v in range(4)}))
    with pytest.raises(CRCError, match="^--sum-over network needs a connected graph, .* has 2 separate parts"):
        simulate(_config(sum_over="network", secure_aggregation=True), lambda n, seed: averaging_matrix(graph))


@pytest.mark.parametrize(("settings", "refused"), [
    ({}, "needs --secure-aggregation"),
    ({"secure_aggregation": True, "dp_epsilon": 2.0, "dp_noise": "distributed", "dp_dropouts": 1}, "takes no --dp-dropouts"),
    ({"secure_aggregation": True, "period": 2}, "needs a static --topology"),
    ({"secure_aggregation": True, "loss": 0.1}, "takes no --loss"),
    ({"secure_aggregation": True, "partition": "vertical:3"}, "not available with a vertical"),
    ({"secure_aggregation": True, "sum_over": "everyone"}, "must be one of neighbourhood, network, got 'everyone'"),
])
def test_a_network_sum_refuses_what_it_cannot_take(settings, refused):
    with pytest.raises(OptionConflict, match=refused):
        _config(**{"sum_over": "network", **settings}).validate()


def test_the_accountant_counts_one_release_a_round_for_one_sum_of_all():
    config = _config(sum_over="network", **PRIVATE)
    model = make_model("nb", prepared(mixed_columns(50, seed=1))[0])
    tree = averaging_matrix(chain_graph(8))
    whole = config.sums(tree)
    assert [m.tolist() for m in whole.members] == [list(range(8))] and whole.recipient_set.tolist() == [0] * 8
    assert np.array_equal(Neighbourhoods.of(averaging_matrix(complete_graph(8))).members[0], whole.members[0])
    privacy = config.privacy(model, tree)
    assert privacy.releases == config.rounds and privacy.sums_per_round == 1
    assert privacy == _config(topology="complete", **PRIVATE).privacy(model, averaging_matrix(complete_graph(8)))
    assert config.with_settings(sum_over="neighbourhood").privacy(model, tree).sums_per_round == 3


def test_a_cell_stored_before_sum_over_existed_is_a_neighbourhood_cell():
    config = _config()
    stored = {key: value for key, value in config.to_json().items() if key != "sum_over"}
    assert Cell("t", "twonorm", "c", config).matches(stored)
    assert not Cell("t", "twonorm", "c", _config(sum_over="network", secure_aggregation=True)).matches(stored)
