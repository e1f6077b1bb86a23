"""``crc split``: the files of a trial deployment, split as the simulator splits."""

from __future__ import annotations

import click

from crc.cli.options import options
from crc.cli.output import tiny_test_set_warning, warn
from crc.nodes.deployment import write_deployment
from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, make_split, repeat_seeds


@click.command(short_help="Write a trial deployment's files (node CSVs, test set, schema).")
@options("data", "label", "nodes", "local_size", "pooled_size", "partition", "alpha", "size_skew", "test_size", "seed")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write the files into.")
def split(out, **settings):
    """Write a deployment's files: OUT/node-<i>.csv (original columns), OUT/test.csv
    and OUT/schema.json (standardized on the pooled training set).

    The split is the one `crc simulate` uses for the same options and seed
    (its first repeat), so a deployment can be compared with the simulator.
    """
    config = SimulationConfig.from_settings(**settings)
    config.validate()
    dataset = load_for(config)
    drawn = make_split(dataset, config, repeat_seeds(config.seed, 0)[0])
    write_deployment(dataset, drawn, out)
    sizes = [len(p) for p in drawn.parts]
    click.echo(f"{out}: {len(sizes)} node files ({min(sizes)}-{max(sizes)} instances, {config.partition} partition), "
               f"test.csv ({len(drawn.test_rows)} instances), schema.json")
    message = tiny_test_set_warning(len(drawn.test_rows))
    if message:
        warn(message)
