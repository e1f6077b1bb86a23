"""``crc report``: tables and figures from results JSON files."""

from __future__ import annotations

from pathlib import Path

import click

from crc.cli.options import plots_option
from crc.cli.output import note
from crc.core.errors import CRCError
from crc.report.kinds import kind_of
from crc.report.plots import convergence_figure
from crc.report.sources import RUN, load_results, run_curves
from crc.report.tables import runs_csv, runs_markdown, table_csv, table_markdown


@click.command(short_help="Render results JSON files as Markdown or CSV tables and figures.")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv"]), default="markdown", show_default=True,
              help="Table format on standard output; CSV figures have 6 significant digits.")
@plots_option("the figures (besides the tables on standard output)")
def report(files, fmt, plots):
    """Render results FILES as tables (and figures).

    FILES are `crc simulate --json` / `crc launch --json` outputs (one line per
    run) or experiment tables (results/<table>.json). Figures: CRC test error
    by round (mean +- std across peers, with the RC and ML levels) for runs
    recorded with --curve and for table3/table11; RC's gap by training size for
    table2; the test gap against what a table's columns change (graph density,
    local size, number of peers, period) for tables 4-10 and 12; every model's
    ML, RC and CRC error for the circuits table.
    """
    loaded = [load_results(path) for path in files]
    runs = [obj for source, obj in loaded if source == RUN]
    tables = [obj for source, obj in loaded if source != RUN]
    if runs:
        click.echo(runs_markdown(runs) if fmt == "markdown" else runs_csv(runs))
    for table in tables:
        click.echo(table_markdown(table) if fmt == "markdown" else table_csv(table))
    if plots:
        for written in figures(runs, tables, Path(plots)):
            note(f"wrote {written}")


def figures(runs: list[dict], tables: list[dict], directory: Path) -> list[Path]:
    """Draw the runs' curves in one figure and each table's figures (as its kind offers them); returns the files
    written (a PNG and a PDF each)."""
    curves = [curve for results in runs for curve in run_curves(results)]
    plots = [(table, plot) for table in tables for plot in kind_of(table).plots(table)]
    if not curves and not plots:
        raise CRCError("nothing to plot: the runs have no per-round errors (run `crc simulate` with --curve) "
                       "and the tables no finished cells")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if curves:
        written += convergence_figure(curves, directory / "convergence.png")
    for table, plot in plots:
        written += plot.draw(directory / f"{table['table']}-{plot.name}.png")
    return written
