import math
import os

import networkx as nx
import numpy as np
import pytest

import crc.topologies.graph_io as graph_io
from crc.topologies import (
    Schedule,
    chain_graph,
    complete_graph,
    describe,
    describe_schedule,
    load_graph,
    save_graph,
    spectral_gap,
)
from support.blocking import fails_if_blocked


def edges(graph):
    return sorted(map(tuple, map(sorted, graph.edges)))


@pytest.mark.parametrize("period", [1, 3, 5])
def test_dynamic_schedule_changes_exactly_every_period(period):
    schedule = Schedule("tree", 25, period=period, seed=2)
    graphs = [edges(schedule.graph(t)) for t in range(1, 16)]
    for t in range(1, 15):
        changes = graphs[t] != graphs[t - 1]
        assert changes == (t % period == 0), f"round {t + 1}"
    again = Schedule("tree", 25, period=period, seed=2)
    assert [edges(again.graph(t)) for t in range(1, 16)] == graphs


def test_static_schedule_keeps_one_graph_and_serves_as_mixing():
    schedule = Schedule("tree+5", 12, period=math.inf, seed=0)
    assert all(edges(schedule.graph(t)) == edges(schedule.graph(1)) for t in range(2, 40))
    np.testing.assert_allclose(schedule(7).sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="period"):
        Schedule("tree", 5, period=0)


def test_schedule_density_averages_the_graphs_in_force():
    assert Schedule("tree+10", 20, seed=0).density(64) == pytest.approx(29 / 190)
    redrawn = Schedule("er:0.3", 20, period=8, seed=0)
    expected = np.mean([redrawn.graph(1 + 8 * k).number_of_edges() / 190 for k in range(8)])
    assert redrawn.density(64) == pytest.approx(expected)


def test_diagnostics():
    assert spectral_gap(complete_graph(10)) == pytest.approx(1.0)
    chain = describe(chain_graph(10))
    assert chain["edges"] == 9 and chain["diameter"] == 9 and chain["density"] == pytest.approx(0.2)
    assert 0 < chain["spectral_gap"] < spectral_gap(nx.cycle_graph(10)) + 0.1 < 1
    assert spectral_gap(nx.disjoint_union(chain_graph(3), chain_graph(3))) == pytest.approx(0.0, abs=1e-12)
    summary = describe_schedule(Schedule("tree", 20, period=4, seed=0), rounds=12)
    assert summary["graphs"] == 3 and summary["edges"] == 19


@pytest.mark.parametrize("name", ["g.json", "g.edges"])
def test_graph_file_round_trip(tmp_path, name):
    graph = Schedule("tree+3", 15, seed=4).graph(1)
    graph.add_node(15)  # an isolated node must survive the round trip
    save_graph(graph, tmp_path / name)
    loaded = load_graph(tmp_path / name)
    assert loaded.number_of_nodes() == 16 and edges(loaded) == edges(graph)


def test_a_graph_file_of_another_size_names_the_option_that_sets_the_runs(tmp_path):
    save_graph(complete_graph(6), tmp_path / "g.json")
    with pytest.raises(ValueError, match=r"g.json: the graph has 6 nodes, the run has 50 \(--nodes; a hybrid partition: "
                                         r"its groups\)"):
        Schedule(f"file:{tmp_path / 'g.json'}", 50, seed=0).graph(1)


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("g.edges", "0 1\n1 x\n", "not a node number"),
        ("g.edges", "0 1 2\n", "must be 'u v'"),
        ("g.edges", "# nodes: 2\n0 5\n", "not a pair of nodes in 0 .. 1"),
        ("g.edges", "3 3\n", "self-loop"),
        ("g.json", '{"nodes": 3, "edges": [[0, "1"]]}', "not a pair of nodes"),
        ("g.json", '[1, 2]', "expected an object"),
        ("g.json", '{"nodes": 1000000000, "edges": []}', "a graph needs 1 to 1,048,576 nodes, this one has 1,000,000,000"),
        ("g.edges", "0 1000000000\n", "a graph needs 1 to 1,048,576 nodes, this one has 1,000,000,001"),
        ("g.edges", "# nodes: 1000000000\n0 1\n", "this one has 1,000,000,000"),
        ("g.json", '{"nodes": true, "edges": []}', "expected an object with integer 'nodes'"),
        ("g.json", '{"nodes": 3, "edges": [[0, true]]}', r"edge \[0, True\] is not a pair of nodes"),
        ("g.json", '{"nodes": 3, "edges": [], "nodes": 5}', "graph file is not valid JSON .key 'nodes' appears twice"),
        ("g.json", "[" * 100_000 + "]" * 100_000, "graph file nests arrays and objects more than 3 deep"),
        ("g.edges", "", "a graph needs 1 to"),
    ],
)
def test_graph_files_validated(tmp_path, name, text, message):
    """Quickly, in one line naming the file: a graph file of 10^9 nodes ran out of memory building them."""
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        load_graph(tmp_path / name)
    assert str(error.value).startswith(f"{tmp_path / name}: ") and "\n" not in str(error.value)


@pytest.mark.parametrize("name, text", [("g.edges", "0 1\n" * 5), ("g.json", '{"nodes": 2, "edges": ' + str([[0, 1]] * 5) + "}")])
def test_a_graph_file_of_too_many_edges_is_refused_before_the_graph_is_built(tmp_path, monkeypatch, name, text):
    """A 60 MB file of one edge 15 million times took more than a minute and 3 GB (networkx adds them one by one)."""
    monkeypatch.setattr(graph_io, "MAX_GRAPH_EDGES", 4, raising=False)
    monkeypatch.setattr(graph_io.nx, "empty_graph", None)  # building it would fail otherwise than with the refusal
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=f"{name}: more than 4 edges"):
        load_graph(tmp_path / name)


def test_a_node_number_of_thousands_of_digits_is_not_written_out(tmp_path):
    for text in ("0 " + "7" * 4000 + "\n", "0 " + "7" * 5000 + "\n", "# nodes: " + "7" * 4000 + "\n"):
        (tmp_path / "g.edges").write_text(text)
        with pytest.raises(ValueError, match="g.edges: ") as error:
            load_graph(tmp_path / "g.edges")
        assert len(str(error.value)) < 200


def test_a_fifo_in_a_graph_file_s_place_is_not_waited_for(tmp_path):
    os.mkfifo(tmp_path / "g.edges")
    with fails_if_blocked(), pytest.raises(ValueError, match="g.edges: a graph needs 1 to"):
        load_graph(tmp_path / "g.edges")
