"""The simulation protocol: configuration, repeats (seeds, splits, evaluation samples), centralized references,
the one results-JSON builder, and the simulator.

Layer: sits on ``crc.core`` and imports nothing else of the project (no
networking, no graph library, no command line). ``crc.experiments``,
``crc.nodes`` and ``crc.cli`` build on it.
"""


from crc.core.lazy import lazy_names
from crc.protocol.config import SimulationConfig

TYPE_CHECKING = False  # typing's flag without importing typing
if TYPE_CHECKING:  # imported on first use instead (``LAZY``); named here for type checkers and the API reference
    from crc.protocol.simulator import simulate, simulate_central

__all__ = ["SimulationConfig", "simulate", "simulate_central"]

LAZY = {"simulate": "crc.protocol.simulator", "simulate_central": "crc.protocol.simulator"}
"""Names available here, each imported from its module on first use: the simulator (and the libraries of its
baselines) stays out of a command that only needs the configuration, such as ``crc node`` or ``--help``."""


__getattr__, __dir__ = lazy_names(__name__, LAZY, globals())
