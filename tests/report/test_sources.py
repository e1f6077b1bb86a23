import json

import pytest

from crc.core.errors import CRCError
from crc.report.sources import RUN, TABLE, load_results

TABLE_JSON = {"table": "table4", "title": "t", "kind": "gap", "note": "", "settings": {}, "seconds": 0.0,
              "columns": [{"key": "tree", "header": "tree", "paper_letter": [0.46]}],
              "rows": [{"data": "letter", "cells": {"tree": {"value": 0.031}}}]}
RUN_JSON = {"config": {"data": "twonorm"}, "ml": {"test_error": 0.1}, "rc": {"test_error": 0.05},
            "crc": {"test_error": 0.06}, "rounds": []}


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
    ({**RUN_JSON, "rc": {"test_error": "low"}}, "run: rc needs a numeric test_error"),
    ({**RUN_JSON, "rounds": {}}, "run: rounds must be a list"),
])
def test_a_damaged_results_file_is_refused_in_one_line_naming_it(tmp_path, broken, problem):
    path = write(tmp_path, broken)
    with pytest.raises(CRCError, match=problem) as refused:
        load_results(path)
    assert str(refused.value).startswith(f"{path}: not a valid ") and "\n" not in str(refused.value)
