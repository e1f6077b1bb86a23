"""From finished cells to a table: the figures each kind of table reports.

The assembled table is plain JSON::

    {"table", "title", "kind", "note", "columns": [{"key", "header", "paper_letter"}],
     "settings": {...}, "seconds": total compute time of its cells,
     "rows": [{"data": name, "cells": {column key: summary | {"skip": why} | {"pending": true}}}]}

Every summary has a ``value`` (the figure in the table); the other keys
depend on the table's kind.
"""

from __future__ import annotations

import numpy as np

from crc.experiments.grids import CONVERGENCE, FIRST_ROUND, GAP, MODEL_COMPARISON, TEST_INSTANCES, Table

CONVERGED = 0.01
"""The paper's threshold: CRC has converged to RC when the gap is below 0.01."""


def _curve(results: dict) -> list[dict]:
    return [{key: row[key] for key in ("round", "train_error", "test_error", "train_std", "test_std")} for row in results["rounds"]]


def gap_summary(results: dict) -> dict:
    summary = {
        "value": results["test_gap"], "train_gap": results["train_gap"],
        "crc_test_error": results["crc"]["test_error"], "rc_test_error": results["rc"]["test_error"],
        "ml_test_error": results["ml"]["test_error"], "test_std": results["crc"]["test_std"],
        "repeat_gaps": [r["test_gap"] for r in results["repeats"]],
    }
    if "density" in results:
        summary["density"] = results["density"]
    return summary


def convergence_summary(results: dict) -> dict:
    ml, rc, crc = results["ml"], results["rc"], results["crc"]
    return {
        "value": results["test_gap"],
        "train_ml_gap": ml["train_error"] - rc["train_error"], "train_gap": results["train_gap"],
        "train_std": crc["train_std"], "train_rc": rc["train_error"],
        "test_ml_gap": ml["test_error"] - rc["test_error"], "test_gap": results["test_gap"],
        "test_std": crc["test_std"], "test_rc": rc["test_error"],
        "ml_test_error": ml["test_error"], "rc_test_error": rc["test_error"], "curve": _curve(results),
    }


def first_round_summary(results: dict) -> dict:
    """The round-64 gap and the first round whose mean test gap is below 0.01 (None if none)."""
    rc_test = results["rc"]["test_error"]
    first = next((row["round"] for row in results["rounds"] if row["test_error"] - rc_test < CONVERGED), None)
    return {"value": results["test_gap"], "first_round": first, "rc_test_error": rc_test,
            "ml_test_error": results["ml"]["test_error"], "curve": _curve(results)}


def model_summary(results: dict) -> dict:
    """Test error and log-likelihood of ML, RC, CRC and the mixture-of-nodes baseline."""
    summary = {"value": results["test_gap"]}
    for name in ("ml", "rc", "crc", "mixture_of_nodes"):
        if name in results:
            summary[f"{name}_test_error"] = results[name]["test_error"]
            summary[f"{name}_test_loglik"] = results[name]["test_loglik"]
    return summary


def learning_curve_summary(results: dict, reference: dict) -> dict:
    """RC's test gap against the reference, paired repeat by repeat (same seeds, same test sets)."""
    gaps = [r["rc"]["test_error"] - ref["rc"]["test_error"] for r, ref in zip(results["repeats"], reference["repeats"])]
    return {"value": float(np.mean(gaps)), "rc_test_error": results["rc"]["test_error"], "train_size": results["config"]["local_size"]}


def reference_summary(results: dict) -> dict:
    return {"value": results["rc"]["test_error"], "train_size": results["config"]["local_size"]}


def assemble(table: Table, datasets: list[str], records: dict) -> dict:
    """``records[(data, column key)]`` is a finished cell record or ``{"skip": why}``; missing means pending."""
    rows, seconds, settings = [], 0.0, {}
    for data in dict.fromkeys(datasets):
        cells = {}
        reference = records.get((data, "reference"), {}).get("results")
        for column in table.columns:
            record = records.get((data, column.key))
            if record is None:
                cells[column.key] = {"pending": True}
                continue
            if "skip" in record:
                cells[column.key] = {"skip": record["skip"]}
                continue
            results = record["results"]
            seconds += record["seconds"]
            config = results["config"]
            settings = {"model": "per column" if table.keeps_model else config["model"], "repeats": config["repeats"],
                        "seed": config["seed"],
                        "test_instances": TEST_INSTANCES}
            if table.kind == GAP:
                cells[column.key] = gap_summary(results)
            elif table.kind == CONVERGENCE:
                cells[column.key] = convergence_summary(results)
            elif table.kind == MODEL_COMPARISON:
                cells[column.key] = model_summary(results)
            elif table.kind == FIRST_ROUND:
                cells[column.key] = first_round_summary(results)
            elif column.key == "reference":
                cells[column.key] = reference_summary(results)
            elif reference is None:
                cells[column.key] = {"pending": True}
                continue
            else:
                cells[column.key] = learning_curve_summary(results, reference)
            cells[column.key]["seconds"] = record["seconds"]
        rows.append({"data": data, "cells": cells})
    return {
        "table": table.name, "title": table.title, "kind": table.kind, "note": table.note,
        "columns": [{"key": c.key, "header": c.header, "paper_letter": list(c.paper_letter)} for c in table.columns],
        "settings": settings, "seconds": seconds, "rows": rows,
    }
