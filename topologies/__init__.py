"""Communication graphs for CRC: generators, specs, schedules over rounds, diagnostics, files.

Layer: installed as ``crc.topologies``; imports networkx, numpy and scipy, and
of the project only ``crc.core.errors`` (its errors are CRCErrors), ``crc.core.files`` (graph files) and
``crc.core.lazy``.

Every name here is imported from its module on first use (``LAZY``): the command line's options read ``HELP``
without networkx, and ``parse`` without the diagnostics' and the mixing matrices' scipy.
"""

import math

from crc.core.lazy import lazy_names

TYPE_CHECKING = False  # typing's flag without importing typing
if TYPE_CHECKING:  # imported on first use instead (``LAZY``); named here for type checkers and the API reference
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
    from crc.topologies.spec import KINDS, build, parse
    from crc.topologies.syntax import HELP

LAZY = {
    **dict.fromkeys(("describe", "describe_schedule", "spectral_gap"), "crc.topologies.diagnostics"),
    **dict.fromkeys(("chain_graph", "complete_graph", "erdos_renyi_graph", "grid_graph", "random_regular_graph",
                     "random_tree_graph", "ring_graph", "small_world_graph", "star_graph", "tree_plus_graph"),
                    "crc.topologies.generators"),
    **dict.fromkeys(("load_graph", "save_graph"), "crc.topologies.graph_io"),
    "averaging_matrix": "crc.topologies.mixing",
    "Schedule": "crc.topologies.schedule",
    **dict.fromkeys(("KINDS", "build", "parse"), "crc.topologies.spec"),
    "HELP": "crc.topologies.syntax",
}
"""Names available here, each imported from its module on first use."""


def network_factory(spec: str, period: float = math.inf):
    """A function ``(n, seed) -> Schedule`` drawing the ``spec`` network of one repeat."""
    from crc.topologies.schedule import Schedule
    from crc.topologies.spec import parse

    parse(spec)

    def network(n: int, seed):
        return Schedule(spec, n, period=period, seed=seed)

    return network


__getattr__, __dir__ = lazy_names(__name__, LAZY, globals())


__all__ = [
    "HELP", "KINDS", "Schedule", "averaging_matrix", "build", "chain_graph", "complete_graph", "describe",
    "describe_schedule", "erdos_renyi_graph", "grid_graph", "load_graph", "network_factory", "parse",
    "random_regular_graph", "random_tree_graph", "ring_graph", "save_graph", "small_world_graph", "spectral_gap",
    "star_graph", "tree_plus_graph",
]
