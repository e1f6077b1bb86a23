"""Tables that keep CRC's per-round errors: convergence at the last round (table III) and the first converged round
(table XI). Both plot the per-round test error."""

from __future__ import annotations

from crc.report.format import CONVERGED, gap, number
from crc.report.plots import convergence_figure
from crc.report.table_kind import Plot, TableKind

CONVERGENCE_FIELDS = (
    ("train ML gap", "train_ml_gap"), ("train CRC gap", "train_gap"), ("train std", "train_std"), ("train RC error", "train_rc"),
    ("test ML gap", "test_ml_gap"), ("test CRC gap", "test_gap"), ("test std", "test_std"), ("test RC error", "test_rc"),
)
"""Table III's sub-columns: (header, key in the cell summary)."""
CURVE_FIELDS = ("round", "train_error", "test_error", "train_std", "test_std")
"""What a cell keeps of each round: CRC's mean error across nodes and its std, on the training and the test set."""


def curve(results: dict) -> list[dict]:
    """CRC's per-round errors (mean and std across nodes) from a results JSON run with --curve."""
    return [{key: row[key] for key in CURVE_FIELDS} for row in results["rounds"]]


def table_curves(table: dict) -> list[dict]:
    """The per-round curve of every cell that kept one (a curve as ``crc.report.plots`` draws it): one panel per data
    set, one series per column when the table has several (table XI's iter = 1, 2, 3 overlaid)."""
    curves = []
    single = len(table["columns"]) == 1
    for row in table["rows"]:
        for column in table["columns"]:
            cell = row["cells"].get(column["key"], {})
            if cell.get("curve"):
                curves.append({"name": row["data"], "series": None if single else column["header"], "rounds": cell["curve"],
                               "rc_test_error": cell["rc_test_error"], "ml_test_error": cell["ml_test_error"]})
    return curves


class CurveKind(TableKind):
    """A kind whose cells keep the per-round curve, plotted as CRC's test error by round."""

    needs_curve = True
    cell_fields = ("value", "rc_test_error", "ml_test_error")

    def plots(self, table: dict) -> list[Plot]:
        curves = table_curves(table)
        if not curves:
            return []
        columns = table["columns"]
        by = f", by {' / '.join(c['header'] for c in columns)}" if len(columns) > 1 else ""
        title = f"{table['table']}: CRC test error by round{by}"
        return [Plot("convergence", lambda path: convergence_figure(curves, path, title=title))]


class ConvergenceKind(CurveKind):
    """Each cell: the train and test gaps of ML and CRC to RC, CRC's spread across nodes, and RC's error."""

    name = "convergence"
    cell_fields = CurveKind.cell_fields + tuple(key for _, key in CONVERGENCE_FIELDS)

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict:
        ml, rc, crc = results["ml"], results["rc"], results["crc"]
        return {
            "value": results["test_gap"],
            "train_ml_gap": ml["train_error"] - rc["train_error"], "train_gap": results["train_gap"],
            "train_std": crc["train_std"], "train_rc": rc["train_error"],
            "test_ml_gap": ml["test_error"] - rc["test_error"], "test_gap": results["test_gap"],
            "test_std": crc["test_std"], "test_rc": rc["test_error"],
            "ml_test_error": ml["test_error"], "rc_test_error": rc["test_error"], "curve": curve(results),
        }

    def headers(self, column: dict) -> list[str]:
        return [header for header, _ in CONVERGENCE_FIELDS]

    def cell_text(self, column: dict, cell: dict) -> list[str]:
        return [gap(cell[key]) if key.endswith("gap") else number(cell[key]) for _, key in CONVERGENCE_FIELDS]

    def csv_fields(self, cell: dict, paper) -> list[tuple[str, float, object]]:
        """The eight sub-columns, each beside the paper's figure in the same position."""
        return [(key, cell[key], paper[position] if position < len(paper) else "")
                for position, (_, key) in enumerate(CONVERGENCE_FIELDS)]


class FirstRoundKind(CurveKind):
    """Each cell: the last round's test gap and the first round whose mean test gap is below ``CONVERGED`` (or None)."""

    name = "first_round"
    cell_fields = CurveKind.cell_fields + ("first_round",)
    nullable = ("first_round",)
    paper_figures = 2

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict:
        rc_test = results["rc"]["test_error"]
        first = next((step["round"] for step in results["rounds"] if step["test_error"] - rc_test < CONVERGED), None)
        return {"value": results["test_gap"], "first_round": first, "rc_test_error": rc_test,
                "ml_test_error": results["ml"]["test_error"], "curve": curve(results)}

    def headers(self, column: dict) -> list[str]:
        return [f"{column['header']} gap", f"{column['header']} t"]

    def cell_text(self, column: dict, cell: dict) -> list[str]:
        return [gap(cell["value"]), str(cell["first_round"] or "–")]

    def paper_text(self, column: dict) -> list[str]:
        """The paper's (gap, first round) pair."""
        letter, first = column["paper_letter"]
        return [number(letter), str(first)]
