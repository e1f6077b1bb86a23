"""Collaborative risk-based calibration of probabilistic generative classifiers."""

from crc.errors import CRCError

__version__ = "0.1.0"

__all__ = ["CRCError", "__version__"]
