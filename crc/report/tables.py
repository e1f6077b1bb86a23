"""Markdown and CSV of experiment tables (each rendered by its kind) and of simulation or launch runs."""

from __future__ import annotations

import csv
import io

from crc.report.format import HIGHLIGHTING, csv_number, gap, markdown_row, model_of, number
from crc.report.kinds import kind_of


def table_markdown(table: dict) -> str:
    """An assembled table as Markdown, with its title, settings, legend and the reasons for cells not run."""
    return kind_of(table).markdown(table)


def table_csv(table: dict) -> str:
    """One line per (data set, column, figure): table, data, column, header, field, value, paper."""
    return kind_of(table).csv(table)


RUN_HEADERS = ["data", "model", "topology", "partition", "n", "m_v", "rounds", "ML test", "RC test", "CRC test", "CRC std",
               "train gap", "test gap", "RC conv. test", "test gap to RC conv.", "majority test"]
""""RC conv." are empty for runs recorded before RC to convergence was reported, "majority test" (always the training
set's most frequent class, the trivial baseline) for runs recorded before it was."""


def _run_row(results: dict) -> list:
    config = results["config"]
    topology = config["topology"] + (f" (period {config['period']})" if config.get("period") else "")
    if config.get("sum_over") == "network":  # every peer averaged the whole network, the graph only relaying the sum
        topology += " (network sum)"
    if str(config.get("partition", "")).startswith("vertical"):
        topology = "–"  # one group, whose members all talk to its label holder: no graph of groups
    return [config["data"], model_of(config), topology, config.get("partition", "iid"), config["nodes"], config["local_size"],
            config["rounds"], results["ml"]["test_error"], results["rc"]["test_error"], results["crc"]["test_error"],
            results["crc"]["test_std"], results["train_gap"], results["test_gap"],
            results.get("rc_converged", {}).get("test_error"), results.get("test_gap_converged"),
            results.get("majority", {}).get("test_error")]


def runs_markdown(runs: list[dict]) -> str:
    """Simulation (or launch) results, one line each."""
    lines = [markdown_row(RUN_HEADERS), markdown_row(["---"] * 6 + ["---:"] * 10)]
    for results in runs:
        row = _run_row(results)
        lines.append(markdown_row([str(v) for v in row[:7]] + [number(v, 3) for v in row[7:11]]
                                  + [gap(row[11]), gap(row[12]), number(row[13], 3), number(row[14], 3), number(row[15], 3)]))
    return "\n".join(lines) + "\n\n" + HIGHLIGHTING + ".\n"


def runs_csv(runs: list[dict]) -> str:
    """Simulation (or launch) results, one CSV line each; figures to ``CSV_DIGITS`` significant digits."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([h.lower().replace(" ", "_") for h in RUN_HEADERS])
    for results in runs:
        writer.writerow(["" if v is None else csv_number(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                         for v in _run_row(results)])
    return stream.getvalue()
