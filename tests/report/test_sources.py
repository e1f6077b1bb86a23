import json

import pytest

from crc.core.errors import CRCError
from crc.report.sources import RUN, TABLE, load_results
from support.cli import run

TABLE_JSON = {"table": "table4", "title": "t", "kind": "gap", "note": "", "settings": {}, "seconds": 0.0,
              "columns": [{"key": "tree", "header": "tree", "paper_letter": [0.46]}],
              "rows": [{"data": "letter", "cells": {"tree": {"value": 0.031}}}]}
RUN_JSON = {"config": {"data": "twonorm", "model": "nb", "topology": "tree", "nodes": 3, "local_size": 50, "rounds": 8},
            "ml": {"test_error": 0.1}, "rc": {"test_error": 0.05}, "crc": {"test_error": 0.06, "test_std": 0.01},
            "train_gap": 0.02, "test_gap": 0.01, "rounds": []}


def write(tmp_path, obj):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(obj))
    return path


def test_tables_and_runs_are_recognised(tmp_path):
    assert load_results(write(tmp_path, TABLE_JSON)) == (TABLE, TABLE_JSON)
    assert load_results(write(tmp_path, RUN_JSON)) == (RUN, RUN_JSON)


@pytest.mark.parametrize("broken, problem", [
    ({**TABLE_JSON, "kind": "bars"}, "experiment table: unknown kind 'bars'"),
    ({**TABLE_JSON, "columns": [{"key": "tree"}]}, "columns must be a list of {key, header, paper_letter}"),
    ({**TABLE_JSON, "rows": [{"data": 3, "cells": {}}]}, "row 1 needs a data set name"),
    ({**TABLE_JSON, "rows": [{"data": "letter", "cells": {}}]}, r"row 1 \(letter\) has no cell for column tree"),
    ({**RUN_JSON, "rc": {"test_error": "low"}}, "run: rc.test_error must be a finite number, got .low."),
    ({**RUN_JSON, "rounds": {}}, "run: rounds must be a list"),
    # each of these made `crc report` end in a traceback (KeyError, TypeError, ValueError)
    ({**TABLE_JSON, "note": 1e308}, "experiment table: note must be a string, got 1e[+]308"),
    ({**TABLE_JSON, "columns": [{"key": [], "header": "tree", "paper_letter": []}]}, "each key a string"),
    ({**TABLE_JSON, "columns": [{**TABLE_JSON["columns"][0], "paper_letter": "x"}]},
     "columns.0..paper_letter must be a list of finite numbers"),
    ({**TABLE_JSON, "settings": "x"}, "settings must be an object, got 'x'"),
    ({**TABLE_JSON, "settings": {"model": "nb", "repeats": 5, "seed": 0}}, "settings.test_instances must be a finite number"),
    ({**TABLE_JSON, "rows": [{"data": "letter", "cells": {"tree": {"value": None}}}]}, "letter tree.value must be a finite"),
    ({**TABLE_JSON, "rows": [{"data": "letter", "cells": {"tree": {"a": 1}}}]}, "cell letter tree has no value"),
    ({**TABLE_JSON, "kind": "first_round"}, r"columns\[0\].paper_letter must hold 2 figures, not 1"),
    ({**TABLE_JSON, "kind": "first_round", "columns": [{**TABLE_JSON["columns"][0], "paper_letter": [0.5, 3]}]},
     "cell letter tree has no rc_test_error, ml_test_error, first_round"),
    ({**TABLE_JSON, "kind": "convergence", "rows": [{"data": "letter", "cells": {"tree": {
        "value": 0.1, "rc_test_error": 0.1, "ml_test_error": 0.1, "curve": [{"round": "1"}],
        **dict.fromkeys(["train_ml_gap", "train_gap", "train_std", "train_rc", "test_ml_gap", "test_gap", "test_std", "test_rc"], 0.1)}}}]},
     r"letter tree.curve\[0\].round must be an integer"),
    ({**RUN_JSON, "rounds": [{"round": 1, "test_error": 0.2, "test_std": 1e308}]}, r"rounds\[0\].test_std must be"),
    ({**RUN_JSON, "config": {}}, "run: config.data must be a string, got null"),
    ({**RUN_JSON, "config": {**RUN_JSON["config"], "topology": None}}, "run: config.topology must be a string, got null"),
    ({**RUN_JSON, "config": {**RUN_JSON["config"], "nodes": True}}, "run: config.nodes must be an integer, got true"),
    ({**RUN_JSON, "crc": {"test_error": 0.06, "test_std": "x"}}, "run: crc.test_std must be a finite number, got 'x'"),
    ({**RUN_JSON, "test_gap": [1]}, "run: test_gap must be a finite number, got a list of 1 entries"),
    ({**RUN_JSON, "rc_converged": {"test_error": {}}}, "run: rc_converged.test_error must be a finite number"),
    ({**RUN_JSON, "majority": {"test_error": "x"}}, "run: majority.test_error must be a finite number"),
    ({**RUN_JSON, "majority": [0.5]}, "run: majority must be an object"),
    # errors are fractions and gaps their differences: these were rendered as -5.000 and a number of 300 digits
    ({**RUN_JSON, "crc": {"test_error": -5, "test_std": 0.01}}, "run: crc.test_error must be from 0 to 1, got -5"),
    ({**RUN_JSON, "ml": {"test_error": 1e300}}, "run: ml.test_error must be from 0 to 1, got 1e[+]300"),
    ({**RUN_JSON, "crc": {"test_error": 0.06, "test_std": 2}}, "run: crc.test_std must be from 0 to 1, got 2"),
    ({**RUN_JSON, "test_gap": -1.5}, "run: test_gap must be from -1 to 1, got -1.5"),
    ({**RUN_JSON, "test_gap_converged": 3}, "run: test_gap_converged must be from -1 to 1, got 3"),
    ({**RUN_JSON, "majority": {"test_error": 1.5}}, "run: majority.test_error must be from 0 to 1, got 1.5"),
])
def test_a_damaged_results_file_is_refused_in_one_line_naming_it(tmp_path, broken, problem):
    path = write(tmp_path, broken)
    with pytest.raises(CRCError, match=problem) as refused:
        load_results(path)
    assert str(refused.value).startswith(f"{path}: not a valid ") and "\n" not in str(refused.value)
    assert run("report", path).exit_code == 1


def test_a_name_with_a_bar_or_a_line_break_stays_in_its_markdown_cell(tmp_path):
    """A data set named 'a|b' and a line break split its row into more cells and a line of its own."""
    path = write(tmp_path, {**RUN_JSON, "config": {**RUN_JSON["config"], "data": "a|b\n# c\r"}})
    result = run("report", path)
    assert result.exit_code == 0
    row = next(line for line in result.output.splitlines() if "nb" in line)
    assert row.startswith(r"| a\|b # c  | nb |") and row.count(" | ") == 15
