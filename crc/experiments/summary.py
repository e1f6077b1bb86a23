"""From finished cells to a table: the JSON that ``crc.report`` renders (its layout: ``crc.report.table_kind``).

Each finished cell is summarised by the table's kind (``TableKind.summarise``).
"""

from __future__ import annotations

from crc.experiments.grids import Table


def assemble(table: Table, datasets: list[str], records: dict) -> dict:
    """``records[(data, column key)]`` is a finished cell record or ``{"skip": why}``; missing means pending."""
    rows, seconds, settings = [], 0.0, {}
    for data in dict.fromkeys(datasets):
        finished = {key: record["results"] for (name, key), record in records.items() if name == data and "results" in record}
        cells = {}
        for column in table.columns:
            record = records.get((data, column.key))
            if record is None:
                cells[column.key] = {"pending": True}
                continue
            if "skip" in record:
                cells[column.key] = {"skip": record["skip"]}
                continue
            config = record["results"]["config"]
            seconds += record["seconds"]
            settings = {"model": "per column" if table.kind.columns_choose_model else config["model"],
                        "repeats": config["repeats"], "seed": config["seed"], "test_instances": table.test_size}
            summary = table.kind.summarise(column.key, record["results"], finished)
            cells[column.key] = {"pending": True} if summary is None else {**summary, "seconds": record["seconds"]}
        rows.append({"data": data, "cells": cells})
    return {
        "table": table.name, "title": table.title, "kind": table.kind.name, "note": table.note,
        "columns": [{"key": c.key, "header": c.header, "paper_letter": list(c.paper_letter)} for c in table.columns],
        "settings": settings, "seconds": seconds, "rows": rows,
    }
