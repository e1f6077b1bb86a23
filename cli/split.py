"""``crc split``: the files of a trial deployment, split as the simulator splits."""

from __future__ import annotations

from pathlib import Path

import click

from crc.cli.config_file import toml_text
from crc.cli.options import check_partition_options, options, usage_errors
from crc.cli.output import note, tiny_test_set_warning, warn
from crc.cli.summary import short_test_set_note
from crc.core.errors import CRCError
from crc.core.files import atomic_write_text
from crc.nodes.deployment import node_file, write_deployment
from crc.nodes.keys import peer_known_peers_file, peer_secret_key_file, write_peer_keys
from crc.nodes.node import check_address
from crc.protocol import SimulationConfig
from crc.protocol.repeat import load_for, make_split, repeat_seeds

PEER_CONFIG_COMMENT = """crc node --config {name}: peer {index} of a trial deployment written by `crc split --keys-for`.
Every option of `crc node` can be set here, named without its dashes (rounds = 64, timeout = 5,
metrics-port = 9100, ...); paths are relative to this file; the command line overrides the file.
`crc node --config {name} --print-config` shows every setting."""


def peer_config_file(directory, index: int) -> Path:
    return Path(directory) / f"peer-{index}.toml"


def write_peer_configs(directory, addresses: list[str]) -> None:
    """``directory/peer-<i>.toml``: the ``crc node`` settings of peer i, whose neighbours are all the others, with
    the node files, schema and keys written there (relative paths), and its checkpoint and model file beside them."""
    directory = Path(directory)
    for index, address in enumerate(addresses):
        settings = {"bind": address, "peers": [other for other in addresses if other != address],
                    "data": node_file(".", index).name, "schema": "schema.json",
                    "secret-key": peer_secret_key_file(".", index).as_posix(),
                    "known-peers": peer_known_peers_file(".", index).name,
                    "checkpoint": f"checkpoint-{index}", "out": f"model-{index}.json"}
        path = peer_config_file(directory, index)
        atomic_write_text(path, toml_text(settings, comment=PEER_CONFIG_COMMENT.format(name=path.name, index=index)))


@click.command(short_help="Write a trial deployment's files (node CSVs, test set, schema, peers' keys and settings).")
@options("data", "label", "nodes", "local_size", "pooled_size", "partition", "alpha", "size_skew", "test_size", "seed")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write the files into.")
@click.option("--keys-for", "addresses", default=None, metavar="ADDRESSES",
              help="Also write keys for a trial deployment whose peers bind these comma-separated addresses "
                   "(tcp://HOST:PORT, one per node, in node order): a key pair per peer, OUT/keys/node-<i>.key and "
                   ".key_secret, OUT/known-peers-<i>.json with every other peer's address and public key, and "
                   "OUT/peer-<i>.toml, peer i's settings for `crc node --config`. Existing keys are replaced.")
@click.pass_context
def split(ctx, out, addresses, **settings):
    """Write a deployment's files: OUT/node-<i>.csv (original columns), OUT/test.csv
    and OUT/schema.json (standardized on the pooled training set).

    The split is the one `crc simulate` uses for the same options and seed
    (its first repeat), so a deployment can be compared with the simulator.
    With --keys-for, node i runs `crc node --config OUT/peer-<i>.toml`: its
    address, every other peer as a neighbour, its data, the schema, its keys,
    its checkpoint OUT/checkpoint-<i> and its model file OUT/model-<i>.json.
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
        write_peer_configs(out, addresses)
    sizes = [len(p) for p in drawn.parts]
    click.echo(f"{out}: {len(sizes)} node files ({min(sizes)}-{max(sizes)} instances, {config.partition} partition), "
               f"test.csv ({len(drawn.test_rows)} instances), schema.json"
               + (", keys/, known-peers-<i>.json and peer-<i>.toml" if addresses is not None else ""))
    if len(drawn.test_rows) < drawn.test_wanted:
        note(short_test_set_note(config.data, {"test": len(drawn.test_rows), "wanted": drawn.test_wanted,
                                               "train": len(drawn.train_rows)}, config.test_size))
    message = tiny_test_set_warning(len(drawn.test_rows))
    if message:
        warn(message)
