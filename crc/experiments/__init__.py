"""The paper's experiments as named grids, run resumably (``run_experiments``).

Layer: on ``crc.core``, ``crc.protocol`` and ``crc.report``; the network is
injected (``network_factory``), so it needs no graph library.
"""

from crc.experiments.grids import DEFAULT_DATASETS, TABLES
from crc.experiments.runner import run_experiments

__all__ = ["DEFAULT_DATASETS", "TABLES", "run_experiments"]
