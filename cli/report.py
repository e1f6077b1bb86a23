"""``crc report``: tables and figures from results JSON files."""

from __future__ import annotations

from pathlib import Path

import click

from crc.core.errors import CRCError
from crc.report.kinds import kind_of
from crc.report.plots import convergence_figure
from crc.report.sources import RUN, load_results, run_curves
from crc.report.tables import runs_csv, runs_markdown, table_csv, table_markdown


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv"]), default="markdown", show_default=True)
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="Also write PNG figures into this directory (needs the 'plot' extra).")
def report(files, fmt, plots):
    """Render results FILES as tables (and figures).

    FILES are `crc simulate --json` / `crc launch` outputs (one line per run) or
    experiment tables (results/<table>.json). Figures: CRC test error by round
    (mean +- std across nodes, with the RC and ML levels) for runs recorded
    with --curve and for table3/table11; test gap against graph density for
    tables over topologies.
    """
    loaded = [load_results(path) for path in files]
    runs = [obj for source, obj in loaded if source == RUN]
    tables = [obj for source, obj in loaded if source != RUN]
    if runs:
        click.echo(runs_markdown(runs) if fmt == "markdown" else runs_csv(runs))
    for table in tables:
        click.echo(table_markdown(table) if fmt == "markdown" else table_csv(table))
    if plots:
        for written in _figures(runs, tables, Path(plots)):
            click.echo(f"wrote {written}", err=True)


def _figures(runs: list[dict], tables: list[dict], directory: Path) -> list[Path]:
    """Draw the runs' curves in one figure and each table's plots (as its kind offers them); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    curves = [curve for results in runs for curve in run_curves(results)]
    if curves:
        convergence_figure(curves, directory / "convergence.png")
        written.append(directory / "convergence.png")
    for table in tables:
        for plot in kind_of(table).plots(table):
            path = directory / f"{table['table']}-{plot.name}.png"
            plot.draw(path)
            written.append(path)
    if not written:
        raise CRCError("nothing to plot: no per-round curves (run with --curve) and no topology tables")
    return written
