"""One small real-process scenario of ``crc bench --only network`` (crc.bench.network): 4 peers on a ring, every
directed edge through a relay link of 50 ms +- 20 ms, a short partition into two halves that heals. The 16-peer
scenarios belong to the bench, not here."""

from __future__ import annotations

from crc.bench.network import halves, run_scenario
from crc.protocol import SimulationConfig
from crc.topologies import Schedule


def test_halves_split_the_graph_evenly_with_a_connected_first_half():
    graph = Schedule("ring", 6, seed=0).graph(1)
    first, second = halves(graph)
    assert len(first) == len(second) == 3 and sorted(first + second) == list(range(6)) and 0 in first
    assert all(any(graph.has_edge(u, v) for v in first if v != u) for u in first)


def test_four_peers_through_the_relay_lose_only_what_the_partition_cut(tmp_path):
    config = SimulationConfig.from_settings(data="twonorm", nodes=4, local_size=30, rounds=30, topology="ring", test_size=500)
    figures = run_scenario("partition", config, tmp_path, partition_s=1.5, restart_after_s=0.0, late_rounds=0)
    assert figures["finished"] == 4, figures.get("failed_logs")
    assert figures["cut_edges"] == 2 and figures["relay_dropped_bytes"] > 0
    assert figures["lost_between_live"] == 0 and figures["rounds_down_between_live"] == 0
    assert figures["lost_on_faulted_links"] > 0
    assert figures["wall_s"] < 30
