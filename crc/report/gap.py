"""Tables of the CRC - RC test gap at the last round (tables IV to X, XII) and their figures.

A gap table's figure puts the gap on the y axis, one line per data set, and on
the x axis what its columns change: the number of peers (table IX, X), the
local size (VIII), the period of a dynamic network (XII, categorical: static
first), or else the graph density (IV to VII), read from the column keys the
experiment grids write (``n20``, ``mv20``, ``period8``; topology names).
"""

from __future__ import annotations

import math
import re

from crc.report.format import gap, number
from crc.report.plots import gap_figure
from crc.report.table_kind import Plot, TableKind

AXIS_KEY = re.compile(r"^(?P<quantity>[a-z_]+?)(?P<value>\d+|inf)$")
AXES = {
    "n": ("gap-nodes", "number of peers n (log scale)"),
    "mv": ("gap-local-size", "local size m_v: training instances per peer (log scale)"),
    "period": ("gap-period", "period δ of the dynamic network: rounds between two draws of the graph"),
}
"""Column-key quantity -> (figure name, x label)."""
CONVERGED_NOTE = ("In brackets: the test gap to RC run to convergence (until its training soft 0-1 loss has not "
                  "improved for 64 iterations, at most 4,096) instead of RC at --rc-iterations.")


def column_axis(table: dict) -> tuple[str, list[float]] | None:
    """(quantity, value per column) when every column key is one quantity of ``AXES`` and a number (or 'inf')."""
    matches = [AXIS_KEY.match(column["key"]) for column in table["columns"]]
    if not all(matches) or len({m["quantity"] for m in matches}) != 1 or matches[0]["quantity"] not in AXES:
        return None
    return matches[0]["quantity"], [math.inf if m["value"] == "inf" else int(m["value"]) for m in matches]


def finished(table: dict):
    """(data set, column index, column, cell) of every finished cell, row by row."""
    for row in table["rows"]:
        for index, column in enumerate(table["columns"]):
            cell = row["cells"].get(column["key"], {})
            if "value" in cell:
                yield row["data"], index, column, cell


def density_series(table: dict) -> dict[str, list[tuple[float, float]]]:
    """{data set: [(graph density, test gap)]} for the data sets whose cells span more than one density."""
    series = {}
    for row in table["rows"]:
        points = [(cell["density"], cell["value"]) for cell in row["cells"].values() if "density" in cell]
        if len({point[0] for point in points}) > 1:
            series[row["data"]] = points
    return series


def _tick_label(header: str) -> str:
    return header.replace(" (", "\n(")


class GapKind(TableKind):
    """Each cell: CRC's test gap to RC, the errors behind it, the gap per repeat, and the graph density if recorded."""

    name = "gap"

    def summarise(self, column: str, results: dict, row: dict[str, dict]) -> dict:
        summary = {
            "value": results["test_gap"], "train_gap": results["train_gap"],
            "crc_test_error": results["crc"]["test_error"], "rc_test_error": results["rc"]["test_error"],
            "ml_test_error": results["ml"]["test_error"], "test_std": results["crc"]["test_std"],
            "repeat_gaps": [repeat["test_gap"] for repeat in results["repeats"]],
        }
        if "density" in results:
            summary["density"] = results["density"]
        if "rc_converged" in results:  # cells run before RC to convergence was reported have no such figure
            summary["converged_gap"] = results["test_gap_converged"]
            summary["rc_converged_test_error"] = results["rc_converged"]["test_error"]
        return summary

    def cell_text(self, column: dict, cell: dict) -> list[str]:
        """The gap to RC at ``--rc-iterations``, and in brackets the gap to RC run to convergence when recorded."""
        text = gap(cell["value"])
        return [text if "converged_gap" not in cell else f"{text} ({number(cell['converged_gap'], 3)})"]

    def markdown(self, table: dict) -> str:
        text = super().markdown(table)
        if any("converged_gap" in cell for _, _, _, cell in finished(table)):
            text += CONVERGED_NOTE + "\n"
        return text

    def plots(self, table: dict) -> list[Plot]:
        """The test gap against what the columns change: n, m_v, the period, else the graph density, else the column."""
        if not any(True for _ in finished(table)):
            return []
        title = f"{table['table']}: {table['title']}"
        axis = column_axis(table)
        if axis is not None:
            quantity, values = axis
            name, xlabel = AXES[quantity]
            if any(math.isinf(v) for v in values):
                return [self._categorical(table, name, xlabel, title)]
            series = {}
            for data, index, _, cell in finished(table):
                series.setdefault(data, []).append((values[index], cell["value"]))
            ticks = [(value, _tick_label(column["header"])) for value, column in zip(values, table["columns"])]
            return [Plot(name, lambda path: gap_figure(series, path, title=title, xlabel=xlabel, xscale="log", ticks=ticks))]
        if density_series(table):
            return [self._density(table, title)]
        return [self._categorical(table, "gap", "column", title)]

    def _categorical(self, table: dict, name: str, xlabel: str, title: str) -> Plot:
        """The columns in their order, evenly spaced (a static network, ∞, first)."""
        series = {}
        for data, index, _, cell in finished(table):
            series.setdefault(data, []).append((index, cell["value"]))
        ticks = [(index, "static (∞)" if column["header"] == "∞" else _tick_label(column["header"]))
                 for index, column in enumerate(table["columns"])]
        return Plot(name, lambda path: gap_figure(series, path, title=title, xlabel=xlabel, ticks=ticks))

    def _density(self, table: dict, title: str) -> Plot:
        """Gap by topology, the columns evenly spaced in order of graph density, which the ticks give. A column as
        dense as an earlier one (table IV's chain, as sparse as a tree) is not on the line: it gets its own slot to the
        left of the line and a hollow marker, so that neither hides the other."""
        columns = table["columns"]
        density_of = {}
        for _, index, _, cell in finished(table):
            if "density" in cell:
                density_of.setdefault(index, cell["density"])
        first_at = {}
        for index in sorted(density_of):
            first_at.setdefault(density_of[index], index)
        twins = [index for index in sorted(density_of) if first_at[density_of[index]] != index]
        on_line = sorted(first_at.values(), key=lambda index: (density_of[index], index))
        slot = {index: position for position, index in enumerate(twins + on_line)}
        series, extras = {}, {}
        for data, index, column, cell in finished(table):
            if index not in slot:
                continue
            if index in twins:
                owner = columns[first_at[density_of[index]]]["header"]
                label = f"{column['header']} (as dense as {owner}: not on the line)"
                extras.setdefault(label, {})[data] = (slot[index], cell["value"])
            else:
                series.setdefault(data, []).append((slot[index], cell["value"]))
        ticks = [(slot[index], f"{columns[index]['header']}\n{density_of[index]:.3f}") for index in twins + on_line]
        xlabel = "topology, and its graph density (edges / possible edges)"
        return Plot("gap-density", lambda path: gap_figure(series, path, title=title, xlabel=xlabel, ticks=ticks,
                                                           extras=extras))
