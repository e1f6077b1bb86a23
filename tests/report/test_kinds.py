import csv
import io
import subprocess
import sys

import pytest

from crc.core.errors import CRCError
from crc.experiments import TABLES
from crc.report.convergence import CONVERGENCE_FIELDS
from crc.report.format import CONVERGED
from crc.report.kinds import CONVERGENCE, FIRST_ROUND, GAP, KINDS, LEARNING_CURVE, MODEL_COMPARISON, kind_of
from crc.report.tables import table_csv, table_markdown

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def table(kind, columns, rows, name="t"):
    """An assembled table; ``columns`` are (key, header, paper_letter), ``rows`` (data, {key: cell})."""
    return {"table": name, "title": "title", "kind": kind.name, "note": "", "settings": {}, "seconds": 0.0,
            "columns": [{"key": k, "header": h, "paper_letter": list(p)} for k, h, p in columns],
            "rows": [{"data": data, "cells": cells} for data, cells in rows]}


def rounds(test_errors):
    return [{"round": t + 1, "train_error": e, "test_error": e, "train_std": 0.01, "test_std": 0.02}
            for t, e in enumerate(test_errors)]


def test_every_grid_refers_to_a_registered_kind_whose_flags_decide_the_cells():
    for grid in TABLES.values():
        assert KINDS[grid.kind.name] is grid.kind
    assert {name for name, grid in TABLES.items() if grid.needs_curve} == {"table3", "table11"}
    assert {name for name, grid in TABLES.items() if grid.central_only} == {"table2"}
    assert [name for name, grid in TABLES.items() if grid.kind.columns_choose_model] == ["circuits", "fedpc", "blocks"]
    assert any(column.key == LEARNING_CURVE.reference for column in TABLES["table2"].columns)


def test_the_report_layer_imports_neither_the_experiments_nor_matplotlib(tmp_path):
    """In a fresh process. That `crc report --help` and `crc experiment --help` each work in one of their own (no import
    cycle whichever comes first) is tests/cli/test_help.py's, which runs every command's."""
    code = ("import sys, crc.report.kinds, crc.report.tables, crc.report.sources, crc.report.plots, crc.cli.report; "
            "print(sorted(m for m in sys.modules if m.startswith(('crc.experiments', 'matplotlib'))))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_learning_curve_pairs_each_repeat_with_the_reference_and_waits_for_it():
    small = {"rc": {"test_error": 0.4}, "config": {"local_size": 40},
             "repeats": [{"rc": {"test_error": 0.3}}, {"rc": {"test_error": 0.5}}]}
    reference = {"rc": {"test_error": 0.2}, "config": {"local_size": 5400},
                 "repeats": [{"rc": {"test_error": 0.25}}, {"rc": {"test_error": 0.15}}]}
    assert LEARNING_CURVE.summarise("m40", small, {}) is None
    paired = LEARNING_CURVE.summarise("m40", small, {"m40": small, "reference": reference})
    assert paired == {"value": pytest.approx(0.2), "rc_test_error": 0.4, "train_size": 40}
    assert LEARNING_CURVE.summarise("reference", reference, {}) == {"value": 0.2, "train_size": 5400}


def test_first_round_is_the_first_whose_mean_gap_is_below_the_threshold():
    results = {"test_gap": 0.0, "rc": {"test_error": 0.2}, "ml": {"test_error": 0.3},
               "rounds": rounds([0.5, 0.3, 0.2 + 2 * CONVERGED, 0.2 + CONVERGED / 2, 0.2])}
    summary = FIRST_ROUND.summarise("iter1", results, {})
    assert summary["first_round"] == 4 and len(summary["curve"]) == 5
    never = FIRST_ROUND.summarise("iter1", {**results, "rounds": rounds([0.5, 0.3])}, {})
    assert never["first_round"] is None


def test_a_convergence_cell_not_run_spans_its_sub_columns_and_csv_pairs_the_paper_by_position():
    full = {key: 0.001 * (index + 1) for index, (_, key) in enumerate(CONVERGENCE_FIELDS)}
    paper = (0.50, 0.75, 0.00, 0.06, 0.38, 0.58, 0.00, 0.26)
    grid = table(CONVERGENCE, [("default", "default", paper)],
                 [("letter", {"default": {"value": 0.006, **full}}), ("magic", {"default": {"skip": "too small"}})])
    text = table_markdown(grid)
    assert "| Data set | " + " | ".join(h for h, _ in CONVERGENCE_FIELDS) + " |" in text
    assert "| magic |" + " n/a |" * len(CONVERGENCE_FIELDS) + "\n" in text
    assert "| letter (paper) | 0.50 | 0.75 | 0.00 | 0.06 | 0.38 | 0.58 | 0.00 | 0.26 |" in text
    rows = list(csv.DictReader(io.StringIO(table_csv(grid))))
    assert [(r["field"], r["paper_letter"]) for r in rows if r["data"] == "letter"] == [
        (key, str(figure)) for (_, key), figure in zip(CONVERGENCE_FIELDS, paper)]


def test_a_learning_curve_table_ends_with_the_reference_size():
    grid = table(LEARNING_CURVE, [("m40", "40", (0.77,)), ("reference", "ref. error", (0.19,))],
                 [("letter", {"m40": {"value": 0.004}, "reference": {"value": 0.2, "train_size": 10240}}),
                  ("twonorm", {"m40": {"pending": True}, "reference": {"skip": "too small"}})])
    text = table_markdown(grid)
    assert "| Data set | 40 | ref. error | ref. m |" in text
    assert "| letter | **0.004** | 0.20 | 10240 |" in text and "| letter (paper) | 0.77 | 0.19 | 10240 |" in text
    assert "| twonorm | … | n/a | n/a |" in text


def test_each_kind_offers_its_own_plots(tmp_path):
    curve = {"value": 0.0, "first_round": 3, "rc_test_error": 0.2, "ml_test_error": 0.3, "curve": rounds([0.4, 0.25, 0.2])}
    (plot,) = FIRST_ROUND.plots(table(FIRST_ROUND, [("iter1", "iter=1", (0.59, 64))], [("magic", {"iter1": curve})], "table11"))
    assert plot.name == "convergence"
    plot.draw(tmp_path / "figure.png")
    assert (tmp_path / "figure.png").read_bytes().startswith(PNG_SIGNATURE)
    topologies = [("tree", "tree", ()), ("tree+10", "+10", ())]

    def gaps(*densities):
        cells = {key: {"value": 0.1, "density": density} for (key, _, _), density in zip(topologies, densities)}
        return table(GAP, topologies, [("magic", cells)])

    spread, flat = gaps(0.04, 0.05), gaps(0.04, 0.04)
    assert [p.name for p in GAP.plots(spread)] == ["gap-density"]
    assert [p.name for p in GAP.plots(flat)] == ["gap"]  # nothing to put on an x axis: the columns in their order
    assert MODEL_COMPARISON.plots(table(MODEL_COMPARISON, [("nb", "NB", ())], [("magic", {"nb": {"value": 0.0}})])) == []
    with_errors = {"value": 0.01, "ml_test_error": 0.3, "rc_test_error": 0.2, "crc_test_error": 0.21}
    (errors,) = MODEL_COMPARISON.plots(table(MODEL_COMPARISON, [("nb", "NB", ())], [("magic", {"nb": with_errors})]))
    assert errors.name == "errors"


@pytest.mark.parametrize("keys, name", [
    (("n20", "n40"), "gap-nodes"), (("mv20", "mv40"), "gap-local-size"), (("periodinf", "period8"), "gap-period"),
    (("tree", "chain", "tree+10"), "gap-density"),
])
def test_a_gap_tables_figure_puts_what_its_columns_change_on_the_x_axis(tmp_path, keys, name):
    densities = {"tree": 0.04, "chain": 0.04, "tree+10": 0.05}
    cells = {key: {"value": 0.01 * index, "density": densities.get(key, 0.1)} for index, key in enumerate(keys)}
    (plot,) = GAP.plots(table(GAP, [(key, key, ()) for key in keys], [("magic", cells), ("letter", {k: {"skip": "x"} for k in keys})]))
    assert plot.name == name
    written = plot.draw(tmp_path / f"{name}.png")
    assert [path.name for path in written] == [f"{name}.png", f"{name}.pdf"]
    assert written[0].read_bytes().startswith(PNG_SIGNATURE) and written[1].read_bytes().startswith(b"%PDF")


def test_a_table_without_finished_cells_offers_no_figure():
    assert GAP.plots(table(GAP, [("n20", "n=20", ())], [("magic", {"n20": {"pending": True}})])) == []
    assert LEARNING_CURVE.plots(table(LEARNING_CURVE, [("m20", "20", ())], [("magic", {"m20": {"skip": "x"}})])) == []


def test_a_table_of_an_unknown_kind_is_refused_by_name():
    with pytest.raises(CRCError, match="table9: unknown kind 'bars'; known: gap, convergence"):
        kind_of({"table": "table9", "kind": "bars"})


def test_a_degenerate_log_likelihood_is_marked_and_explained_in_the_model_table():
    cell = {"value": 0.01, "ml_test_error": 0.3, "rc_test_error": 0.2, "crc_test_error": 0.21,
            "ml_test_loglik": -20.0, "rc_test_loglik": -21.0, "crc_test_loglik": -22.0, "mixture_of_nodes_test_loglik": -1.6e5}
    text = table_markdown(table(MODEL_COMPARISON, [("nb", "NB", ())], [("magic", {"nb": cell})], "circuits"))
    assert "| -20.00 | -21.00 | -22.00 | -1.60e+05† |" in text
    assert "† log-likelihood below -1000 per instance" in text
    cell["mixture_of_nodes_test_loglik"] = -30.0
    assert "†" not in table_markdown(table(MODEL_COMPARISON, [("nb", "NB", ())], [("magic", {"nb": cell})], "circuits"))


def test_table_csv_rounds_to_six_significant_digits():
    grid = table(GAP, [("tree", "tree", (0.46,))], [("letter", {"tree": {"value": 0.07986000000000001, "density": 0.04}})])
    rows = list(csv.DictReader(io.StringIO(table_csv(grid))))
    assert [(r["field"], r["value"], r["paper_letter"]) for r in rows] == [("value", "0.07986", "0.46"), ("density", "0.04", "")]


def test_the_model_table_names_each_model_worse_than_nb_under_crc_where_its_rc_is_better():
    def cell(rc, crc):
        return {"value": crc - rc, "rc_test_error": rc, "crc_test_error": crc}

    columns = [("nb", "NB, paper", ()), ("qda", "QDA, paper", ()), ("pc2", "PC K=2, paper", ()),
               ("nb-default", "NB, default", ()), ("pc2-default", "PC K=2, default", ())]
    cells = {"nb": cell(0.09, 0.06), "qda": cell(0.01, 0.17), "pc2": cell(0.10, 0.20),
             "nb-default": cell(0.09, 0.03), "pc2-default": cell(0.05, 0.02)}
    text = table_markdown(table(MODEL_COMPARISON, columns, [("texture", cells)], "circuits"))
    assert ("Worse under CRC than naive Bayes under CRC (same algorithm) although its RC is better: QDA, paper on "
            "`texture` (CRC 0.1700 against NB's 0.0600; RC 0.0100 against 0.0900).") in text
    cells["pc2-default"] = cell(0.05, 0.04)
    assert "better: PC K=2, default on `texture` (CRC 0.0400 against NB's 0.0300; RC 0.0500 against 0.0900); QDA" in table_markdown(
        table(MODEL_COMPARISON, columns, [("texture", cells)], "circuits"))
    cells.update(qda=cell(0.01, 0.05), **{"pc2-default": cell(0.05, 0.02)})
    assert "although its RC is better: none." in table_markdown(table(MODEL_COMPARISON, columns, [("texture", cells)], "circuits"))
