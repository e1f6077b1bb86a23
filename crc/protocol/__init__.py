"""The simulation protocol: configuration, repeats (seeds, splits, evaluation samples), centralized references,
the one results-JSON builder, and the simulator.

Layer: sits on ``crc.core`` and imports nothing else of the project (no
networking, no graph library, no command line). ``crc.experiments``,
``crc.nodes`` and ``crc.cli`` build on it.
"""

from crc.protocol.config import SimulationConfig
from crc.protocol.simulator import simulate, simulate_central

__all__ = ["SimulationConfig", "simulate", "simulate_central"]
