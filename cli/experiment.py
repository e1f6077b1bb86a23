"""``crc experiment``: the paper's tables as resumable grids."""

from __future__ import annotations

import sys
import time

import click

from crc.cli.acceleration import algorithm_option
from crc.cli.model_options import with_model_options
from crc.cli.options import ACCELERATION, PRIVACY, categorical_option, options
from crc.cli.output import note, verbosity
from crc.core.errors import OptionConflict
from crc.experiments import DEFAULT_DATASETS, TABLES, run_experiments
from crc.experiments.cluster import require_distributed
from crc.topologies import network_factory


def _names(ctx, param, values) -> list[str]:
    names = [n for n, t in TABLES.items() if t.in_all] if "all" in values else list(dict.fromkeys(values))
    unknown = [n for n in names if n not in TABLES]
    if unknown or not names:
        raise click.BadParameter(f"choose from {', '.join(TABLES)} or 'all' (got {', '.join(unknown) or 'nothing'})")
    return names


@click.command(short_help="Run the paper's tables as resumable grids (results/).")
@click.argument("names", nargs=-1, required=True, callback=_names)
@click.option("--datasets", default=None,
              help="Comma-separated bundled names, 'synthetic', or CSV paths (with --label) [default: each table's own: "
                   f"{','.join(DEFAULT_DATASETS)}; wdbc,german for fedpc; magic,letter,satimage,penbased for blocks].")
@click.option("--label", default=None, help="Class column of the CSV data sets.")
@categorical_option()
@with_model_options
@algorithm_option("the table's: paper for the paper's tables, circuits, and privacy (whose accountant covers the "
                  "paper's one plain local step per round); the recommended one for fedpc and blocks")
@options(*(name for name in ACCELERATION if name != "algorithm"), "loss", *PRIVACY, "rc_iterations", "rc_converged")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Repeats per cell (fresh split and graph each), as in the paper.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of every cell's splits, graphs and samples.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Parallel worker processes.")
@click.option("--cluster", metavar="ADDRESS", default=None,
              help="Run the cells on the Dask distributed cluster whose scheduler is at ADDRESS (e.g. tcp://127.0.0.1:8786) "
                   "instead of local processes: same cells, files and resumption; this process writes the files. Needs the "
                   "'cluster' extra; the cluster must be your own (Dask pickles tasks).")
@click.option("--out", type=click.Path(file_okay=False), default="results", show_default=True,
              help="Directory for the tables and the finished cells.")
def experiment(names, datasets, label, categorical, model, repeats, seed, jobs, cluster, out, **structure):
    """Run the paper's experiment NAMES (table2 ... table12, circuits, or all
    of these), or the project's studies (privacy, fedpc, blocks; not in all).

    Writes OUT/<table>.json, .csv and .md. Every finished cell is saved under
    OUT/cells, so an interrupted run continues where it stopped; cells that
    need more instances than a data set has are marked n/a.

    \b
    table2   RC test gap by training size       table8   local size m_v
    table3   convergence: ML/CRC gaps, std      table9   network size n
    table4   tree, chain, +10 ... +80           table10  fragmentation (m = 12800)
    table5-7 covariate, label, joint drift      table11  local iterations
    table12  dynamic network period             circuits NB, QDA, circuits: ML/RC/CRC
    fedpc    horizontal, vertical and hybrid partitions beside the federated-circuits paper's Table 6 (not in all)
    blocks   vertical: the mixture of block products against the plain products and FedPC (not in all)
    privacy  test gap CRC - RC by the peers' ε under differential privacy (not in all)

    The paper's tables run the paper's algorithm unless --algorithm says
    otherwise; fedpc and blocks the recommended one (vertical groups and
    hybrid partitions always take the paper's plain step).
    --algorithm, the acceleration options, --loss, the privacy options and
    --rc-iterations apply to every column (and are recorded in every cell's
    configuration); the privacy table sets --dp-epsilon per column.
    """
    if cluster is not None:
        if jobs != 1:
            raise OptionConflict("--jobs and --cluster do not go together: the cluster's workers run the cells")
        require_distributed()  # before planning: a missing extra is a one-line error
    sources = None if datasets is None else [d.strip() for d in datasets.split(",") if d.strip()]
    started = time.perf_counter()
    state = {}

    def on_start(pending, cells):
        done = sum(1 for c in cells if not c.skip) - len(pending)
        skipped = sum(1 for c in cells if c.skip)
        where = f"on the Dask cluster at {cluster}" if cluster is not None else f"{jobs} process{'es' if jobs > 1 else ''}"
        note(f"{len(cells)} cells: {len(pending)} to run, {done} already done, {skipped} n/a ({where})")
        state["bar"] = click.progressbar(length=len(pending), label="cells", file=sys.stderr,
                                         hidden=not sys.stderr.isatty() or verbosity() < 0,
                                         item_show_func=lambda text: text).__enter__()
        state["done"], state["total"] = 0, len(pending)

    def on_cell(cell, seconds):
        state["done"] += 1
        text = f"{cell.table} {cell.data} {cell.column} ({seconds:.1f} s)"
        state["bar"].update(1, text)
        if not sys.stderr.isatty():
            note(f"[{state['done']}/{state['total']}] {text}")

    try:
        tables = run_experiments(names, datasets=sources, repeats=repeats, seed=seed, jobs=jobs, out=out,
                                 network_factory=network_factory, model=model, label=label, categorical=categorical,
                                 defaults=structure,
                                 on_start=on_start, on_cell=on_cell, cluster=cluster)
    finally:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)
    for table in tables:
        click.echo(f"{out}/{table['table']}.md  ({table['title']})")
    note(f"wall time {time.perf_counter() - started:.0f} s")
