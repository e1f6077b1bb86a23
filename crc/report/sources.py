"""Read results files (a simulation/launch run, or an experiment table) and pull out what reports of runs need."""

from __future__ import annotations

from crc.core import fields
from crc.core.errors import CRCError
from crc.core.files import read_json
from crc.report.format import model_of
from crc.report.kinds import KINDS

RUN, TABLE = "run", "table"
METHODS = ("ml", "rc", "crc")


def load_results(path) -> tuple[str, dict]:
    """(RUN or TABLE, object) of a results JSON file; anything else is a CRCError naming the file."""
    obj = read_json(path, what="results file")
    if isinstance(obj, dict) and {"table", "rows", "columns"} <= obj.keys():
        source, what, problem = TABLE, "experiment table", _table_problem(obj)
    elif isinstance(obj, dict) and {"config", "ml", "rc", "crc"} <= obj.keys():
        source, what, problem = RUN, "run", _run_problem(obj)
    else:
        raise CRCError(f"{path}: not a crc results file (neither `crc simulate --json` output nor an experiment table)")
    if problem:
        raise CRCError(f"{path}: not a valid {what}: {problem}")
    return source, obj


def _table_problem(table: dict) -> str:
    """What makes an experiment table unreadable ("" if nothing): its layout, and every field its kind's rendering
    reads has its type."""
    if not isinstance(table.get("kind"), str) or table["kind"] not in KINDS:
        return f"unknown kind {table.get('kind')!r} (known: {', '.join(KINDS)})"
    kind, columns, rows = KINDS[table["kind"]], table["columns"], table["rows"]
    if not isinstance(columns, list) or not all(isinstance(c, dict) and {"key", "header", "paper_letter"} <= c.keys()
                                                and isinstance(c["key"], str) for c in columns):
        return "columns must be a list of {key, header, paper_letter}, each key a string"
    if not isinstance(rows, list):
        return "rows must be a list"
    for position, row in enumerate(rows, 1):
        if not (isinstance(row, dict) and isinstance(row.get("data"), str) and isinstance(row.get("cells"), dict)):
            return f"row {position} needs a data set name (data) and its cells"
        missing = [c["key"] for c in columns if not isinstance(row["cells"].get(c["key"]), dict)]
        if missing:
            return f"row {position} ({row['data']}) has no cell for column {', '.join(map(str, missing))}"
    try:
        _check_table_fields(table, kind)
    except CRCError as exc:
        return str(exc)
    return ""


def _check_table_fields(table: dict, kind) -> None:
    """A CRCError naming the first field of ``table`` whose type its rendering (``kind``'s) cannot take."""
    fields.string(table["table"], "table")
    fields.string(table.get("title"), "title")
    if table.get("note"):
        fields.string(table["note"], "note")
    settings = fields.mapping(table.get("settings") or {}, "settings")
    if settings:  # ``crc.report.format.heading``
        fields.number(settings.get("test_instances"), "settings.test_instances", positive=True)
        fields.string(settings.get("model"), "settings.model")
        fields.integer(settings.get("repeats"), "settings.repeats", low=1)
        fields.integer(settings.get("seed"), "settings.seed")
        fields.number(table.get("seconds"), "seconds", low=0)
    for index, column in enumerate(table["columns"]):
        fields.string(column["header"], f"columns[{index}].header")
        paper = fields.numbers(column["paper_letter"], f"columns[{index}].paper_letter")
        if paper.size and kind.paper_figures not in (None, paper.size):
            raise CRCError(f"columns[{index}].paper_letter must hold {kind.paper_figures} figures, not {paper.size}")
    for row in table["rows"]:
        for column in table["columns"]:
            cell, name = row["cells"][column["key"]], f"{row['data']} {column['key']}"
            if "skip" in cell:
                fields.string(cell["skip"], f"{name}.skip")
            elif "pending" not in cell:
                _check_cell(cell, kind, name)


def _check_cell(cell: dict, kind, name: str) -> None:
    """A finished cell: ``kind.cell_fields`` present, every field a finite number (or null if ``kind.nullable``),
    ``curve`` a list of rounds, ``repeat_gaps`` a list of numbers."""
    missing = [key for key in kind.cell_fields if key not in cell]
    if missing:
        raise CRCError(f"cell {name} has no {', '.join(missing)}")
    for key, value in cell.items():
        if key == "curve":
            _check_curve(value, f"{name}.curve")
        elif key == "repeat_gaps":
            fields.numbers(value, f"{name}.repeat_gaps")
        elif not (value is None and key in kind.nullable):
            fields.number(value, f"{name}.{key}")


def _check_curve(rounds, name: str) -> None:
    """Per-round errors as the convergence figure draws them: objects with an integer round, an error rate and its
    standard deviation (each in [0, 1]: a deviation of 1e308 made the figure's axes singular, a LinAlgError)."""
    if not isinstance(rounds, list):
        raise CRCError(f"{name} must be a list, got {fields.shown(rounds)}")
    for index, step in enumerate(rounds):
        step = fields.mapping(step, f"{name}[{index}]")
        fields.integer(step.get("round"), f"{name}[{index}].round", low=0)
        for key in ("test_error", "test_std"):
            fields.number(step.get(key), f"{name}[{index}].{key}", low=0, high=1)


def _run_problem(results: dict) -> str:
    """What makes a run's results unreadable ("" if nothing): every field a report of runs reads (``run_name``,
    ``crc.report.tables``) has its type."""
    try:
        config = fields.mapping(results["config"], "config")
        for key in ("data", "model", "topology", *(key for key in ("partition", "structure") if config.get(key) is not None)):
            fields.string(config.get(key), f"config.{key}")
        for key in ("nodes", "local_size", "rounds"):
            fields.integer(config.get(key), f"config.{key}", low=1)
        if config.get("period") is not None:
            fields.integer(config["period"], "config.period", low=1)
        for method in METHODS:  # error rates and their deviations are fractions, gaps their differences
            fields.number(fields.mapping(results[method], method).get("test_error"), f"{method}.test_error", low=0, high=1)
        fields.number(results["crc"].get("test_std"), "crc.test_std", low=0, high=1)
        for key in ("train_gap", "test_gap"):
            fields.number(results.get(key), key, low=-1, high=1)
        converged = fields.mapping(results.get("rc_converged", {}), "rc_converged")
        majority = fields.mapping(results.get("majority", {}), "majority")
        for name, value, low in (("rc_converged.test_error", converged.get("test_error"), 0),
                                 ("test_gap_converged", results.get("test_gap_converged"), -1),
                                 ("majority.test_error", majority.get("test_error"), 0)):
            if value is not None:
                fields.number(value, name, low=low, high=1)
        _check_curve(results.get("rounds", []), "rounds")
    except CRCError as exc:
        return str(exc)
    return ""


def run_name(results: dict) -> str:
    config = results["config"]
    partition = config.get("partition", "iid")
    return (f"{config['data']} {model_of(config)} {config['topology']}" + ("" if partition == "iid" else f" {partition}")
            + (" network sum" if config.get("sum_over") == "network" else ""))


def run_curves(results: dict) -> list[dict]:
    """The per-round curve of one run ([] when it was run without --curve), as ``crc.report.plots`` draws it."""
    if not results.get("rounds"):
        return []
    return [{"name": run_name(results), "rounds": results["rounds"], "rc_test_error": results["rc"]["test_error"],
             "ml_test_error": results["ml"]["test_error"]}]
