"""The registry of experiment-table kinds: one object each, by the name a table's JSON stores under ``kind``.

A kind knows what its cells run (``needs_curve``, ``central_only``,
``columns_choose_model``), what each finished cell reports (``summarise``), and
how its table is rendered (``markdown``, ``csv``) and plotted (``plots``); see
``crc.report.table_kind``. Each kind lives in its own module (``gap``,
``convergence``, ``learning_curve``, ``model_comparison``).
"""

from __future__ import annotations

from crc.core.errors import CRCError
from crc.report.convergence import ConvergenceKind, FirstRoundKind
from crc.report.gap import GapKind
from crc.report.learning_curve import LearningCurveKind
from crc.report.model_comparison import ModelComparisonKind
from crc.report.partitions import PartitionsKind
from crc.report.table_kind import Plot, TableKind

GAP = GapKind()
CONVERGENCE = ConvergenceKind()
LEARNING_CURVE = LearningCurveKind()
FIRST_ROUND = FirstRoundKind()
MODEL_COMPARISON = ModelComparisonKind()
PARTITIONS = PartitionsKind()

KINDS = {kind.name: kind for kind in (GAP, CONVERGENCE, LEARNING_CURVE, FIRST_ROUND, MODEL_COMPARISON, PARTITIONS)}


def kind_of(table: dict) -> TableKind:
    """The kind of an assembled table; a CRCError naming the table when no kind has its name."""
    name = table.get("kind")
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise CRCError(f"{table.get('table', 'table')}: unknown kind {name!r}; known: {', '.join(KINDS)}")
    return kind


__all__ = ["CONVERGENCE", "FIRST_ROUND", "GAP", "KINDS", "LEARNING_CURVE", "MODEL_COMPARISON", "PARTITIONS", "Plot", "TableKind",
           "kind_of"]
