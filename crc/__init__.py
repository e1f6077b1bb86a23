"""Collaborative risk-based calibration of probabilistic generative classifiers.

Layers, each importing only those before it (``tests/architecture`` checks it):

* ``crc.core``        the mathematics: schema, data, models as statistics, RC/LRC, the CRC engine, metrics,
                      partitions (numpy/scipy only);
* ``crc.protocol``    the simulation protocol: configuration, repeats (seeds, splits, evaluation), centralized
                      references, the one results-JSON builder, the simulator;
* ``crc.report``      tables and figures rendered from results JSON;
* ``crc.experiments`` the paper's tables as resumable grids (on the protocol and the report);
* ``crc.topologies``  communication graphs (networkx), beside the layers above: on ``crc.core.errors`` only;
* ``crc.nodes``       real peers (ZeroMQ) on the core, the protocol and the topologies;
* ``crc.estimators``  scikit-learn estimators on the core and the topologies (scikit-learn is optional:
                      ``crc.NaiveBayesClassifier`` and the others import it on first use);
* ``crc.bench``       benchmarks, and ``crc.cli`` the ``crc`` command, on top; nothing imports ``crc.cli``.

``crc.source_tree`` lets Python run from a checkout's root find ``crc.topologies``, ``crc.nodes`` and ``crc.cli``.
"""

import os

from crc.core.errors import CRCError
from crc.core.lazy import lazy_names
from crc.source_tree import find_folders

TYPE_CHECKING = False  # typing's flag without importing typing: the command's Ctrl-C guard comes after this module
if TYPE_CHECKING:  # imported on first use instead (``LAZY``); named here for type checkers and the API reference
    from crc.core.group_model import GroupModel, load_group
    from crc.core.model_file import TrainedModel, load_model
    from crc.core.schema import Schema

find_folders(os.path.dirname(os.path.abspath(__file__)))

__version__ = "0.1.0"

__all__ = ["CRCError", "GroupModel", "Schema", "TrainedModel", "__version__", "load_group", "load_model"]

ESTIMATORS = ("CircuitClassifier", "FederatedClassifier", "NaiveBayesClassifier", "QDAClassifier", "from_model")
"""Names of ``crc.estimators`` available here; importing them needs scikit-learn (``pip install 'crc-p2p[sklearn]'``)."""
LAZY = {"Schema": "crc.core.schema", "TrainedModel": "crc.core.model_file", "load_model": "crc.core.model_file",
        "GroupModel": "crc.core.group_model", "load_group": "crc.core.group_model",
        **dict.fromkeys(ESTIMATORS, "crc.estimators")}
"""Names available here, each imported from its module on first use: importing ``crc`` itself loads no numpy, so the
``crc`` command can handle Ctrl-C from its first moment (``crc.cli.entry``)."""


__getattr__, __dir__ = lazy_names(__name__, LAZY, globals())
