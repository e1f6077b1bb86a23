"""The simulation protocol: configuration, repeats (seeds, splits, evaluation samples), centralized references,
the one results-JSON builder, and the simulator.

Layer: sits on ``crc.core`` and imports nothing else of the project (no
networking, no graph library, no command line). ``crc.experiments``,
``crc.nodes`` and ``crc.cli`` build on it.
"""

import importlib

from crc.protocol.config import SimulationConfig

TYPE_CHECKING = False  # typing's flag without importing typing
if TYPE_CHECKING:  # imported on first use instead (``LAZY``); named here for type checkers and the API reference
    from crc.protocol.simulator import simulate, simulate_central

__all__ = ["SimulationConfig", "simulate", "simulate_central"]

LAZY = {"simulate": "crc.protocol.simulator", "simulate_central": "crc.protocol.simulator"}
"""Names available here, each imported from its module on first use: the simulator (and the libraries of its
baselines) stays out of a command that only needs the configuration, such as ``crc node`` or ``--help``."""


def __getattr__(name: str):
    if name in LAZY:
        return getattr(importlib.import_module(LAZY[name]), name)
    raise AttributeError(f"module 'crc.protocol' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(LAZY))
