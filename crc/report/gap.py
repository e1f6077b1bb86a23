"""Tables of the CRC - RC test gap at the last round (tables IV to X, XII)."""

from __future__ import annotations

from crc.report.plots import gap_density_figure
from crc.report.table_kind import Plot, TableKind


def density_series(table: dict) -> dict[str, list[tuple[float, float]]]:
    """{data set: [(graph density, test gap)]} for the data sets whose cells span more than one density."""
    series = {}
    for row in table["rows"]:
        points = [(cell["density"], cell["value"]) for cell in row["cells"].values() if "density" in cell]
        if len({point[0] for point in points}) > 1:
            series[row["data"]] = points
    return series


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
        return summary

    def plots(self, table: dict) -> list[Plot]:
        """The test gap against graph density, when the columns change the density (tables over topologies)."""
        series = density_series(table)
        if not series:
            return []
        title = f"{table['table']}: {table['title']}"
        return [Plot("gap-density", lambda path: gap_density_figure(series, path, title=title))]
