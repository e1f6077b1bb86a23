"""The ``pc`` model kind: a probabilistic circuit of a chosen structure (``--structure``)."""

from __future__ import annotations

from crc.core.models.base import GenerativeModel
from crc.core.models.circuit import MixtureCircuit
from crc.core.models.options import Option, check_exact, select
from crc.core.models.region_graph import RegionGraphCircuit
from crc.core.schema import Schema

STRUCTURES = {cls.structure: cls for cls in (MixtureCircuit, RegionGraphCircuit)}
STRUCTURE = Option("structure", str, MixtureCircuit.structure, "Circuit (--model pc): a mixture of products per class, "
                   "or a random region graph (RAT-SPN style).", choices=tuple(STRUCTURES))


class ProbabilisticCircuit:
    """Builds the circuit class of the ``structure`` option; its options are ``structure`` and that class's."""

    kind = "pc"
    summary = "probabilistic circuit (--structure mixture|region-graph)"
    OPTIONS = (STRUCTURE,) + tuple({option.name: option for cls in STRUCTURES.values() for option in cls.OPTIONS}.values())

    @staticmethod
    def select_options(settings) -> dict:
        structure = STRUCTURE.check(settings.get(STRUCTURE.name, STRUCTURE.default))
        return {STRUCTURE.name: structure, **select(STRUCTURES[structure].OPTIONS, settings)}

    @staticmethod
    def create(schema: Schema, **options) -> GenerativeModel:
        structure = STRUCTURE.check(options.pop(STRUCTURE.name, STRUCTURE.default))
        cls = STRUCTURES[structure]
        return cls(schema, **check_exact(cls.OPTIONS, options, f"circuit structure {structure!r}"))
