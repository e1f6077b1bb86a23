"""One cell of a table (a table, a data set, a column): what it is, what it computes and how its file is written.
The runner (``--jobs``) and the cluster client (``--cluster``) both dispatch cells and call these."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from crc.core.data import Dataset
from crc.core.errors import CRCError
from crc.core.files import atomic_write_json, read_json
from crc.core.models import all_options
from crc.experiments.grids import TABLES
from crc.protocol import SimulationConfig
from crc.tables.datasets import SYNTHETIC, load_dataset


@dataclass(frozen=True)
class Cell:
    """One (table, data set, column) simulation; ``data`` is the data set's short name."""

    table: str
    data: str
    column: str
    config: SimulationConfig
    skip: str = ""

    def matches(self, stored: dict) -> bool:
        """Whether a stored cell's configuration is this cell's.

        A field the stored configuration lacks (it was written before the field
        existed) counts as its value in the paper's algorithm, which is how that
        cell was computed; without ``algorithm`` the settings it stands for decide.
        """
        defaults = _jsonable({**{option.name: option.default for option in all_options()},
                              **SimulationConfig(algorithm="paper").to_json()})
        wanted = _jsonable(self.config.to_json())
        if wanted["ess"] is None:  # results record the ESS Eq. 5 gave, not the absent option
            del wanted["ess"]
        if "algorithm" not in stored:
            del wanted["algorithm"]
        return all(stored.get(key, defaults.get(key)) == value for key, value in wanted.items())

    def path(self, out: Path) -> Path:
        return out / "cells" / self.table / self.data / f"{self.column}.json"


def _jsonable(config: dict) -> dict:
    return {key: (None if isinstance(value, float) and math.isinf(value) else value) for key, value in config.items()}


class DirectoryCache:
    """Centralized errors as small JSON files named by the hash of their key; safe across processes."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def _path(self, key: dict) -> Path:
        return self.directory / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + ".json")

    def get(self, key: dict) -> dict | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            stored = read_json(path)
        except CRCError:
            return None  # damaged: computed again, and written anew
        return stored.get("value") if isinstance(stored, dict) and stored.get("key") == key else None

    def put(self, key: dict, value: dict) -> None:
        atomic_write_json(self._path(key), {"key": key, "value": value})


@cache  # a process keeps every data set it has read: they are small, parsing is not
def stored_dataset(source: str, label: str | None, categorical=()) -> Dataset:
    return load_dataset(source, label=label, categorical=categorical)


def dataset_for(config: SimulationConfig) -> Dataset:
    from crc.protocol.repeat import load_for  # the protocol's run-time modules on use: `crc --help` imports this one

    return load_for(config) if config.data == SYNTHETIC else stored_dataset(config.data, config.label, config.categorical)


def write_cell(cell: Cell, out: Path, record: dict) -> None:
    """Save a finished cell's record (what ``compute_cell`` returned) as its file, atomically."""
    atomic_write_json(cell.path(out), record)


def compute_cell(cell: Cell, network_factory: Callable, *, cache, dataset: Dataset | None = None) -> dict:
    """Simulate one cell: the record its file holds (``seconds`` is its only timing field).

    ``cache`` keeps the centralized errors (``DirectoryCache`` or anything with its ``get`` and ``put``);
    ``dataset`` is the cell's stored data set when the caller has it (a cluster worker is sent a CSV file's),
    else it is read here (or drawn, for 'synthetic').
    """
    from crc.protocol import simulate, simulate_central  # on use, as load_for above

    config = cell.config
    if dataset is None or config.data == SYNTHETIC:
        dataset = dataset_for(config)
    started = time.perf_counter()
    try:
        if TABLES[cell.table].central_only:
            results = simulate_central(config, dataset=dataset, cache=cache)
        else:
            network = network_factory(config.topology, config.period or math.inf)
            results = simulate(config, network, dataset=dataset, cache=cache)
    except ValueError as exc:  # CRCError, or a topology that cannot be drawn at this size
        raise CRCError(f"{cell.table} {cell.data} {cell.column}: {exc}") from None
    return {"table": cell.table, "data": cell.data, "column": cell.column,
            "seconds": time.perf_counter() - started, "results": _strip_inf(results)}


def _strip_inf(results: dict) -> dict:
    results = dict(results)
    results["config"] = _jsonable(results["config"])
    return results
