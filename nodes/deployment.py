"""The files of a deployment: one CSV per peer, the test set and the shared schema."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crc.core.data import Dataset, to_columns, write_csv
from crc.core.errors import CRCError
from crc.core.files import atomic_write_json
from crc.protocol.split import Split

ID_COLUMN = "id"
"""The column of instance ids in a vertical deployment's files."""
SHUFFLE_STREAM = 0x1D5
"""Seeds each vertical peer's order of rows (and the rows it leaves out) apart from every other stream."""


def node_file(directory, index: int) -> Path:
    return Path(directory) / f"node-{index}.csv"


def blocks_file(directory) -> Path:
    return Path(directory) / "blocks.json"


def write_deployment(dataset: Dataset, split: Split, directory) -> None:
    """``node-<i>.csv`` (original columns), ``test.csv`` and ``schema.json`` (standardized on the pooled training set)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for index, part in enumerate(split.parts):
        write_csv(node_file(directory, index), to_columns(dataset, split.train_rows[part]))
    write_csv(directory / "test.csv", to_columns(dataset, split.test_rows))
    split.model.schema.save(directory / "schema.json")


def instance_ids(count: int) -> list[str]:
    """The ids of a vertical deployment's ``count`` training instances: ``i`` and the position, zero-padded, so that
    sorted they keep the order of the positions."""
    width = len(str(max(count - 1, 0)))
    return [f"i{position:0{width}d}" for position in range(count)]


LABEL_BLOCK = 0
"""The block whose peer holds the labels in each group of a vertical or hybrid deployment: its label holder."""


def write_vertical_deployment(dataset: Dataset, split: Split, directory, *, seed: int, drop_ids: float = 0.0) -> list[int]:
    """A vertical or hybrid partition's files: ``node-<p>.csv`` for peer p = g K + b, holding block b of group g's
    instances (the ``id`` column and block b's feature columns, the label column in ``LABEL_BLOCK``'s only; rows in an order
    of the peer's own, seeded, and without a random fraction ``drop_ids`` of them), ``blocks.json`` (every block's
    feature names), ``test.csv`` (all columns) and ``schema.json`` (the whole schema, standardized on the training
    set). Returns the number of instances every peer of a group holds, by group."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    schema, model = dataset.schema, split.model
    if ID_COLUMN in (*schema.feature_names, schema.label):
        raise CRCError(f"the data set has a column named {ID_COLUMN!r}, the name of the column into which a vertical "
                       f"deployment writes its instance ids: rename or drop that column")
    # by position among the groups' instances, group after group: unique, and sorted in each group's own order
    ids = np.array(instance_ids(sum(map(len, split.parts))), dtype=object)
    offsets = np.cumsum([0, *map(len, split.parts)])
    names = model.schema.feature_names
    held = []
    for g, part in enumerate(split.parts):
        part = np.asarray(part)
        group_ids = ids[offsets[g]:offsets[g + 1]]
        columns = to_columns(dataset, split.train_rows[part])
        kept_everywhere = np.ones(len(part), dtype=bool)
        for b, block in enumerate(model.blocks):
            peer = g * len(model.blocks) + b
            order = np.random.default_rng([seed, SHUFFLE_STREAM, peer]).permutation(len(part))
            order = order[int(round(drop_ids * len(part))):]
            kept_everywhere &= np.isin(np.arange(len(part)), order)
            wanted = [names[j] for j in block] + ([schema.label] if b == LABEL_BLOCK else [])
            table = {ID_COLUMN: group_ids[order].tolist(), **{name: [columns[name][i] for i in order] for name in wanted}}
            write_csv(node_file(directory, peer), table)
        held.append(int(kept_everywhere.sum()))
    atomic_write_json(blocks_file(directory), {"blocks": [[names[j] for j in block] for block in model.blocks]})
    write_csv(directory / "test.csv", to_columns(dataset, split.test_rows))
    model.schema.save(directory / "schema.json")
    return held
