"""``crc split``: the files of a trial deployment, split as the simulator splits."""

from __future__ import annotations

import click

from crc.cli.options import check_partition_options, options, usage_errors
from crc.cli.output import note, tiny_test_set_warning, warn
from crc.cli.summary import short_test_set_note
from crc.core.errors import CRCError
from crc.nodes.deployment import write_deployment
from crc.nodes.keys import write_peer_keys
from crc.nodes.node import check_address
from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, make_split, repeat_seeds


@click.command(short_help="Write a trial deployment's files (node CSVs, test set, schema).")
@options("data", "label", "nodes", "local_size", "pooled_size", "partition", "alpha", "size_skew", "test_size", "seed")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write the files into.")
@click.option("--keys-for", "addresses", default=None, metavar="ADDRESSES",
              help="Also write keys for a trial deployment whose peers bind these comma-separated addresses "
                   "(tcp://HOST:PORT, one per node, in node order): a key pair per peer, OUT/keys/node-<i>.key and "
                   ".key_secret, and OUT/known-peers-<i>.json with every other peer's address and public key. "
                   "Existing keys are replaced.")
@click.pass_context
def split(ctx, out, addresses, **settings):
    """Write a deployment's files: OUT/node-<i>.csv (original columns), OUT/test.csv
    and OUT/schema.json (standardized on the pooled training set).

    The split is the one `crc simulate` uses for the same options and seed
    (its first repeat), so a deployment can be compared with the simulator.
    With --keys-for, node i runs `crc node --bind <its address>
    --secret-key OUT/keys/node-<i>.key_secret --known-peers OUT/known-peers-<i>.json`.
    """
    config = SimulationConfig.from_settings(**settings)
    config.validate()
    check_partition_options(ctx, config, real_peers=True)
    if addresses is not None:
        with usage_errors(ctx):
            addresses = [check_address(a.strip(), "--keys-for") for a in addresses.split(",") if a.strip()]
        if len(addresses) != config.nodes or len(set(addresses)) != len(addresses):
            raise CRCError(f"--keys-for: give {config.nodes} distinct addresses, one per node (got {len(addresses)})")
    dataset = load_for(config)
    drawn = make_split(dataset, config, repeat_seeds(config.seed, 0)[0])
    write_deployment(dataset, drawn, out)
    if addresses is not None:
        write_peer_keys(out, addresses, force=True)
    sizes = [len(p) for p in drawn.parts]
    click.echo(f"{out}: {len(sizes)} node files ({min(sizes)}-{max(sizes)} instances, {config.partition} partition), "
               f"test.csv ({len(drawn.test_rows)} instances), schema.json"
               + (", keys/ and known-peers-<i>.json" if addresses is not None else ""))
    if len(drawn.test_rows) < drawn.test_wanted:
        note(short_test_set_note(config.data, {"test": len(drawn.test_rows), "wanted": drawn.test_wanted,
                                               "train": len(drawn.train_rows)}, config.test_size))
    message = tiny_test_set_warning(len(drawn.test_rows))
    if message:
        warn(message)
