"""`crc graph`'s secure-aggregation summary against --colluders: what it says agrees with what a run refuses."""

import json

import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.distributed_noise import share_variance
from crc.core.errors import CRCError
from crc.protocol.neighbourhoods import check_graph_protectable, neighbour_counts
from crc.protocol.repeat import repeat_seeds
from crc.topologies import Schedule, averaging_matrix


def graph_json(*args) -> dict:
    result = CliRunner().invoke(main, ["graph", "--json", *map(str, args)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["secure_aggregation"]


def first_graph(topology: str, nodes: int):
    return averaging_matrix(Schedule(topology, nodes, seed=repeat_seeds(0, 0)[1]).graph(1))


@pytest.mark.parametrize("topology, nodes, colluders", [("tree", 30, 0), ("tree", 30, 1), ("ring", 8, 1),
                                                        ("regular:4", 12, 1), ("complete", 10, 2)])
def test_the_summary_counts_the_peers_a_run_refuses_and_the_dropouts_it_takes(topology, nodes, colluders):
    """--colluders t: the peers with 2 to t + 1 neighbours are counted, and a graph with any is the one a run refuses;
    else the usable dropouts are the largest --dp-dropouts a run takes (a tree's leaves, whose closed neighbourhoods
    of two cannot spare a member, allow none: the graph once said its hub's number)."""
    summary = graph_json("--topology", topology, "--nodes", nodes, "--colluders", colluders)
    mixing = first_graph(topology, nodes)
    assert summary["colluders"] == colluders
    if summary["too_few_for_colluders"]:
        with pytest.raises(CRCError, match=f"--colluders {colluders}: a peer with"):
            check_graph_protectable(mixing, colluders)
        return
    usable = summary["usable_dropouts"]
    check_graph_protectable(mixing, colluders, usable)
    for size in set((neighbour_counts(mixing) + 1).tolist()):  # distributed noise's shares take d in every sum
        share_variance(1.0, size, colluders, usable)
    with pytest.raises(CRCError, match=f"--dp-dropouts {usable + 1}"):
        check_graph_protectable(mixing, colluders, usable + 1)


def test_the_colluders_change_the_summary_and_its_line():
    """A ring's peers have two neighbours: enough without colluders, too few against one (a run refuses it)."""
    assert graph_json("--topology", "ring", "--nodes", 8)["too_few_for_colluders"] == 0
    assert graph_json("--topology", "ring", "--nodes", 8, "--dp-colluders", 1)["too_few_for_colluders"] == 8
    result = CliRunner().invoke(main, ["graph", "--topology", "ring", "--nodes", "8", "--colluders", "1"])
    assert result.exit_code == 0, result.output
    assert ("with --colluders 1: 8 peer(s) with 2 neighbours, too few to be protected" in result.output
            and "refuse this graph" in result.output)
    alone = CliRunner().invoke(main, ["graph", "--topology", "complete", "--nodes", "10", "--colluders", "2"])
    assert "sums may go without up to 3 member(s), the largest --dp-dropouts the graph takes" in alone.output


def test_more_colluders_than_a_peer_can_have_neighbours_are_named_so():
    """The degrees named are the graph's (a peer of n has at most n - 1 neighbours), not t + 1."""
    result = CliRunner().invoke(main, ["graph", "--topology", "complete", "--nodes", "5", "--colluders", "1000"])
    assert result.exit_code == 0, result.output
    line = " ".join(result.output.split())
    assert ("5 peer(s) with 2 to 4 neighbours, too few to be protected (unmasking needs 1002, more than any peer of 5 "
            "can have" in line)
