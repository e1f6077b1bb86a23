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
    ({**RUN_JSON, "config": {}}, "run: config.data must be a string, got null"),
    ({**RUN_JSON, "config": {**RUN_JSON["config"], "topology": None}}, "run: config.topology must be a string, got null"),
    ({**RUN_JSON, "config": {**RUN_JSON["config"], "nodes": True}}, "run: config.nodes must be an integer, got true"),
    ({**RUN_JSON, "crc": {"test_error": 0.06, "test_std": "x"}}, "run: crc.test_std must be a finite number, got 'x'"),
    ({**RUN_JSON, "test_gap": [1]}, "run: test_gap must be a finite number, got a list of 1 entries"),
    ({**RUN_JSON, "rc_converged": {"test_error": {}}}, "run: rc_converged.test_error must be a finite number"),
])
def test_a_damaged_results_file_is_refused_in_one_line_naming_it(tmp_path, broken, problem):
    path = write(tmp_path, broken)
    with pytest.raises(CRCError, match=problem) as refused:
        load_results(path)
    assert str(refused.value).startswith(f"{path}: not a valid ") and "\n" not in str(refused.value)
    assert run("report", path).exit_code == 1
