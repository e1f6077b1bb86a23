"""Every impossible topology ends a command with one line and a non-zero exit status, never a traceback:
the project's TopologyErrors, a graph file that cannot be read, and errors raised by networkx itself."""

import networkx as nx
import pytest
from click.testing import CliRunner

from crc.cli.main import main

SMALL = ["--rounds", "2", "--local-size", "20", "--no-rc-converged"]
IMPOSSIBLE = [
    (["--topology", "er:5"], "edge probability must be in (0, 1]"),
    (["--topology", "er:0"], "edge probability must be in (0, 1]"),
    (["--topology", "small-world:3:2"], "small world needs 2 <= k < n and 0 <= p <= 1"),
    (["--topology", "small-world:100"], "small world needs 2 <= k < n"),
    (["--topology", "regular:3", "--nodes", "5"], "no connected 3-regular graph on 5 nodes"),
    (["--topology", "regular:60"], "no connected 60-regular graph"),
    (["--topology", "regular:2", "--nodes", "2"], "number of nodes must be an integer >= 3 for a random regular graph, "
                                                  "got 2"),
    (["--topology", "small-world", "--nodes", "2"], "number of nodes must be an integer >= 3 for a small world, got 2"),
    (["--topology", "tree+5", "--nodes", "3"], "a tree on 3 nodes leaves 1 possible extra edge;"),
    (["--topology", "er:0.01", "--nodes", "3"], "no connected G(3, 0.01) graph"),
    (["--topology", "moebius"], "unknown topology 'moebius'"),
]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_failure(result, message):
    assert result.exit_code in (1, 2), result.output
    assert isinstance(result.exception, SystemExit), result.exception  # handled, not a crash
    assert "Traceback" not in result.output
    assert message in result.output
    error_lines = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(error_lines) == 1, result.output


@pytest.mark.parametrize("args, message", IMPOSSIBLE)
def test_simulate_graph_and_launch_refuse_an_impossible_topology_in_one_line(args, message):
    nodes = [] if "--nodes" in args else ["--nodes", "10"]
    for command in ("simulate", "graph"):
        extra = SMALL if command == "simulate" else []
        one_line_failure(run(command, *args, *nodes, *extra, "--data", "twonorm") if command == "simulate"
                         else run(command, *args, *nodes), message)
    # launch checks the graph before it starts a peer, so this costs no process
    one_line_failure(run("launch", *args, *nodes, *SMALL, "--data", "twonorm"), message)


@pytest.mark.parametrize("spec", ["er:5", "er:0", "small-world:4:1.5"])
def test_a_probability_out_of_range_is_a_malformed_topology_option(spec):
    for command in ("simulate", "graph", "launch"):
        result = run(command, "--topology", spec, *([] if command == "graph" else ["--data", "twonorm"]))
        assert result.exit_code == 2, result.output
        assert f"Error: Invalid value for '--topology': topology '{spec}': " in result.output


@pytest.mark.parametrize("content, message", [
    (b"[1,", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8 text"),
    (b'{"nodes": 3, "edges": [[0, 7]]}', "is not a pair of nodes"),
])
def test_a_broken_graph_file_is_one_line(tmp_path, content, message):
    path = tmp_path / ("g.json" if content.startswith((b"[", b"{")) else "g.txt")
    path.write_bytes(content)
    for command in ("graph", "simulate"):
        one_line_failure(run(command, "--topology", f"file:{path}", "--nodes", "3", *(SMALL if command == "simulate" else [])),
                         message)


def test_an_error_raised_by_networkx_itself_is_one_line(monkeypatch):
    def give_up(*args, **kwargs):
        raise nx.NetworkXError("Maximum number of tries exceeded")

    monkeypatch.setattr(nx, "connected_watts_strogatz_graph", give_up)
    one_line_failure(run("graph", "--topology", "small-world:4"), "communication graph: Maximum number of tries exceeded")
    one_line_failure(run("simulate", "--topology", "small-world:4", "--data", "twonorm", "--nodes", "10", *SMALL),
                     "Maximum number of tries exceeded")


@pytest.mark.parametrize(("nodes", "edges"), [(2, "1 edge,"), (5, "4 edges,")])
def test_graph_counts_its_edges_in_words(nodes, edges):
    result = run("graph", "--nodes", nodes)
    assert result.exit_code == 0, result.output
    assert f"tree on {nodes} nodes: {edges} density" in result.output.splitlines()[0]


def test_simulate_refuses_a_graph_before_it_runs_centralized_rc(monkeypatch):
    """An impossible graph, or one secure aggregation cannot protect, is refused before the centralized references
    (RC run to convergence takes minutes on a large set: a user waited that long for a one-line refusal)."""
    import crc.protocol.simulator as simulator

    def central_results(*args, **kwargs):
        raise AssertionError("centralized RC ran before the graph was checked")

    monkeypatch.setattr(simulator, "central_results", central_results)
    one_line_failure(run("simulate", "--topology", "regular:60", "--data", "twonorm"), "no connected 60-regular graph")
    one_line_failure(run("simulate", "--topology", "chain", "--data", "twonorm", "--nodes", "6", "--secure-aggregation",
                         "--dp-epsilon", "4", "--dp-noise", "distributed", "--dp-dropouts", "2", "--classifier", "aggregate",
                         "--algorithm", "paper"),
                     "distributed noise needs every closed neighbourhood to have at least 4 peers")
