"""``crc schema``: the schema every peer of a deployment shares; for a vertical group, joined from each party's own
columns."""

from __future__ import annotations

import os

import click

from crc.cli.options import categorical_option
from crc.core.data import dataset_from_columns, own_features
from crc.core.errors import CRCError
from crc.core.files import atomic_write_json
from crc.core.schema import CONTINUOUS, features_to_json, joined, load_features
from crc.tables.datasets import load_dataset


@click.command(short_help="Write the schema every peer of a deployment must share.")
@click.option("--data", required=True, help="CSV file (or bundled data set name) the schema is inferred from.")
@click.option("--label", default=None, help="Class column (required for a CSV file, but with --features-only).")
@categorical_option()
@click.option("--id-column", default=None,
              help="A column of instance ids to leave out of the features (a vertical party's CSV; `crc node`'s "
                   "--id-column).")
@click.option("--features-only", is_flag=True,
              help="A vertical group's member, whose CSV has no label: write a features file of its own columns "
                   "(kinds, categories, standardization) for the label holder's --join.")
@click.option("--join", "joins", multiple=True, type=click.Path(dir_okay=False),
              help="A vertical group's label holder: a member's features file, repeated for blocks 1, 2, ... in "
                   "order; the schema then has the label holder's columns as block 0 and theirs after (with "
                   "--blocks-out).")
@click.option("--blocks-out", type=click.Path(dir_okay=False), default=None,
              help="With --join: write the group's blocks file here (`crc node --blocks`).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Schema JSON file to write (with --features-only: the features file).")
def schema(data, label, categorical, id_column, features_only, joins, blocks_out, out):
    """Write the schema every peer must share: classes, feature kinds and
    categories, and the standardization (mean, std) of continuous features,
    computed on DATA.

    A vertical group whose parties hold their own columns: each member writes
    a features file of its CSV (--features-only --id-column id), the label
    holder joins them to its own (--label, --id-column, --join, --blocks-out)
    and gives every member the schema and the blocks file. Like the schema, a
    features file is public: it names the columns, their categories and means
    and standard deviations.
    """
    if features_only and (label or joins or blocks_out):
        raise click.UsageError("--features-only writes a member's own columns: it takes no --label, --join or "
                               "--blocks-out (the label holder joins the features files)")
    if bool(joins) != bool(blocks_out):
        raise click.UsageError("--join and --blocks-out go together: the joined schema's blocks file is written too")
    columns = _columns(data, id_column) if features_only or id_column else None
    if features_only:
        features = own_features(columns, source=data, categorical=categorical)
        atomic_write_json(out, features_to_json(features))
        click.echo(f"{out}: features file of {len(features)} features "
                   f"({sum(f.kind == CONTINUOUS for f in features)} continuous), for the label holder's --join")
        return
    dataset = (load_dataset(data, label=label, categorical=categorical) if columns is None
               else _labelled(columns, label, data, categorical))
    shared = dataset.schema.standardized(dataset.x[:, dataset.schema.continuous])
    if joins:
        blocks = [load_features(path) for path in joins]
        own = shared.feature_names
        shared = joined(shared, blocks, list(joins))
        atomic_write_json(blocks_out, {"blocks": [own, *[[f.name for f in block] for block in blocks]]})
        click.echo(f"{blocks_out}: {1 + len(blocks)} blocks, the label holder's columns as block 0")
    shared.save(out)
    click.echo(f"{out}: {len(shared.features)} features ({len(shared.continuous)} continuous, "
               f"{len(shared.discrete)} discrete), {shared.n_classes} classes, label {shared.label!r}")


def _columns(path: str, id_column: str | None) -> dict:
    """The columns of the CSV file ``path``, without ``id_column``."""
    from crc.tables.reader import read_csv  # pandas, when a file is read: not for `crc --help`

    if not os.path.exists(path):
        raise CRCError(f"{path}: no such file (--features-only and --id-column read a CSV file)")
    columns = read_csv(path)
    if id_column is not None:
        if id_column not in columns:
            raise CRCError(f"{path}: no id column {id_column!r}; columns are {', '.join(columns)}")
        del columns[id_column]
    return columns


def _labelled(columns: dict, label: str | None, path: str, categorical: tuple[str, ...]):
    if label is None:
        raise CRCError(f"{path}: a CSV file needs --label naming its class column (a vertical group's member without "
                       "it: --features-only)")
    return dataset_from_columns(columns, label, os.path.basename(path), categorical=categorical, source=str(path))
