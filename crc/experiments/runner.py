"""Run a named grid cell by cell, resumably, optionally in parallel processes.

Layout under the output directory ``out``::

    out/<table>.json|.csv|.md          the assembled table (see crc.report)
    out/cells/<table>/<data>/<col>.json one finished cell: its config and simulation results
    out/.cache/central/<hash>.json      centralized ML/RC errors shared by cells on the same split

A cell whose file exists with the same configuration is not run again, so an
interrupted run resumes where it stopped. The network is injected as
``network_factory(spec, period) -> network(n, seed)`` (see ``topologies``), so
this package needs no graph library.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from crc.core.errors import CRCError
from crc.core.files import atomic_write_json, atomic_write_text, read_json
from crc.experiments.cells import Cell, DirectoryCache, compute_cell, dataset_for, stored_dataset, write_cell
from crc.experiments.grids import REFERENCE_SIZE, TABLES, Table
from crc.experiments.summary import assemble
from crc.protocol import SimulationConfig
from crc.protocol.vertical import held_out_count, resolve_partition
from crc.report.tables import table_csv, table_markdown
from crc.tables.datasets import BUNDLED, SYNTHETIC

SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "CRC_THREADS")


def short_name(source: str) -> str:
    """A data set's name in tables and file names: the bundled name, or a CSV file's stem."""
    if source in BUNDLED or source == SYNTHETIC:
        return source
    stem = Path(source).name.split(".")[0]
    return re.sub(r"[^A-Za-z0-9_-]+", "_", stem) or "data"


def plan(table: Table, datasets, *, repeats: int, seed: int, model: str = "nb", label: str | None = None,
         categorical=(), defaults: dict | None = None) -> list[Cell]:
    """Every cell of ``table`` on ``datasets`` (bundled names, 'synthetic' or CSV paths with ``label`` and
    ``categorical``).

    ``defaults`` changes the paper's default setting under every column (e.g.
    fewer rounds for a quick look, or another ``algorithm`` than the table's); None
    values in it are left out. Cells needing more instances than a data
    set has carry ``skip``; the synthetic set is drawn at the size each cell needs.
    """
    cells = []
    for data in datasets if datasets is not None else table.datasets:
        csv = data not in BUNDLED and data != SYNTHETIC
        csv_label, csv_categorical = (label, tuple(categorical)) if csv else (None, ())
        size = math.inf if data == SYNTHETIC else len(stored_dataset(data, csv_label, csv_categorical))
        n_test = held_out_count(size, table.test_size) if size != math.inf else table.test_size
        available = size - n_test
        for column in table.columns:
            given = {key: value for key, value in (defaults or {}).items() if value is not None}
            overrides = {"algorithm": table.algorithm, **given, **column.overrides}
            if column.key == "reference":
                overrides["local_size"] = int(min(REFERENCE_SIZE, available))
            if column.all_training:
                overrides["pooled_size"] = int(available)
            settings = {"model": model, **overrides}
            config = SimulationConfig.from_settings(data=data, label=csv_label, categorical=csv_categorical,
                                                    repeats=repeats, seed=seed,
                                                    test_size=table.test_size, curve=table.needs_curve, **settings)
            config.validate()
            if config.feature_partition is not None:  # its cell files record the resolved configuration
                config = resolve_partition(config, dataset_for(config))
            skip = ""
            if config.train_size > available:
                skip = f"needs {config.train_size} training + {n_test} test instances, has {available + n_test}"
            elif table.central_only and column.key != "reference" and config.train_size >= min(REFERENCE_SIZE, available):
                skip = f"not below the reference size {int(min(REFERENCE_SIZE, available))}"
            cells.append(Cell(table.name, short_name(data), column.key, config, skip))
    return cells


def _is_done(cell: Cell, out: Path) -> bool:
    """Whether ``cell``'s file holds its results: its configuration is the cell's, and its table's row of it alone
    assembles and renders (a file of the right configuration but a field of another type, or none, ended
    ``write_table`` in a traceback). A damaged file is simply run again."""
    path = cell.path(out)
    if not path.exists():
        return False
    try:
        record = read_json(path)
        stored = record["results"]["config"]
        if not (isinstance(stored, dict) and cell.matches(stored)):
            return False
        alone = assemble(TABLES[cell.table], [cell.data], {(cell.data, cell.column): record})
        table_markdown(alone), table_csv(alone)
    except (CRCError, KeyError, TypeError, ValueError, IndexError, AttributeError):
        return False
    return True


def run_cell(cell: Cell, out: Path, network_factory: Callable) -> dict:
    """Run one cell and write its file; returns what was written."""
    record = compute_cell(cell, network_factory, cache=DirectoryCache(out / ".cache" / "central"))
    write_cell(cell, out, record)
    return record


def run_experiments(names, *, datasets, repeats: int, seed: int, jobs: int, out, network_factory: Callable,
                    model: str = "nb", label: str | None = None, categorical=(), defaults: dict | None = None,
                    on_start: Callable | None = None, on_cell: Callable | None = None,
                    cluster: str | None = None) -> list[dict]:
    """Run the pending cells of the named tables and write the assembled table files.

    All pending cells share one pool of ``jobs`` processes, largest first, or, with ``cluster`` (a Dask
    scheduler's address), go to that cluster's workers (``crc.experiments.cluster``; ``jobs`` is then unused).
    ``on_start(pending, cells)`` is called once; ``on_cell(cell, seconds)``
    after each finished cell. A table's files are rewritten whenever one of
    its cells finishes, so nothing finished is lost. Returns the tables.
    """
    unknown = [name for name in names if name not in TABLES]
    if unknown:
        raise CRCError(f"unknown experiment {', '.join(map(repr, unknown))}; choose from: {', '.join(TABLES)}, all")
    out = Path(out)
    plans = {name: plan(TABLES[name], datasets, repeats=repeats, seed=seed, model=model, label=label,
                        categorical=categorical, defaults=defaults) for name in names}
    cells = [cell for name in names for cell in plans[name]]
    pending = sorted((c for c in cells if not c.skip and not _is_done(c, out)), key=_cost, reverse=True)
    if on_start is not None:
        on_start(pending, cells)
    for cell, seconds in _execute(pending, out, network_factory, jobs, cluster):
        write_table(TABLES[cell.table], plans[cell.table], out)
        if on_cell is not None:
            on_cell(cell, seconds)
    return [write_table(TABLES[name], plans[name], out) for name in names]


def _cost(cell: Cell) -> float:
    """A rough work estimate (instance-rounds) used to start the largest cells first."""
    config = cell.config
    return config.train_size * config.rounds * (config.iters + 1)


def _execute(cells: list[Cell], out: Path, network_factory: Callable, jobs: int, cluster: str | None = None):
    """Yield (cell, seconds) as cells finish: in this process, in ``jobs`` worker processes, or on ``cluster``."""
    if cluster is not None:
        from crc.experiments.cluster import execute_on_cluster  # imports Dask distributed, an optional extra

        yield from execute_on_cluster(cells, out, network_factory, cluster)
        return
    if jobs <= 1 or len(cells) <= 1:
        for cell in cells:
            yield cell, run_cell(cell, out, network_factory)["seconds"]
        return
    saved = {key: os.environ.get(key) for key in SINGLE_THREAD_ENV}
    # One BLAS thread, and one thread for a circuit's blocks (crc.core.threads), per worker process.
    os.environ.update({key: "1" for key in SINGLE_THREAD_ENV})
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {pool.submit(run_cell, cell, out, network_factory): cell for cell in cells}
            try:
                while futures:
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for future in finished:
                        yield futures.pop(future), future.result()["seconds"]
            finally:  # on an error or an interrupt, do not start the cells still queued
                for future in futures:
                    future.cancel()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def write_table(table: Table, cells: list[Cell], out: Path) -> dict:
    """Assemble the finished cells into ``out/<table>.json``, ``.csv`` and ``.md``."""
    records = {}
    for cell in cells:
        if cell.skip:
            records[(cell.data, cell.column)] = {"skip": cell.skip}
        elif _is_done(cell, out):
            records[(cell.data, cell.column)] = read_json(cell.path(out))
    assembled = assemble(table, [c.data for c in cells], records)
    atomic_write_json(out / f"{table.name}.json", assembled)
    atomic_write_text(out / f"{table.name}.csv", table_csv(assembled))
    atomic_write_text(out / f"{table.name}.md", table_markdown(assembled))
    return assembled
