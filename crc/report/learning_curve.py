"""Centralized RC's learning curve against a reference training size (table II)."""

from __future__ import annotations

import numpy as np

from crc.report.format import number
from crc.report.plots import gap_figure
from crc.report.table_kind import Plot, TableKind

PAPER_REFERENCE_SIZE = 10240
"""The training size of the paper's reference RC."""


class LearningCurveKind(TableKind):
    """Each size column: RC's test gap to the ``reference`` column, paired repeat by repeat (same seeds, same test
    sets); the reference column: RC's test error. A last column gives each data set's reference training size."""

    name = "learning_curve"
    central_only = True
    cell_fields = ("value", "train_size")
    reference = "reference"
    """The key of the reference column."""

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict | None:
        if column == self.reference:
            return {"value": results["rc"]["test_error"], "train_size": results["config"]["local_size"]}
        reference = row.get(self.reference)
        if reference is None:
            return None
        gaps = [r["rc"]["test_error"] - ref["rc"]["test_error"] for r, ref in zip(results["repeats"], reference["repeats"])]
        return {"value": float(np.mean(gaps)), "rc_test_error": results["rc"]["test_error"],
                "train_size": results["config"]["local_size"]}

    def cell_text(self, column: dict, cell: dict) -> list[str]:
        """The reference's error as a plain figure; the gaps highlighted."""
        return [number(cell["value"])] if column["key"] == self.reference else super().cell_text(column, cell)

    def extra_headers(self) -> list[str]:
        return ["ref. m"]

    def extra_cells(self, row: dict) -> list[str]:
        return [str(row["cells"].get(self.reference, {}).get("train_size", "n/a"))]

    def extra_paper(self) -> list[str]:
        return [str(PAPER_REFERENCE_SIZE)]

    def plots(self, table: dict) -> list[Plot]:
        """RC's test gap to the reference against the training size m (log scale), one line per data set."""
        series, sizes = {}, {}
        for row in table["rows"]:
            for column in table["columns"]:
                cell = row["cells"].get(column["key"], {})
                if column["key"] != self.reference and "value" in cell and "train_size" in cell:
                    series.setdefault(row["data"], []).append((cell["train_size"], cell["value"]))
                    sizes[cell["train_size"]] = column["header"]
        if not series:
            return []
        title = f"{table['table']}: {table['title']}"
        ticks = sorted(sizes.items())
        return [Plot("gap-size", lambda path: gap_figure(series, path, title=title, ylabel="test gap RC(m) − RC(reference)",
                                                         xlabel="training size m (log scale)", xscale="log", ticks=ticks))]
