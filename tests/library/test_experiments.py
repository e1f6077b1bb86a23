import csv
import io
import json
from pathlib import Path

import pytest

from crc.core.acceleration import algorithm_settings, model_key
from crc.core.errors import CRCError
from crc.core.threads import single_threaded_blas
from crc.experiments import TABLES, run_experiments
from crc.experiments.grids import TEST_INSTANCES
from crc.experiments.runner import _is_done, plan
from crc.protocol import SimulationConfig, simulate, simulate_central
from crc.report.format import gap
from crc.report.model_comparison import DEFAULT_SUFFIX
from crc.report.tables import table_csv, table_markdown
from crc.topologies import network_factory

TINY = {"rounds": 4, "nodes": 15, "local_size": 10}  # 15 nodes leave room for a tree +80
UNCONVERGED = {"rc_converged": False}
"""No centralized RC run to convergence (4096 iterations a cell and repeat): for the tests that do not read it."""


def run(names, out, **options):
    calls = {"pending": None, "finished": []}

    def on_start(pending, cells):
        calls["pending"] = [(c.table, c.data, c.column) for c in pending]

    options = {"datasets": ["twonorm"], "repeats": 2, "seed": 3, "jobs": 1, "defaults": TINY, **options}
    tables = run_experiments(names, out=out, network_factory=network_factory, on_start=on_start,
                             on_cell=lambda cell, seconds: calls["finished"].append(cell.column), **options)
    return tables, calls


def test_a_tiny_grid_runs_end_to_end_and_matches_the_simulator(tmp_path):
    (table,), calls = run(["table4"], tmp_path, defaults={**TINY, **UNCONVERGED})
    assert len(calls["finished"]) == len(TABLES["table4"].columns)
    row = table["rows"][0]
    assert row["data"] == "twonorm" and set(row["cells"]) == {c.key for c in TABLES["table4"].columns}
    for name in ("table4.json", "table4.csv", "table4.md"):
        assert (tmp_path / name).stat().st_size > 0
    config = SimulationConfig(data="twonorm", topology="tree+10", repeats=2, seed=3, test_size=TEST_INSTANCES, algorithm="paper",
                              **TINY, **UNCONVERGED)
    direct = simulate(config, network_factory("tree+10"))
    assert row["cells"]["tree+10"]["value"] == pytest.approx(direct["test_gap"], abs=1e-12)
    assert row["cells"]["tree+10"]["density"] == pytest.approx(24 / 105)  # 14 tree edges + 10 of 105 possible


def test_finished_cells_are_not_run_again_and_damaged_or_changed_ones_are(tmp_path):
    run(["table12"], tmp_path)
    _, again = run(["table12"], tmp_path)
    assert again["pending"] == []
    (tmp_path / "cells" / "table12" / "twonorm" / "period2.json").write_text("{ not json")
    _, repaired = run(["table12"], tmp_path)
    assert repaired["pending"] == [("table12", "twonorm", "period2")]
    _, changed = run(["table12"], tmp_path, repeats=1)
    assert len(changed["pending"]) == len(TABLES["table12"].columns)


@pytest.mark.parametrize("table, column, damage", [
    ("table12", "period2", lambda r: r["results"].update(test_gap="x")),
    ("table12", "period2", lambda r: r["results"].pop("rc")),
    ("table12", "period2", lambda r: r.update(seconds="x")),
    ("table11", "iter2", lambda r: r["results"].update(rounds="x")),  # the first-round table reads the curve
])
def test_a_cell_file_of_its_configuration_but_damaged_otherwise_is_run_again(tmp_path, table, column, damage):
    """Such a file ended ``crc experiment`` in a traceback (ValueError, KeyError, TypeError) while writing the table."""
    run([table], tmp_path, defaults={**TINY, **UNCONVERGED})
    path = tmp_path / "cells" / table / "twonorm" / f"{column}.json"
    record = json.loads(path.read_text())
    damage(record)
    path.write_text(json.dumps(record))
    _, repaired = run([table], tmp_path, defaults={**TINY, **UNCONVERGED})
    assert repaired["pending"] == [(table, "twonorm", column)]


@pytest.mark.parametrize("damage", [lambda entry: [1], lambda entry: {**entry, "value": {"x": 1}},
                                    lambda entry: {**entry, "value": {"ml": "x", "rc": 1}},
                                    lambda entry: {**entry, "value": {**entry["value"], "rc": {"test_error": None}}}])
def test_a_damaged_entry_of_the_central_cache_is_computed_again(tmp_path, damage):
    """Each ended ``crc experiment`` in a traceback (AttributeError, KeyError, TypeError)."""
    run(["table12"], tmp_path)
    path = tmp_path / "cells" / "table12" / "twonorm" / "period2.json"
    before = json.loads(path.read_text())
    for entry in (tmp_path / ".cache" / "central").glob("*.json"):
        entry.write_text(json.dumps(damage(json.loads(entry.read_text()))))
    path.unlink()
    _, again = run(["table12"], tmp_path)
    assert again["pending"] == [("table12", "twonorm", "period2")]
    assert json.loads(path.read_text())["results"]["rc"] == before["results"]["rc"]


def test_parallel_workers_give_the_same_cells(tmp_path):
    """The workers run BLAS on one thread (the runner's SINGLE_THREAD_ENV): cells run in this process under the same
    limit are the same bits. Not under BLAS's default threads, which may split a reduction and move a last bit
    (docs/how-to/cluster.md: ``--jobs 1``), depending on the machine's core count and BLAS."""
    with single_threaded_blas():
        (serial,), _ = run(["table6"], tmp_path / "serial")
    (parallel,), _ = run(["table6"], tmp_path / "parallel", jobs=2)
    assert serial["rows"] == [
        {**row, "cells": {k: {**c, "seconds": serial["rows"][i]["cells"][k]["seconds"]} for k, c in row["cells"].items()}}
        for i, row in enumerate(parallel["rows"])
    ]


def test_cells_that_do_not_fit_are_marked_with_the_reason(tmp_path):
    (table,), calls = run(["table10"], tmp_path, defaults={"rounds": 2})
    assert calls["finished"] == []
    reasons = [cell["skip"] for cell in table["rows"][0]["cells"].values()]
    assert all(r == "needs 12800 training + 2000 test instances, has 7400" for r in reasons)
    assert "n/a" in (tmp_path / "table10.md").read_text()


def test_learning_curve_gaps_are_paired_against_the_reference(tmp_path):
    cells = plan(TABLES["table2"], ["twonorm"], repeats=2, seed=1)
    reference = next(c for c in cells if c.column == "reference")
    assert reference.config.local_size == 7400 - TEST_INSTANCES  # twonorm cannot spare 10240
    assert [c.column for c in cells if c.skip] == []
    (table,), _ = run(["table2"], tmp_path, seed=1, defaults=UNCONVERGED)  # the cells are RC's errors: 1 s, not 20
    cells = table["rows"][0]["cells"]
    central = {"data": "twonorm", "nodes": 1, "repeats": 2, "seed": 1, "test_size": TEST_INSTANCES, **UNCONVERGED}
    ref = simulate_central(SimulationConfig(local_size=5400, **central))
    small = simulate_central(SimulationConfig(local_size=40, **central))
    assert cells["reference"]["value"] == pytest.approx(ref["rc"]["test_error"])
    assert cells["m40"]["value"] == pytest.approx(small["rc"]["test_error"] - ref["rc"]["test_error"])


def test_first_round_below_threshold_is_read_off_the_mean_curve(tmp_path):
    (table,), _ = run(["table11"], tmp_path, defaults={"rounds": 6, "nodes": 6, "local_size": 15, **UNCONVERGED})
    cell = table["rows"][0]["cells"]["iter1"]
    gaps = [row["test_error"] - cell["rc_test_error"] for row in cell["curve"]]
    expected = next((t + 1 for t, g in enumerate(gaps) if g < 0.01), None)
    assert cell["first_round"] == expected and len(cell["curve"]) == 6


def test_unknown_experiment_and_impossible_cells_are_refused_clearly(tmp_path):
    with pytest.raises(CRCError, match="unknown experiment 'table99'"):
        run(["table99"], tmp_path)
    with pytest.raises(CRCError, match=r"table4 twonorm tree\+\d+: a tree on 6 nodes leaves 10 possible extra edges"):
        run(["table4"], tmp_path, defaults={"rounds": 2, "nodes": 6, "local_size": 10, **UNCONVERGED})


def test_markdown_highlights_gaps_and_shows_the_paper_beside_letter():
    assert gap(0.004) == "**0.004**" and gap(-0.02) == "**-0.020**" and gap(0.03) == "*0.030*" and gap(0.2) == "0.200"
    assert gap(-0.0001) == "**0.000**"
    table = {"table": "table4", "title": "t", "kind": "gap", "note": "", "settings": {}, "seconds": 0.0,
             "columns": [{"key": "tree", "header": "tree", "paper_letter": [0.46]}],
             "rows": [{"data": "letter", "cells": {"tree": {"value": 0.031, "seconds": 1.0}}},
                      {"data": "magic", "cells": {"tree": {"skip": "too small"}}}]}
    text = table_markdown(table)
    assert "| letter | *0.031* |" in text and "| letter (paper) | 0.46 |" in text
    assert "| magic | n/a |" in text and "n/a (magic tree): too small" in text
    rows = list(csv.DictReader(io.StringIO(table_csv(table))))
    value = next(r for r in rows if r["data"] == "letter" and r["field"] == "value")
    assert float(value["value"]) == 0.031 and value["paper_letter"] == "0.46"
    assert any(r["data"] == "magic" and r["value"] == "too small" for r in rows)
    json.dumps(table)


def test_model_comparison_grid_reports_every_model_and_the_baseline(tmp_path):
    (table,), _ = run(["circuits"], tmp_path, repeats=1, defaults={**TINY, **UNCONVERGED})
    cells = table["rows"][0]["cells"]
    keys = {"nb", "qda", "pc2", "pc4", "pc8", "pc-rg"}
    assert set(cells) == keys | {key + "-default" for key in keys}
    for column in table["columns"]:  # the paper's algorithm beside the default one, whatever --algorithm says
        stored = json.loads((tmp_path / "cells" / "circuits" / "twonorm" / f"{column['key']}.json").read_text())
        assert stored["results"]["config"]["algorithm"] == ("accelerated" if column["key"].endswith("-default") else "paper")
    for cell in cells.values():
        assert {"ml_test_error", "rc_test_error", "crc_test_error", "mixture_of_nodes_test_error",
                "crc_test_loglik", "mixture_of_nodes_test_loglik"} <= set(cell)
        assert cell["value"] == pytest.approx(cell["crc_test_error"] - cell["rc_test_error"])
    text = (tmp_path / "circuits.md").read_text()
    assert "| twonorm | PC K=4, paper |" in text and "| twonorm | PC K=4, default |" in text
    verdicts = text.split("Circuits against naive Bayes")[1]
    assert verdicts.count("twonorm: ") == 2 and ", default" in verdicts and ", paper" in verdicts


def test_the_algorithm_and_its_settings_are_columns_of_every_cell_and_key_them(tmp_path):
    (paper,), _ = run(["table12"], tmp_path, defaults={**TINY, "algorithm": None, "momentum": None})  # unset options
    stored = json.loads((tmp_path / "cells" / "table12" / "twonorm" / "period1.json").read_text())["results"]["config"]
    assert stored["algorithm"] == "paper" and stored["exact_diffusion"] is False and stored["iters"] == 1
    (fast,), calls = run(["table12"], tmp_path, defaults={**TINY, "algorithm": "accelerated"})
    assert len(calls["pending"]) == len(TABLES["table12"].columns)  # not the paper's cells: run again
    stored = json.loads((tmp_path / "cells" / "table12" / "twonorm" / "period1.json").read_text())["results"]["config"]
    assert stored["algorithm"] == "accelerated"
    assert stored["exact_diffusion"] is True and stored["momentum"] == 0.0
    assert stored["iters"] == algorithm_settings("accelerated", "nb")["iters"]
    config = SimulationConfig.from_settings(data="twonorm", period=1, repeats=2, seed=3, test_size=TEST_INSTANCES,
                                            algorithm="accelerated", **TINY)
    direct = simulate(config, network_factory("tree", 1))
    assert fast["rows"][0]["cells"]["period1"]["value"] == pytest.approx(direct["test_gap"], abs=1e-12)
    assert fast["rows"][0]["cells"]["period1"]["converged_gap"] == pytest.approx(direct["test_gap_converged"], abs=1e-12)
    assert "(" in table_markdown(fast)  # the gap to converged RC in brackets


def test_the_partitions_table_runs_resumably_on_its_own_data_sets_beside_the_paper(tmp_path):
    """fedpc: every cell trains on all that its 20 % test set leaves; vertical cells record their resolved
    configuration, so a second run finds every cell done; the Markdown cites the paper's Table 6."""
    quick = {"rounds": 8, "rc_iterations": 8}
    (table,), calls = run(["fedpc"], tmp_path, datasets=None, repeats=1, defaults=quick)
    assert [row["data"] for row in table["rows"]] == ["wdbc", "german"]
    assert len(calls["finished"]) == 2 * len(TABLES["fedpc"].columns)
    _, again = run(["fedpc"], tmp_path, datasets=None, repeats=1, defaults=quick)
    assert again["pending"] == []
    wdbc = table["rows"][0]["cells"]
    assert wdbc["v2-nb"]["crc_accuracy"] == pytest.approx(wdbc["v2-nb"]["rc_accuracy"], abs=1e-12)
    assert all(0.5 < cell["baseline_accuracy"] <= 1 and 0 <= cell["crc_f1"] <= 1 for cell in wdbc.values())
    text = (tmp_path / "fedpc.md").read_text()
    assert "| vertical, 2 peers | FC [PC] (paper, cited) | 0.96 | 0.96 | 0.92 | 0.67 |" in text
    assert "20% of each data set as test instances" in text


def test_every_table_runs_the_papers_algorithm_unless_told_otherwise():
    partitions = {"fedpc", "blocks"}  # not tables of the CRC paper: the recommended algorithm
    assert {table.algorithm for name, table in TABLES.items() if name not in partitions} == {"paper"}
    assert {TABLES[name].algorithm for name in partitions} == {"accelerated"}
    for name, table in TABLES.items():
        if name in partitions:
            continue
        for cell in plan(table, ["twonorm"], repeats=1, seed=0):
            if name == "circuits" and cell.column.endswith(DEFAULT_SUFFIX):  # the default algorithm beside the paper's
                key = model_key(cell.config.model, cell.config.model_options.get("structure"))
                expected = algorithm_settings("accelerated", key)["iters"]
                assert (cell.config.algorithm, cell.config.exact_diffusion, cell.config.iters) == ("accelerated", True, expected)
                continue
            assert cell.config.algorithm == "paper" and cell.config.exact_diffusion is False, (name, cell.column)
            assert cell.config.iters == cell.config.to_json()["iters"] == table_iters(table, cell.column)
    accelerated = plan(TABLES["table4"], ["twonorm"], repeats=1, seed=0, defaults={"algorithm": "accelerated"})
    nb_steps = algorithm_settings("accelerated", "nb")["iters"]
    assert {(c.config.algorithm, c.config.exact_diffusion, c.config.iters) for c in accelerated} == {("accelerated", True, nb_steps)}


def table_iters(table, column) -> int:
    """The local steps a column of the paper's tables runs: its own (table 11), else the paper's one."""
    return next(c.overrides.get("iters", 1) for c in table.columns if c.key == column)


COMMITTED = Path(__file__).resolve().parents[2] / "results"


@pytest.mark.skipif(not (COMMITTED / "cells").is_dir(), reason="needs the checkout's results/")
@pytest.mark.parametrize("name", sorted(path.name for path in (COMMITTED / "cells").glob("*")))
def test_the_committed_cells_of_the_papers_tables_are_still_the_cells_they_plan(name):
    """The figures in results/ stay as committed: ``crc experiment`` finds each committed cell done (its stored
    configuration is the one the grid plans now, with the paper's algorithm), so it would not run it again."""
    table = json.loads((COMMITTED / f"{name}.json").read_text())
    cells = plan(TABLES[name], [row["data"] for row in table["rows"]], repeats=5, seed=0)
    stored = [cell for cell in cells if cell.path(COMMITTED).exists()]
    assert stored and all(_is_done(cell, COMMITTED) for cell in stored)
    if TABLES[name].algorithm == "paper":  # the paper's tables; fedpc's horizontal columns run the default
        assert all(cell.config.algorithm == "paper" for cell in cells if not cell.column.endswith(DEFAULT_SUFFIX))
