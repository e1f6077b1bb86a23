"""A grid's cells on a Dask distributed cluster the user already runs (``crc experiment --cluster ADDRESS``).

Only the dispatch differs from ``--jobs``: each worker runs ``compute_cell`` (``crc.experiments.cells``), and this
process, the client, writes each finished cell's file with ``write_cell``, so workers need no shared file system
and no access to ``out``. A bundled data set is read on the worker, from the crc it installed (the same version as
the client's: checked on connecting); a CSV data set is read here and sent with each of its cells, so that no data
lives only on a worker that may die; 'synthetic' cells draw their data on the worker, as locally. Centralized
errors are cached in each worker process's memory instead of ``out/.cache``. A worker that dies takes its cells with
it and the scheduler runs them again on another worker (Dask's rescheduling; a cell that has killed
``distributed.scheduler.allowed-failures`` workers fails the run). Cells already done were left out by the runner
before they got here, so a run resumes as a local one does.

Dask distributed is the optional extra ``cluster`` and is imported only here, only when ``--cluster`` is given.
Dask pickles the tasks and results it sends between the client and its workers: the cluster must be the user's own.
"""

from __future__ import annotations

import importlib.metadata
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from crc.core.errors import CRCError
from crc.core.threads import set_threads, use_single_threaded_blas
from crc.experiments.cells import Cell, compute_cell, stored_dataset, write_cell
from crc.tables.datasets import BUNDLED, SYNTHETIC

MISSING = "--cluster needs Dask distributed, the 'cluster' extra: pip install 'crc-p2p[cluster]'"
CONNECT_SECONDS = 30
"""How long the client tries to reach the scheduler before giving up."""
WORKER_CACHE_ENTRIES = 10_000
"""Centralized results a worker process keeps in memory (a few hundred bytes each); beyond that it starts afresh."""


def require_distributed():
    """The ``distributed`` module, or a one-line CRCError naming the extra that brings it."""
    try:
        import distributed
    except ImportError:
        raise CRCError(MISSING) from None
    return distributed


class MemoryCache:
    """``DirectoryCache``'s get and put, in the memory of a worker process (the same values: plain floats and ints)."""

    def __init__(self):
        self.values: dict[str, dict] = {}

    @staticmethod
    def _key(key: dict) -> str:
        return json.dumps(key, sort_keys=True)

    def get(self, key: dict) -> dict | None:
        return self.values.get(self._key(key))

    def put(self, key: dict, value: dict) -> None:
        if len(self.values) >= WORKER_CACHE_ENTRIES:
            self.values.clear()
        self.values[self._key(key)] = value


_WORKER_CACHE = MemoryCache()


def _on_worker(cell: Cell, network_factory: Callable, dataset) -> dict:
    """A cell's record, computed in a worker process with one BLAS thread and one thread for a circuit's blocks,
    as a ``--jobs`` worker process has them (BLAS's thread count can change a result's last bit)."""
    set_threads(1)
    use_single_threaded_blas()
    return compute_cell(cell, network_factory, cache=_WORKER_CACHE, dataset=dataset)


def _crc_version() -> str:
    return importlib.metadata.version("crc-p2p")


def connect(address: str):
    """A Dask client of the scheduler at ``address``, whose workers run this version of crc-p2p."""
    distributed = require_distributed()
    try:
        client = distributed.Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CRCError(f"--cluster: cannot reach a Dask scheduler at {address} ({exc})") from None
    try:
        versions = client.run(_crc_version)
    except Exception as exc:  # a worker without crc-p2p cannot even unpickle the function
        client.close()
        raise CRCError(f"--cluster: the workers at {address} cannot run crc ({type(exc).__name__}: {exc})") from None
    ours = _crc_version()
    other = sorted({f"{worker} has crc-p2p {version}" for worker, version in versions.items() if version != ours})
    if other:
        client.close()
        raise CRCError(f"--cluster: this client has crc-p2p {ours}, but {'; '.join(other)}")
    return client


def execute_on_cluster(cells: list[Cell], out: Path, network_factory: Callable, address: str) -> Iterator[tuple[Cell, float]]:
    """Yield (cell, seconds) as the cluster finishes cells, after writing each one's file here.

    Cells are submitted largest first (``cells`` comes sorted so) with decreasing priority. On an error or an
    interrupt the cells still queued are cancelled and the client disconnects; finished cells stay written.
    """
    distributed = require_distributed()
    if not cells:
        return
    run = uuid.uuid4().hex[:12]  # the tasks' keys: readable on the dashboard, unique to this run
    with connect(address) as client:
        futures = {}
        try:
            for rank, cell in enumerate(cells):
                data = cell.config.data
                sent = None if data in BUNDLED or data == SYNTHETIC else stored_dataset(data, cell.config.label, cell.config.categorical)
                future = client.submit(_on_worker, cell, network_factory, sent,
                                       key=f"crc-{cell.table}-{cell.data}-{cell.column}-{run}",
                                       priority=len(cells) - rank, pure=False)
                futures[future] = cell
            for future in distributed.as_completed(list(futures), loop=client.loop):
                cell = futures.pop(future)
                record = future.result()
                write_cell(cell, out, record)
                yield cell, record["seconds"]
        finally:
            if futures:
                client.cancel(list(futures))
