"""Communication graphs for CRC: generators, specs, schedules over rounds, diagnostics, files.

Layer: installed as ``crc.topologies``; imports networkx, numpy and scipy, and
of the project only ``crc.core.errors`` (its errors are CRCErrors).
"""

import math

from crc.topologies.diagnostics import describe, describe_schedule, spectral_gap
from crc.topologies.generators import (
    chain_graph,
    complete_graph,
    erdos_renyi_graph,
    grid_graph,
    random_regular_graph,
    random_tree_graph,
    ring_graph,
    small_world_graph,
    star_graph,
    tree_plus_graph,
)
from crc.topologies.graph_io import load_graph, save_graph
from crc.topologies.mixing import averaging_matrix
from crc.topologies.schedule import Schedule
from crc.topologies.spec import HELP, KINDS, build, parse


def network_factory(spec: str, period: float = math.inf):
    """A function ``(n, seed) -> Schedule`` drawing the ``spec`` network of one repeat."""
    parse(spec)

    def network(n: int, seed):
        return Schedule(spec, n, period=period, seed=seed)

    return network


__all__ = [
    "HELP", "KINDS", "Schedule", "averaging_matrix", "build", "chain_graph", "complete_graph", "describe",
    "describe_schedule", "erdos_renyi_graph", "grid_graph", "load_graph", "network_factory", "parse",
    "random_regular_graph", "random_tree_graph", "ring_graph", "save_graph", "small_world_graph", "spectral_gap",
    "star_graph", "tree_plus_graph",
]
