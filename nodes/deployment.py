"""The files of a deployment: one CSV per peer, the test set and the shared schema."""

from __future__ import annotations

from pathlib import Path

from crc.core.data import Dataset, to_columns, write_csv
from crc.protocol.repeat import Split


def node_file(directory, index: int) -> Path:
    return Path(directory) / f"node-{index}.csv"


def write_deployment(dataset: Dataset, split: Split, directory) -> None:
    """``node-<i>.csv`` (original columns), ``test.csv`` and ``schema.json`` (standardized on the pooled training set)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for index, part in enumerate(split.parts):
        write_csv(node_file(directory, index), to_columns(dataset, split.train_rows[part]))
    write_csv(directory / "test.csv", to_columns(dataset, split.test_rows))
    split.model.schema.save(directory / "schema.json")
