"""Generative classifiers as sufficient statistics."""

from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel, one_hot
from crc.core.models.circuit import MixtureCircuit
from crc.core.models.region_graph import RegionGraphCircuit
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.models.qda import QDA
from crc.core.schema import Schema

CIRCUIT_STRUCTURES = {"mixture": MixtureCircuit, "region-graph": RegionGraphCircuit}


def make_circuit(schema: Schema, *, structure: str = "mixture", **options) -> GenerativeModel:
    """A probabilistic-circuit model: ``mixture`` (components, structure_seed) or
    ``region-graph`` (depth, repetitions, sums, structure_seed)."""
    if structure not in CIRCUIT_STRUCTURES:
        raise CRCError(f"unknown circuit structure {structure!r}; known: {', '.join(CIRCUIT_STRUCTURES)}")
    return CIRCUIT_STRUCTURES[structure](schema, **options)


MODELS = {NaiveBayes.kind: NaiveBayes, QDA.kind: QDA, "pc": make_circuit}


CIRCUIT_DEFAULTS = {"structure": "mixture", "components": 2, "depth": 2, "repetitions": 2, "sums": 2, "structure_seed": 0}
"""Default circuit settings of every command and of the simulator."""


def model_options(model: str, **settings) -> dict:
    """The structure options ``make_model`` takes for ``model`` (circuits only), from command-line settings
    (``CIRCUIT_DEFAULTS`` keys; missing ones take their defaults)."""
    settings = {**CIRCUIT_DEFAULTS, **settings}
    structure, structure_seed = settings["structure"], settings["structure_seed"]
    if model != "pc":
        return {}
    if structure == "mixture":
        return {"structure": structure, "components": settings["components"], "structure_seed": structure_seed}
    return {"structure": structure, "depth": settings["depth"], "repetitions": settings["repetitions"],
            "sums": settings["sums"], "structure_seed": structure_seed}


def make_model(kind: str, schema: Schema, **options) -> GenerativeModel:
    """Build the model named ``kind`` for a schema; ``options`` are the model's structure settings."""
    if kind not in MODELS:
        raise CRCError(f"unknown model {kind!r}; known: {', '.join(MODELS)}")
    try:
        return MODELS[kind](schema, **options)
    except TypeError:
        raise CRCError(f"model {kind!r} does not take the options {sorted(options)}") from None


__all__ = ["CIRCUIT_DEFAULTS", "CIRCUIT_STRUCTURES", "GenerativeModel", "MODELS", "MixtureCircuit", "NaiveBayes", "QDA", "RegionGraphCircuit",
           "make_circuit", "make_model", "model_options", "one_hot"]
