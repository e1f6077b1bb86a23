"""``crc graph``: how well a communication graph mixes, and the graph itself as a file."""

from __future__ import annotations

import json
import math

import click

from crc.cli.options import options
from crc.cli.output import note
from crc.protocol.neighbourhoods import secure_aggregation_summary


@click.command(short_help="Density, diameter and spectral gap of a communication graph.")
@options("topology", "period", "nodes", "rounds", "seed", "dp_colluders")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the graph of round 1 here: .json, or an edge list for any other name; "
                   "`--topology file:OUT` reads it back.")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnostics as JSON.")
def graph(topology, period, nodes, rounds, seed, dp_colluders, out, as_json):
    """Describe the communication graph that `crc simulate` and `crc launch`
    draw for the same --topology, --nodes and --seed (their first repeat):
    edges, density, diameter and spectral gap of the averaging matrix (larger
    mixes faster), and what --secure-aggregation protects on its first graph
    (messages to a peer with a single neighbour cannot be hidden; with
    --colluders, the peers with too few neighbours to be protected, and the
    most members a sum may go without: the largest --dp-dropouts the graph
    takes). With --period, the means over the graphs used in --rounds rounds.
    """
    from crc.protocol.repeat import repeat_seeds  # the engine and the graph libraries: not for --help
    from crc.topologies import Schedule, averaging_matrix, describe_schedule, save_graph

    schedule = Schedule(topology, nodes, period=period or math.inf, seed=repeat_seeds(seed, 0)[1])
    summary = describe_schedule(schedule, rounds)
    secure = secure_aggregation_summary(averaging_matrix(schedule.graph(1)), dp_colluders)
    if out:
        save_graph(schedule.graph(1), out)
    if as_json:
        click.echo(json.dumps({"topology": topology, "nodes": nodes, "period": period, "rounds": rounds, "seed": seed,
                               **summary, "secure_aggregation": secure}, indent=2))
        return
    dynamic = f", redrawn every {period} rounds ({summary['graphs']} graphs in {rounds} rounds)" if period else ""
    edges = f"{summary['edges']:g} edge" + ("" if summary["edges"] == 1 else "s")
    click.echo(f"{topology} on {nodes} nodes{dynamic}: {edges}, density {summary['density']:.4f}, "
               f"diameter {summary['diameter']:g}, spectral gap {summary['spectral_gap']:.4f}")
    click.echo(f"secure aggregation: {secure['protected_fraction']:.1%} of messages protected; "
               f"{secure['single_neighbour_peers']} peer(s) with a single neighbour")
    click.echo(_against_colluders(secure, nodes))
    if out:
        note(f"wrote {out}")


def _against_colluders(secure: dict, nodes: int) -> str:
    """The line on --colluders t of a ``secure_aggregation_summary`` of a graph on ``nodes`` peers: the peers with 2
    to t + 1 neighbours, whose sums cannot be unmasked (a run refuses the graph), else the largest --dp-dropouts a run
    takes."""
    t, few = secure["colluders"], secure["too_few_for_colluders"]
    if few:
        degrees = "2 neighbours" if t == 1 else f"2 to {min(t + 1, nodes - 1)} neighbours"
        beyond = f", more than any peer of {nodes} can have" if t + 2 > nodes - 1 else ""
        return (f"with --colluders {t}: {few} peer(s) with {degrees}, too few to be protected (unmasking needs "
                f"{t + 2}{beyond}: two honest members besides the colluders); `crc simulate` and `crc launch` refuse "
                "this graph")
    usable = secure["usable_dropouts"]
    dropouts = (f"sums may go without up to {usable} member(s), the largest --dp-dropouts the graph takes" if usable
                else "a run takes no --dp-dropouts (no sum may go without a member, or a closed neighbourhood is too "
                     "small to spare one)")
    return f"with --colluders {t}: no peer has too few neighbours; {dropouts}"
