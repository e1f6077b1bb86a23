"""Generative classifiers as sufficient statistics, and the registry of model kinds.

A model kind is registered once in ``MODELS``; it declares its structure
options (``OPTIONS``), picks its own from mixed settings (``select_options``)
and builds a model after checking them (``create``).
"""

from crc.core.errors import CRCError
from crc.core.models.base import MAX_STATISTICS, GenerativeModel, ModelTooLarge, one_hot
from crc.core.models.circuit import MixtureCircuit
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.models.options import Option
from crc.core.models.pc import ProbabilisticCircuit
from crc.core.models.qda import QDA
from crc.core.models.region_graph import RegionGraphCircuit
from crc.core.schema import Schema

MODELS = {kind.kind: kind for kind in (NaiveBayes, QDA, ProbabilisticCircuit)}
"""Model kinds by the name users give (``--model``)."""


def model_kind(kind: str):
    """The registered model kind named ``kind``; a CRCError for an unknown name."""
    if kind not in MODELS:
        raise CRCError(f"unknown model {kind!r}; known: {', '.join(MODELS)}")
    return MODELS[kind]


def all_options() -> tuple[Option, ...]:
    """Every registered kind's options, each once (options shared between kinds are one object)."""
    options: dict[str, Option] = {}
    for kind in MODELS.values():
        for option in kind.OPTIONS:
            if options.setdefault(option.name, option) is not option:
                raise RuntimeError(f"model option {option.name!r} is declared twice with different meanings")
    return tuple(options.values())


def model_options(kind: str, settings) -> dict:
    """The options model ``kind`` takes, picked from ``settings`` (a mapping that may hold any kind's options)."""
    return model_kind(kind).select_options(settings)


def make_model(kind: str, schema: Schema, **options) -> GenerativeModel:
    """Build the model named ``kind`` for a schema; ``options`` are checked against its declaration."""
    return model_kind(kind).create(schema, **options)


__all__ = ["MAX_STATISTICS", "MODELS", "GenerativeModel", "MixtureCircuit", "ModelTooLarge", "NaiveBayes", "Option",
           "ProbabilisticCircuit", "QDA", "RegionGraphCircuit", "all_options", "make_model", "model_kind", "model_options", "one_hot"]
