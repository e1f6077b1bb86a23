"""The partitions table: accuracy and F1 of CRC, centralized RC and FedPC's one-pass baseline under horizontal,
vertical and hybrid partitions, beside the figures the federated-circuits paper printed (its Table 6)."""

from __future__ import annotations

from crc.report.format import heading, markdown_row, number
from crc.report.plots import methods_figure
from crc.report.table_kind import Plot, TableKind

METHODS = (("CRC", "crc"), ("RC", "rc"), ("FedPC one-pass (here)", "baseline"))
"""The methods of a cell: (header, prefix of its summary keys)."""
PLOTTED = (("baseline", "FedPC one-pass (here)", {"marker": "x", "color": "0.45", "markersize": 4.5}),
           ("rc", "RC", {"marker": "o", "color": "black", "markersize": 3.5}),
           ("crc", "CRC (mean over peers)", {"marker": "s", "color": "C0", "markersize": 4}))
"""The methods of the table's figure: (summary prefix, legend label, matplotlib style)."""
PAPER_DATA = {"wdbc": "Cancer", "german": "Credit"}
"""The paper's data set beside each bundled one (german is a small stand-in for its credit data)."""
PAPER = {
    # setting (column key prefix) -> [(method, {paper data set: (accuracy, F1)})], Table 6 of the FedPC paper
    "h5": [("FedAvg [TabNet]", {"Cancer": (0.92, 0.92), "Credit": (0.71, 0.48)}),
           ("FedTree", {"Cancer": (0.93, 0.92), "Credit": (0.91, 0.63)}),
           ("FC [PC]", {"Cancer": (0.98, 0.98), "Credit": (0.93, 0.68)})],
    "h10": [("FedAvg [TabNet]", {"Cancer": (0.92, 0.91), "Credit": (0.56, 0.47)}),
            ("FedTree", {"Cancer": (0.94, 0.93), "Credit": (0.92, 0.69)}),
            ("FC [PC]", {"Cancer": (0.95, 0.95), "Credit": (0.93, 0.66)})],
    "v2": [("SplitNN [TabNet]", {"Cancer": (0.98, 0.98), "Credit": (0.93, 0.48)}),
           ("FedTree", {"Cancer": (0.94, 0.93), "Credit": (0.92, 0.69)}),
           ("FC [PC]", {"Cancer": (0.96, 0.96), "Credit": (0.92, 0.67)})],
    "v3": [("SplitNN [TabNet]", {"Cancer": (0.98, 0.98), "Credit": (0.93, 0.48)}),
           ("FedTree", {"Cancer": (0.93, 0.92), "Credit": (0.92, 0.69)}),
           ("FC [PC]", {"Cancer": (0.95, 0.95), "Credit": (0.92, 0.66)})],
    "y2": [("FC [PC]", {"Cancer": (0.94, 0.94), "Credit": (0.92, 0.67)})],
    "y3": [("FC [PC]", {"Cancer": (0.94, 0.94), "Credit": (0.92, 0.67)})],
}
"""The paper's printed figures (mean accuracy and F1 over 5 seeds; its hybrid split differs from ours: two or
three clients holding different instances and partly shared features)."""


class PartitionsKind(TableKind):
    """Each cell: accuracy and F1 of CRC (mean over peers), RC and the one-pass baseline; the value is CRC's
    accuracy."""

    name = "partitions"
    columns_choose_model = True

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict:
        baseline = results.get("fedpc") or results.get("mixture_of_nodes") or {}
        summary = {"value": 1 - results["crc"]["test_error"]}
        for _, prefix in METHODS:
            figures = baseline if prefix == "baseline" else results[prefix]
            if "test_error" in figures:
                summary[f"{prefix}_accuracy"] = 1 - figures["test_error"]
            if "test_f1" in figures:
                summary[f"{prefix}_f1"] = figures["test_f1"]
        summary["accuracy_gap"] = summary["crc_accuracy"] - summary["rc_accuracy"]
        return summary

    def markdown(self, table: dict) -> str:
        """The paper's layout: one line per (setting, method), an accuracy and an F1 column per data set; the
        paper's figures under its data set's bundled stand-in, marked as cited."""
        rows = table["rows"]
        headers = ["setting", "method"] + [f"{row['data']} {figure}" for row in rows for figure in ("acc.", "F1")]
        lines = heading(table) + [markdown_row(headers), markdown_row(["---", "---"] + ["---:"] * (len(headers) - 2))]
        settings = dict.fromkeys(column["key"].partition("-")[0] for column in table["columns"])
        for setting in settings:
            columns = [column for column in table["columns"] if column["key"].partition("-")[0] == setting]
            name = columns[0]["header"].rsplit(", ", 1)[0]
            for title, prefix in METHODS:
                for column in columns[:1] if prefix == "baseline" else columns:
                    model = column["header"].rsplit(", ", 1)[1]
                    label = f"{title}, NB leaves" if prefix == "baseline" else f"{title}, {model}"
                    figures = []
                    for row in rows:
                        cell = row["cells"][column["key"]]
                        if "value" not in cell:
                            figures += ["n/a" if "skip" in cell else "…"] * 2
                        else:
                            figures += [number(cell.get(f"{prefix}_{figure}")) for figure in ("accuracy", "f1")]
                    lines.append(markdown_row([name, label] + figures))
            cited = [row for row in rows if row["data"] in PAPER_DATA]
            for method, values in PAPER.get(setting, []) if cited else []:
                figures = []
                for row in rows:
                    paper = values.get(PAPER_DATA.get(row["data"], ""))
                    figures += ["", ""] if paper is None else [number(paper[0]), number(paper[1])]
                lines.append(markdown_row([name, f"{method} (paper, cited)"] + figures))
        lines += ["", "CRC: mean over the peers' classifiers (a vertical group's classifier is its blocks together). "
                  "F1: of the positive class (the second label) for two classes, the mean over classes otherwise. "
                  "FedPC one-pass (here): horizontal, the mixture of the peers' own NB models; vertical and hybrid, "
                  "Algorithm 1 of the paper with naive-Bayes leaf circuits."]
        if any(row["data"] in PAPER_DATA for row in rows):
            lines[-1] += (" Lines marked 'paper, cited' are the federated-circuits paper's Table 6 as printed, on its "
                          "own data (Cancer beside wdbc, Credit beside german), splits and models; they are not run "
                          "here.")
        return "\n".join(lines) + "\n"

    def plots(self, table: dict) -> list[Plot]:
        """Per data set, the test accuracy of CRC, RC and the one-pass baseline in every (setting, model) column."""
        panels = {}
        for row in table["rows"]:
            columns = []
            for column in table["columns"]:
                cell = row["cells"].get(column["key"], {})
                figures = {prefix: cell[f"{prefix}_accuracy"] for prefix, _, _ in PLOTTED if f"{prefix}_accuracy" in cell}
                if figures:
                    columns.append((column["header"].replace(" peers", "").replace("horizontal", "h."), figures))
            if columns:
                panels[row["data"]] = columns
        if not panels:
            return []
        title = f"{table['table']}: test accuracy of CRC, RC and FedPC's one-pass baseline"
        return [Plot("accuracy", lambda path: methods_figure(panels, path, title=title, methods=PLOTTED,
                                                               ylabel="test accuracy"))]
