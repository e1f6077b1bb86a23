"""Generative classifiers as sufficient statistics."""

from crc.errors import CRCError
from crc.models.base import GenerativeModel, one_hot
from crc.models.circuit import MixtureCircuit
from crc.models.naive_bayes import NaiveBayes
from crc.models.qda import QDA
from crc.schema import Schema

MODELS = {NaiveBayes.kind: NaiveBayes, QDA.kind: QDA, MixtureCircuit.kind: MixtureCircuit}


def make_model(kind: str, schema: Schema, **options) -> GenerativeModel:
    """Build the model named ``kind`` for a schema; ``options`` are the model's structure settings."""
    if kind not in MODELS:
        raise CRCError(f"unknown model {kind!r}; known: {', '.join(MODELS)}")
    try:
        return MODELS[kind](schema, **options)
    except TypeError:
        raise CRCError(f"model {kind!r} does not take the options {sorted(options)}") from None


__all__ = ["GenerativeModel", "MODELS", "MixtureCircuit", "NaiveBayes", "QDA", "make_model", "one_hot"]
