"""Collaborative risk-based calibration of probabilistic generative classifiers.

The maths only: schemas and data, generative classifiers as sufficient
statistics, RC and local RC, the vectorized CRC engine, metrics and the
simulator. Graphs come from ``topologies``, real peers from ``nodes``.
"""

from crc.core.errors import CRCError
from crc.core.model_file import TrainedModel, load_model
from crc.core.schema import Schema
from crc.estimators import NaiveBayesClassifier, QDAClassifier

__version__ = "0.1.0"

__all__ = ["CRCError", "NaiveBayesClassifier", "QDAClassifier", "Schema", "TrainedModel", "__version__", "load_model"]
