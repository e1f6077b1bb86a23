"""Markdown and CSV renderings of experiment tables and of simulation results.

Gaps are highlighted as in the paper: **bold** below 0.01 (converged), *italic*
below 0.05. Where the paper published a figure for the same data set
(``letter``), a row with the paper's figures follows ours.
"""

from __future__ import annotations

import csv
import io

from crc.experiments.grids import CONVERGENCE, CONVERGENCE_FIELDS, FIRST_ROUND, LEARNING_CURVE, MODEL_COMPARISON
from crc.experiments.summary import CONVERGED

NEAR = 0.05
PAPER_DATASET = "letter"
LEGEND = f"**bold**: gap < {CONVERGED}; *italic*: gap < {NEAR}; n/a: cell not run (reason below)."


def number(value, digits: int = 2) -> str:
    """A figure with ``digits`` decimals, never '-0.00'."""
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def gap(value) -> str:
    """A gap (3 decimals, so that the highlighting can be read off the figure) with the paper's highlighting."""
    text = number(value, 3)
    if value is None:
        return text
    if value < CONVERGED:
        return f"**{text}**"
    return f"*{text}*" if value < NEAR else text


def _subheaders(table: dict) -> list[str]:
    if table["kind"] == CONVERGENCE:
        return [header for header, _ in CONVERGENCE_FIELDS]
    if table["kind"] == FIRST_ROUND:
        return [f"{c['header']} {part}" for c in table["columns"] for part in ("gap", "t")]
    headers = [c["header"] for c in table["columns"]]
    return headers + ["ref. m"] if table["kind"] == LEARNING_CURVE else headers


def _cells(table: dict, row: dict) -> list[str]:
    """The rendered figures of one data set's row."""
    out = []
    for column in table["columns"]:
        cell = row["cells"][column["key"]]
        if "skip" in cell or "pending" in cell:
            width = {CONVERGENCE: len(CONVERGENCE_FIELDS), FIRST_ROUND: 2}.get(table["kind"], 1)
            out.extend(["n/a" if "skip" in cell else "…"] * width)
        elif table["kind"] == CONVERGENCE:
            out.extend(gap(cell[key]) if key.endswith("gap") else number(cell[key]) for _, key in CONVERGENCE_FIELDS)
        elif table["kind"] == FIRST_ROUND:
            out.extend([gap(cell["value"]), str(cell["first_round"] or "–")])
        elif column["key"] == "reference":
            out.append(number(cell["value"]))
        else:
            out.append(gap(cell["value"]))
    if table["kind"] == LEARNING_CURVE:
        reference = row["cells"].get("reference", {})
        out.append(str(reference.get("train_size", "n/a")))
    return out


def _paper_cells(table: dict) -> list[str]:
    out = []
    for column in table["columns"]:
        figures = column["paper_letter"]
        if table["kind"] == FIRST_ROUND:
            out.extend([number(figures[0]), str(figures[1])])
        else:
            out.extend(number(v) for v in figures)
    return out + (["10240"] if table["kind"] == LEARNING_CURVE else [])


def _markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _heading(table: dict) -> list[str]:
    lines = [f"# {table['table']}: {table['title']}", ""]
    settings = table.get("settings") or {}
    if settings:
        lines += [f"Model {settings['model']}, {settings['repeats']} repeat(s) (seed {settings['seed']}), "
                  f"{settings['test_instances']} test instances per repeat; compute time {table['seconds']:.0f} s.", ""]
    if table.get("note"):
        lines += [table["note"], ""]
    return lines


MODEL_FIELDS = (("ML error", "ml_test_error"), ("RC error", "rc_test_error"), ("CRC error", "crc_test_error"),
                ("mixture-of-nodes error", "mixture_of_nodes_test_error"), ("ML log-lik", "ml_test_loglik"),
                ("RC log-lik", "rc_test_loglik"), ("CRC log-lik", "crc_test_loglik"),
                ("mixture-of-nodes log-lik", "mixture_of_nodes_test_loglik"))


def _models_markdown(table: dict) -> str:
    """One line per (data set, model): test errors and mean test log-likelihoods, the gap, and PC against NB."""
    headers = ["Data set", "model"] + [h for h, _ in MODEL_FIELDS[:3]] + ["gap CRC - RC"] + [h for h, _ in MODEL_FIELDS[3:]]
    lines = _heading(table) + [_markdown_row(headers), _markdown_row(["---", "---"] + ["---:"] * (len(headers) - 2))]
    verdicts = []
    for row in table["rows"]:
        for column in table["columns"]:
            cell = row["cells"][column["key"]]
            if "value" not in cell:
                lines.append(_markdown_row([row["data"], column["header"]] + ["n/a" if "skip" in cell else "…"] * (len(headers) - 2)))
                continue
            figures = [number(cell.get(key), 3) for _, key in MODEL_FIELDS[:3]] + [gap(cell["value"])]
            figures += [number(cell.get(MODEL_FIELDS[3][1]), 3)] + [_loglik(cell.get(key)) for _, key in MODEL_FIELDS[4:]]
            lines.append(_markdown_row([row["data"], column["header"]] + figures))
        verdicts.append(_circuit_verdict(table, row))
    lines += ["", LEGEND.split("; n/a")[0] + ". Log-likelihoods: mean log p(x, y) per test instance, "
              "continuous features standardized; CRC's is the mean over peers.", "", "Circuits against naive Bayes "
              "(CRC test error at round 64):", ""] + [f"- {v}" for v in verdicts if v]
    return "\n".join(lines) + "\n"


def _loglik(value) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if abs(value) < 1e4 else f"{value:.2e}"


def _circuit_verdict(table: dict, row: dict) -> str:
    cells = row["cells"]
    nb = cells.get("nb", {}).get("crc_test_error")
    circuits = {c["header"]: cells[c["key"]]["crc_test_error"] for c in table["columns"]
                if c["key"].startswith("pc") and "crc_test_error" in cells.get(c["key"], {})}
    if nb is None or not circuits:
        return ""
    best = min(circuits, key=circuits.get)
    if circuits[best] < nb:
        return f"{row['data']}: {best} beats NB ({circuits[best]:.4f} against {nb:.4f})."
    return f"{row['data']}: no circuit beats NB (best {best}, {circuits[best]:.4f} against {nb:.4f})."


def table_markdown(table: dict) -> str:
    """The table as Markdown, with its title, settings, legend and the reasons for cells not run."""
    if table["kind"] == MODEL_COMPARISON:
        return _models_markdown(table)
    headers = ["Data set"] + _subheaders(table)
    lines = _heading(table) + [_markdown_row(headers), _markdown_row(["---"] + ["---:"] * (len(headers) - 1))]
    reasons = {}
    for row in table["rows"]:
        lines.append(_markdown_row([row["data"]] + _cells(table, row)))
        if row["data"] == PAPER_DATASET and any(c["paper_letter"] for c in table["columns"]):
            lines.append(_markdown_row([f"{PAPER_DATASET} (paper)"] + _paper_cells(table)))
        for column in table["columns"]:
            if "skip" in row["cells"][column["key"]]:
                reasons.setdefault(row["cells"][column["key"]]["skip"], []).append(f"{row['data']} {column['header']}")
    lines += ["", LEGEND]
    for reason, where in reasons.items():
        lines.append(f"- n/a ({', '.join(where)}): {reason}.")
    return "\n".join(lines) + "\n"


def table_csv(table: dict) -> str:
    """One line per (data set, column, figure): table, data, column, header, field, value, paper."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["table", "data", "column", "header", "field", "value", "paper_letter"])
    for row in table["rows"]:
        for index, column in enumerate(table["columns"]):
            cell = row["cells"][column["key"]]
            if "skip" in cell or "pending" in cell:
                writer.writerow([table["table"], row["data"], column["key"], column["header"], "status",
                                 cell.get("skip", "pending"), ""])
                continue
            paper = column["paper_letter"] if row["data"] == PAPER_DATASET else ()
            fields = [(key, cell[key]) for _, key in CONVERGENCE_FIELDS] if table["kind"] == CONVERGENCE else \
                [(key, value) for key, value in cell.items() if isinstance(value, (int, float)) and not isinstance(value, bool)]
            for position, (key, value) in enumerate(fields):
                figure = paper[position] if table["kind"] == CONVERGENCE and position < len(paper) else \
                    (paper[0] if paper and key == "value" else "")
                writer.writerow([table["table"], row["data"], column["key"], column["header"], key, repr(float(value)), figure])
    return stream.getvalue()


RUN_HEADERS = ["data", "model", "topology", "partition", "n", "m_v", "rounds", "ML test", "RC test", "CRC test", "CRC std",
               "train gap", "test gap"]


def _run_row(results: dict) -> list:
    config = results["config"]
    topology = config["topology"] + (f" (period {config['period']})" if config.get("period") else "")
    return [config["data"], config["model"], topology, config.get("partition", "iid"), config["nodes"], config["local_size"],
            config["rounds"], results["ml"]["test_error"], results["rc"]["test_error"], results["crc"]["test_error"],
            results["crc"]["test_std"], results["train_gap"], results["test_gap"]]


def runs_markdown(runs: list[dict]) -> str:
    """Simulation (or launch) results, one line each."""
    lines = [_markdown_row(RUN_HEADERS), _markdown_row(["---"] * 6 + ["---:"] * 7)]
    for results in runs:
        row = _run_row(results)
        lines.append(_markdown_row([str(v) for v in row[:7]] + [number(v, 3) for v in row[7:11]]
                                   + [gap(row[11]), gap(row[12])]))
    return "\n".join(lines) + "\n\n" + LEGEND.split("; n/a")[0] + ".\n"


def runs_csv(runs: list[dict]) -> str:
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([h.lower().replace(" ", "_") for h in RUN_HEADERS])
    for results in runs:
        writer.writerow(_run_row(results))
    return stream.getvalue()
