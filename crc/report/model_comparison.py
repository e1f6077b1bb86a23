"""The model comparison (NB, QDA, probabilistic circuits): errors and log-likelihoods of ML, RC, CRC and the
mixture-of-nodes baseline, one Markdown line per (data set, model)."""

from __future__ import annotations

from crc.report.format import DEGENERATE_NOTE, HIGHLIGHTING, degenerate_loglik, gap, heading, loglik, markdown_row, number
from crc.report.plots import methods_figure
from crc.report.table_kind import Plot, TableKind

METHODS = ("ml", "rc", "crc", "mixture_of_nodes")
MODEL_FIELDS = (("ML error", "ml_test_error"), ("RC error", "rc_test_error"), ("CRC error", "crc_test_error"),
                ("mixture-of-nodes error", "mixture_of_nodes_test_error"), ("ML log-lik", "ml_test_loglik"),
                ("RC log-lik", "rc_test_loglik"), ("CRC log-lik", "crc_test_loglik"),
                ("mixture-of-nodes log-lik", "mixture_of_nodes_test_loglik"))
"""The figures of a line: (header, key in the cell summary); the gap follows the first three."""
NAIVE_BAYES, CIRCUIT_PREFIX = "nb", "pc"
"""Column keys: naive Bayes, and the probabilistic circuits compared with it."""
DEFAULT_SUFFIX = "-default"
"""The circuits table's column keys under the default algorithm: the paper's column key and this suffix."""
ALGORITHM_SUFFIXES = (DEFAULT_SUFFIX, "")
"""A column key's ending that names its algorithm (the default one, else the paper's): a circuit is compared with
the naive Bayes column of its own algorithm."""


class ModelComparisonKind(TableKind):
    """Each cell: test error and mean test log-likelihood of every method the cell ran; the value is CRC's gap."""

    name = "models"
    columns_choose_model = True

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict:
        summary = {"value": results["test_gap"]}
        for method in METHODS:
            if method in results:
                summary[f"{method}_test_error"] = results[method]["test_error"]
                summary[f"{method}_test_loglik"] = results[method]["test_loglik"]
        return summary

    def markdown(self, table: dict) -> str:
        """One line per (data set, model): test errors, the gap, log-likelihoods; then whether a circuit beats NB,
        and every model worse than NB under CRC although better under RC."""
        headers = ["Data set", "model"] + [h for h, _ in MODEL_FIELDS[:3]] + ["gap CRC - RC"] + [h for h, _ in MODEL_FIELDS[3:]]
        lines = heading(table) + [markdown_row(headers), markdown_row(["---", "---"] + ["---:"] * (len(headers) - 2))]
        verdicts, worse = [], []
        for row in table["rows"]:
            for column in table["columns"]:
                cell = row["cells"][column["key"]]
                if "value" in cell:
                    figures = [number(cell.get(key), 3) for _, key in MODEL_FIELDS[:3]] + [gap(cell["value"])]
                    figures += [number(cell.get(MODEL_FIELDS[3][1]), 3)] + [loglik(cell.get(key)) for _, key in MODEL_FIELDS[4:]]
                else:
                    figures = ["n/a" if "skip" in cell else "…"] * (len(headers) - 2)
                lines.append(markdown_row([row["data"], column["header"]] + figures))
            verdicts += [_circuit_verdict(table, row, suffix) for suffix in ALGORITHM_SUFFIXES]
            worse += [line for suffix in ALGORITHM_SUFFIXES for line in _worse_than_nb(table, row, suffix)]
        lines += ["", f"{HIGHLIGHTING}. Log-likelihoods: mean log p(x, y) per test instance, "
                  "continuous features standardized; CRC's is the mean over peers."]
        if any(degenerate_loglik(cell.get(key)) for row in table["rows"] for cell in row["cells"].values()
               for _, key in MODEL_FIELDS[4:]):
            lines += ["", DEGENERATE_NOTE]
        lines += ["", "Circuits against naive Bayes (CRC test error at round 64):", ""] + [f"- {v}" for v in verdicts if v]
        lines += ["", "Worse under CRC than naive Bayes under CRC (same algorithm) although its RC is better: "
                  + ("; ".join(worse) or "none") + "."]
        return "\n".join(lines) + "\n"

    def plots(self, table: dict) -> list[Plot]:
        """Per data set, every model's test error under ML, RC and CRC (the gap: the line from RC to CRC)."""
        panels = {}
        for row in table["rows"]:
            models = []
            for column in table["columns"]:
                cell = row["cells"].get(column["key"], {})
                errors = {method: cell[f"{method}_test_error"] for method in ("ml", "rc", "crc") if f"{method}_test_error" in cell}
                if errors:
                    models.append((column["header"].replace("region graph", "RG"), errors))
            if models:
                panels[row["data"]] = models
        if not panels:
            return []
        title = f"{table['table']}: test error of each model under ML, RC and CRC (round 64)"
        return [Plot("errors", lambda path: methods_figure(panels, path, title=title))]


def _suffix(key: str) -> str:
    return next(suffix for suffix in ALGORITHM_SUFFIXES if key.endswith(suffix))


def _circuit_verdict(table: dict, row: dict, suffix: str) -> str:
    """Whether the best circuit beats NB on CRC's test error for one data set and algorithm ("" without both)."""
    cells = row["cells"]
    nb = cells.get(NAIVE_BAYES + suffix, {}).get("crc_test_error")
    circuits = {c["header"]: cells[c["key"]]["crc_test_error"] for c in table["columns"]
                if c["key"].startswith(CIRCUIT_PREFIX) and _suffix(c["key"]) == suffix
                and "crc_test_error" in cells.get(c["key"], {})}
    if nb is None or not circuits:
        return ""
    best = min(circuits, key=circuits.get)
    if circuits[best] < nb:
        return f"{row['data']}: {best} beats NB ({circuits[best]:.4f} against {nb:.4f})."
    return f"{row['data']}: no circuit beats NB (best {best}, {circuits[best]:.4f} against {nb:.4f})."


def _worse_than_nb(table: dict, row: dict, suffix: str) -> list[str]:
    """Every model of one algorithm whose CRC test error is above NB's although its RC's is below NB's."""
    cells = row["cells"]
    nb = cells.get(NAIVE_BAYES + suffix, {})
    if "crc_test_error" not in nb or "rc_test_error" not in nb:
        return []
    return [f"{c['header']} on `{row['data']}` (CRC {cell['crc_test_error']:.4f} against NB's {nb['crc_test_error']:.4f}; "
            f"RC {cell['rc_test_error']:.4f} against {nb['rc_test_error']:.4f})"
            for c in table["columns"] if c["key"] != NAIVE_BAYES + suffix and _suffix(c["key"]) == suffix
            for cell in [cells.get(c["key"], {})]
            if "crc_test_error" in cell and "rc_test_error" in cell
            and cell["rc_test_error"] < nb["rc_test_error"] and cell["crc_test_error"] > nb["crc_test_error"]]
