"""Generative classifiers as sufficient statistics."""

from crc.errors import CRCError
from crc.models.base import GenerativeModel, one_hot
from crc.models.naive_bayes import NaiveBayes
from crc.models.qda import QDA
from crc.schema import Schema

MODELS = {NaiveBayes.kind: NaiveBayes, QDA.kind: QDA}


def make_model(kind: str, schema: Schema) -> GenerativeModel:
    """Build the model named ``kind`` (``nb`` or ``qda``) for a schema."""
    try:
        return MODELS[kind](schema)
    except KeyError:
        raise CRCError(f"unknown model {kind!r}; known: {', '.join(MODELS)}") from None


__all__ = ["GenerativeModel", "MODELS", "NaiveBayes", "QDA", "make_model", "one_hot"]
