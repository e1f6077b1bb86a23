"""What every kind of experiment table provides, and the grid layout (one line per data set) most kinds render with.

An assembled table is plain JSON::

    {"table", "title", "kind": a kind's name, "note", "columns": [{"key", "header", "paper_letter"}],
     "settings": {...}, "seconds": total compute time of its cells,
     "rows": [{"data": name, "cells": {column key: summary | {"skip": why} | {"pending": true}}}]}

A summary is what the table's kind made of the cell's results JSON; it always
has a ``value`` (the figure in the table).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crc.report.format import LEGEND, csv_number, gap, heading, markdown_row, number

PAPER_DATASET = "letter"
"""The one data set the paper shares with the bundled ones: its published figures (``paper_letter``) are shown beside it."""
CSV_HEADER = ("table", "data", "column", "header", "field", "value", "paper_letter")


@dataclass(frozen=True)
class Plot:
    """A figure a table offers: ``draw(path)`` writes ``<table>-<name>.png`` and the PDF beside it and returns both
    paths (matplotlib is imported only then)."""

    name: str
    draw: Callable[[Path], list[Path]]


class TableKind:
    """One kind of table: what its cells run, what each cell reports, and how the table is rendered and plotted.

    Subclasses set ``name`` (stored as the table's ``kind``) and the flags, and
    implement ``summarise``; the grid layout is changed through the
    ``headers``/``cell_text``/``paper_text``/``extra_*`` hooks.
    """

    name = ""
    needs_curve = False
    """Cells keep CRC's per-round errors (``--curve``)."""
    central_only = False
    """Cells run only centralized ML and RC: no network, no CRC."""
    columns_choose_model = False
    """The columns set the model, so the table's model option is ignored."""
    cell_fields: tuple[str, ...] = ("value",)
    """Fields every finished cell holds: the rendering reads them (``crc.report.sources`` checks them)."""
    nullable: tuple[str, ...] = ()
    """Fields of a cell that may be null; every other one holds a finite number (but ``curve`` and ``repeat_gaps``)."""
    paper_figures: int | None = None
    """How many figures a column's ``paper_letter`` holds when it holds any (None: any number)."""

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict | None:
        """The summary of a finished cell from its results JSON.

        ``row`` holds the results of every finished cell of the same data set,
        by column key. None means the cell waits for another one to finish.
        """
        raise NotImplementedError

    def plots(self, table: dict) -> list[Plot]:
        """The figures this table offers (none by default)."""
        return []

    def headers(self, column: dict) -> list[str]:
        """The Markdown headers of one column: one per figure it shows."""
        return [column["header"]]

    def cell_text(self, column: dict, cell: dict) -> list[str]:
        """The figures of one finished cell, as ``headers`` announces them."""
        return [gap(cell["value"])]

    def paper_text(self, column: dict) -> list[str]:
        """The paper's figures for ``letter`` under one column."""
        return [number(value) for value in column["paper_letter"]]

    def extra_headers(self) -> list[str]:
        """Headers of columns after the table's own (none by default)."""
        return []

    def extra_cells(self, row: dict) -> list[str]:
        return []

    def extra_paper(self) -> list[str]:
        return []

    def csv_fields(self, cell: dict, paper) -> list[tuple[str, float, object]]:
        """(field, value, the paper's figure or "") of a finished cell: every number it holds, the paper beside ``value``."""
        return [(key, value, paper[0] if paper and key == "value" else "")
                for key, value in cell.items() if isinstance(value, (int, float)) and not isinstance(value, bool)]

    def markdown(self, table: dict) -> str:
        """The table as Markdown: title, settings, one line per data set, the paper's line, legend, reasons for n/a."""
        columns = table["columns"]
        headers = ["Data set"] + [text for column in columns for text in self.headers(column)] + self.extra_headers()
        lines = heading(table) + [markdown_row(headers), markdown_row(["---"] + ["---:"] * (len(headers) - 1))]
        reasons = {}
        for row in table["rows"]:
            lines.append(markdown_row([row["data"]] + self._row_text(columns, row)))
            if row["data"] == PAPER_DATASET and any(column["paper_letter"] for column in columns):
                paper = [text for column in columns for text in self.paper_text(column)] + self.extra_paper()
                lines.append(markdown_row([f"{PAPER_DATASET} (paper)"] + paper))
            for column in columns:
                if "skip" in row["cells"][column["key"]]:
                    reasons.setdefault(row["cells"][column["key"]]["skip"], []).append(f"{row['data']} {column['header']}")
        lines += ["", LEGEND] + [f"- n/a ({', '.join(where)}): {reason}." for reason, where in reasons.items()]
        return "\n".join(lines) + "\n"

    def _row_text(self, columns: list[dict], row: dict) -> list[str]:
        text = []
        for column in columns:
            cell = row["cells"][column["key"]]
            if "skip" in cell or "pending" in cell:
                text.extend(["n/a" if "skip" in cell else "…"] * len(self.headers(column)))
            else:
                text.extend(self.cell_text(column, cell))
        return text + self.extra_cells(row)

    def csv(self, table: dict) -> str:
        """One line per (data set, column, figure) with ``CSV_HEADER``; a cell not run has one ``status`` line.
        Figures have ``CSV_DIGITS`` significant digits (``crc.report.format.csv_number``)."""
        stream = io.StringIO()
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for row in table["rows"]:
            for column in table["columns"]:
                cell = row["cells"][column["key"]]
                where = [table["table"], row["data"], column["key"], column["header"]]
                if "skip" in cell or "pending" in cell:
                    writer.writerow(where + ["status", cell.get("skip", "pending"), ""])
                    continue
                paper = column["paper_letter"] if row["data"] == PAPER_DATASET else ()
                for field, value, figure in self.csv_fields(cell, paper):
                    writer.writerow(where + [field, csv_number(value), figure])
        return stream.getvalue()
