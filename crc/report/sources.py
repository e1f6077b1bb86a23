"""Read results files (a simulation/launch run, or an experiment table) and pull out what reports need."""

from __future__ import annotations

from crc.core.errors import CRCError
from crc.core.files import read_json

RUN, TABLE = "run", "table"


def load_results(path) -> tuple[str, dict]:
    """(kind, object) of a results JSON file; anything else is a CRCError naming the file."""
    obj = read_json(path, what="results file")
    try:
        if isinstance(obj, dict) and {"table", "rows", "columns"} <= obj.keys():
            for row in obj["rows"]:
                assert isinstance(row["data"], str) and isinstance(row["cells"], dict)
            return TABLE, obj
        if isinstance(obj, dict) and {"config", "ml", "rc", "crc"} <= obj.keys():
            for name in ("ml", "rc", "crc"):
                assert isinstance(obj[name]["test_error"], (int, float))
            assert isinstance(obj.get("rounds", []), list)
            return RUN, obj
    except (AssertionError, KeyError, TypeError):
        pass
    raise CRCError(f"{path}: not a crc results file (neither `crc simulate --json` output nor an experiment table)")


def run_name(results: dict) -> str:
    config = results["config"]
    partition = config.get("partition", "iid")
    return f"{config['data']} {config['model']} {config['topology']}" + ("" if partition == "iid" else f" {partition}")


def run_curves(results: dict) -> list[dict]:
    """The per-round curve of one run ([] when it was run without --curve)."""
    if not results.get("rounds"):
        return []
    return [{"name": run_name(results), "rounds": results["rounds"], "rc_test_error": results["rc"]["test_error"],
             "ml_test_error": results["ml"]["test_error"]}]


def table_curves(table: dict) -> list[dict]:
    """Every cell of a table that kept its per-round curve (table3, table11)."""
    curves = []
    single = len(table["columns"]) == 1
    for row in table["rows"]:
        for column in table["columns"]:
            cell = row["cells"].get(column["key"], {})
            if cell.get("curve"):
                name = row["data"] if single else f"{row['data']} {column['header']}"
                curves.append({"name": name, "rounds": cell["curve"], "rc_test_error": cell["rc_test_error"],
                               "ml_test_error": cell["ml_test_error"]})
    return curves


def density_series(table: dict) -> dict[str, list[tuple[float, float]]]:
    """{data set: [(graph density, test gap)]} over the cells that recorded a density."""
    series = {}
    for row in table["rows"]:
        points = [(cell["density"], cell["value"]) for cell in row["cells"].values() if "density" in cell]
        if len({p[0] for p in points}) > 1:
            series[row["data"]] = points
    return series
