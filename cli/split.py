"""``crc split``: the files of a trial deployment, split as the simulator splits."""

from __future__ import annotations

from pathlib import Path

import click

from crc.cli.config_file import toml_text
from crc.cli.finite import FiniteFloatRange
from crc.cli.options import check_partition_options, fit_local_size, options, usage_errors
from crc.cli.output import note, tiny_test_set_warning, warn
from crc.cli.privacy import sum_over_option
from crc.cli.summary import short_test_set_note
from crc.core.errors import CRCError
from crc.core.files import atomic_write_text
from crc.nodes import checkpoint
from crc.nodes.deployment import node_file, write_deployment, write_vertical_deployment
from crc.nodes.group_settings import group_graph, group_peer_settings, neighbourhoods, write_group_keys
from crc.nodes.keys import deployment_run_id, peer_known_peers_file, peer_neighbourhoods_file, peer_secret_key_file, write_peer_keys
from crc.nodes.node import check_address
from crc.nodes.roster import ROSTER_FILE, write_network_keys
from crc.protocol import SimulationConfig
from crc.protocol.rules import check_sum_over
from crc.protocol.vertical import resolve_partition

PEER_CONFIG_COMMENT = """crc node --config {name}: peer {index} of a trial deployment written by `crc split --keys-for`.
Every option of `crc node` can be set here, named without its dashes (rounds = 64, timeout = 5,
metrics-port = 9100, ...); paths are relative to this file; the command line overrides the file.
`crc node --config {name} --print-config` shows every setting."""


def peer_config_file(directory, index: int) -> Path:
    return Path(directory) / f"peer-{index}.toml"


def _first_names(names: list[str]) -> str:
    """The first four of ``names``, comma-separated, and '...' after them if there are more."""
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def write_peer_configs(directory, addresses: list[str], *, ess: float, secure_aggregation: bool = False,
                       neighbours: list[list[int]] | None = None, network: bool = False) -> None:
    """``directory/peer-<i>.toml``: the ``crc node`` settings of peer i, whose neighbours are ``neighbours[i]``
    (indices; None: all the others), with the node files, schema and keys written there (relative paths), its
    checkpoint and model file beside them, and the ``ess`` every peer shares (``ess_for``: a peer's default, its local
    size / lr, differs between peers of unequal sizes, which then refuse each other's statistics); with
    ``secure_aggregation``, turned on with the ``neighbourhoods-<i>.json`` written there, or with ``network`` (a
    network sum) with the ``roster.json`` written there."""
    directory = Path(directory)
    run = deployment_run_id(directory)  # one run for all the peers of these keys
    for index, address in enumerate(addresses):
        others = neighbours[index] if neighbours is not None else [j for j in range(len(addresses)) if j != index]
        settings = {"bind": address, "peers": [addresses[j] for j in others],
                    "data": node_file(".", index).name, "schema": "schema.json",
                    "secret-key": peer_secret_key_file(".", index).as_posix(),
                    "known-peers": peer_known_peers_file(".", index).name,
                    "checkpoint": f"checkpoint-{index}", "out": f"model-{index}.json", "run-id": run, "ess": ess}
        if secure_aggregation and network:
            settings |= {"secure-aggregation": True, "sum-over": "network", "roster": ROSTER_FILE}
        elif secure_aggregation:
            settings |= {"secure-aggregation": True, "neighbourhoods": peer_neighbourhoods_file(".", index).name}
        path = peer_config_file(directory, index)
        atomic_write_text(path, toml_text(settings, comment=PEER_CONFIG_COMMENT.format(name=path.name, index=index)))


def written_ess(config: SimulationConfig) -> float:
    """The ESS every peer of ``config``'s deployment shares (``ess_for``) to 12 significant digits, as a peer file
    shows it: 2000.0, not 1999.9999999999998."""
    from crc.protocol.repeat import ess_for  # the protocol's run-time modules on use: not for --help

    return float(f"{ess_for(config):.12g}")


def write_group_configs(directory, addresses: list[str], config: SimulationConfig, graph_seed) -> None:
    """New keys and ``directory/peer-<i>.toml`` for every peer of ``config``'s vertical or hybrid partition: the
    settings ``crc launch`` gives its peers (``crc.nodes.group_settings``), the paths relative to the file; the ESS
    (``ess_for``, the same on every peer) for a hybrid partition only (a vertical group's peers take m / lr of the
    rows they align); the graph over the groups drawn from ``graph_seed`` as the simulator's."""
    directory = Path(directory)
    around = neighbourhoods(config, group_graph(config, graph_seed))
    write_group_keys(directory, addresses, around)
    ess = written_ess(config) if config.feature_partition.kind == "hybrid" else None
    for peer, (members, blocks) in enumerate(around):
        settings = group_peer_settings(peer, addresses, config.feature_partition, members=members, block_peers=blocks,
                                       directory=directory, ess=ess, secure_aggregation=config.secure_aggregation)
        settings = {key: value.relative_to(directory).as_posix() if isinstance(value, Path) else value
                    for key, value in settings.items()}
        path = peer_config_file(directory, peer)
        atomic_write_text(path, toml_text(settings, comment=PEER_CONFIG_COMMENT.format(name=path.name, index=peer)))


@click.command(short_help="Write a trial deployment's files: node CSVs, schema, keys.")
@options("data", "label", "categorical", "nodes", "local_size", "pooled_size", "partition", "feature_blocks", "alpha", "size_skew",
         "topology", "test_size", "seed")
@click.option("--drop-ids", type=FiniteFloatRange(min=0, max=1, max_open=True), default=0.0, show_default=True,
              help="Vertical and hybrid partitions: leave this fraction of the rows out of each peer's file (at random, "
                   "seeded), a trial of the alignment: a group learns from the ids every one of its peers keeps.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write the files into.")
@click.option("--keys-for", "addresses", default=None, metavar="ADDRESSES",
              help="Also write keys for a trial deployment whose peers bind these comma-separated addresses "
                   "(tcp://HOST:PORT, one per node, in node order): a key pair per peer, OUT/keys/node-<i>.key and "
                   ".key_secret, OUT/known-peers-<i>.json with its neighbours' addresses and public keys, and "
                   "OUT/peer-<i>.toml, peer i's settings for `crc node --config` (a vertical or hybrid partition's: "
                   "those `crc launch` gives its peers). Existing keys are replaced, and the checkpoints of the "
                   "earlier run in OUT/checkpoint-<i> removed: the new keys make a new run, which cannot resume from "
                   "them.")
@click.option("--secure-aggregation", is_flag=True,
              help="With --keys-for (a horizontal partition, or a vertical group of three peers or more): the peers "
                   "run secure aggregation; OUT/peer-<i>.toml turns it on (a horizontal partition's names "
                   "OUT/neighbourhoods-<i>.json, written with the keys, or with --sum-over network OUT/roster.json).")
@sum_over_option()
@click.pass_context
def split(ctx, out, addresses, drop_ids, secure_aggregation, sum_over, **settings):
    """Write a deployment's files: OUT/node-<i>.csv (original columns), OUT/test.csv
    and OUT/schema.json (standardized on the pooled training set).

    The split is the one `crc simulate` uses for the same options and seed
    (its first repeat), so a deployment can be compared with the simulator.
    With --keys-for, node i runs `crc node --config OUT/peer-<i>.toml`: its
    address, its neighbours (a horizontal partition: every other peer), its
    data, the schema, its keys, its checkpoint OUT/checkpoint-<i> and its
    model file OUT/model-<i>.json.

    With --keys-for, --secure-aggregation and --sum-over network, the peers
    are the nodes of --topology (drawn from --seed as `crc simulate` draws
    it), OUT/roster.json lists every peer's address and public key and the
    graph's edges, every known-peers-<i>.json holds every other peer's key,
    and OUT/peer-<i>.toml names the roster.

    With --partition vertical:K, node-<b>.csv holds an `id` column and block
    b's feature columns (node-0.csv the label column too), each file's rows in
    an order of their own; OUT/blocks.json names every block's features; with
    --keys-for, OUT/peer-<b>.toml also names the partition, its block, the
    blocks file and the other members. With --partition hybrid:GxK,
    node-<gK+b>.csv holds block b of group g's instances (block 0's the label
    too), and OUT/peer-<gK+b>.toml also names block b's peers in the groups
    next to g on the --topology over the groups, and the ESS.
    """
    from crc.protocol.repeat import load_for, make_split, repeat_seeds  # the engine on use: not for --help

    if secure_aggregation and addresses is None:
        raise click.UsageError("--secure-aggregation is for --keys-for")
    with usage_errors(ctx):
        check_sum_over(sum_over, secure_aggregation=secure_aggregation)
    network = sum_over == "network"
    config = SimulationConfig.from_settings(**settings, secure_aggregation=secure_aggregation)
    config.validate()
    check_partition_options(ctx, config, real_peers=True)
    config = fit_local_size(ctx, config)
    if drop_ids and config.feature_partition is None:
        raise click.UsageError("--drop-ids is for a vertical or hybrid --partition")
    if network and config.feature_partition is not None:
        raise click.UsageError(f"--sum-over network: not with --partition {config.partition} (its peers are horizontal)")
    if (ctx.get_parameter_source("topology") is click.core.ParameterSource.COMMANDLINE and not network
            and (config.feature_partition is None or config.feature_partition.kind != "hybrid")):
        raise click.UsageError("--topology is for a hybrid --partition (its graph over the groups) or --sum-over "
                               "network (the peers' graph); a horizontal split's peer-<i>.toml otherwise makes every "
                               "peer a neighbour of every other")
    dataset = load_for(config)
    if config.feature_partition is not None:
        config = resolve_partition(config, dataset)
    peers = config.feature_partition.peers if config.feature_partition is not None else config.nodes
    if addresses is not None:
        with usage_errors(ctx):
            addresses = [check_address(a.strip(), "--keys-for") for a in addresses.split(",") if a.strip()]
        if len(addresses) != peers or len(set(addresses)) != len(addresses):
            raise CRCError(f"--keys-for: give {peers} distinct addresses, one per node (got {len(addresses)})")
    split_seed, graph_seed, _ = repeat_seeds(config.seed, 0)
    drawn = make_split(dataset, config, split_seed)
    if config.feature_partition is not None:
        held = write_vertical_deployment(dataset, drawn, out, seed=config.seed, drop_ids=drop_ids)
        fp = config.feature_partition
        widths = ", ".join(str(len(block)) for block in drawn.model.blocks)
        groups, where = (("a vertical group", "") if fp.kind == "vertical" else
                         (f"{fp.groups} groups of {fp.blocks}", "; group g's block b in node-<gK+b>.csv"))
        summary = (f"{out}: {peers} peer files of {groups} (an id column and {widths} features; the label in block "
                   f"0's{where}), blocks.json, test.csv ({len(drawn.test_rows)} instances), schema.json")
        if drop_ids:
            summary += (f"; every peer of a group holds {', '.join(map(str, held))} of the group's "
                        f"{', '.join(str(len(part)) for part in drawn.parts)} instances")
    else:
        write_deployment(dataset, drawn, out)
        sizes = [len(p) for p in drawn.parts]
        each = f"{min(sizes)} instances each" if min(sizes) == max(sizes) else f"{min(sizes)} to {max(sizes)} instances"
        summary = (f"{out}: {len(sizes)} node files ({each}, {config.partition} partition), "
                   f"test.csv ({len(drawn.test_rows)} instances), schema.json")
    if addresses is not None:
        if config.feature_partition is not None:
            write_group_configs(out, addresses, config, graph_seed)
        elif network:
            from crc.topologies import Schedule  # the graph libraries for this graph only: not for --help

            graph = Schedule(config.topology, config.nodes, seed=graph_seed).graph(1)
            write_network_keys(out, addresses, graph.edges(), force=True)
            write_peer_configs(out, addresses, ess=written_ess(config), secure_aggregation=True, network=True,
                               neighbours=[sorted(graph.neighbors(i)) for i in range(peers)])
        else:
            everyone = [[j for j in range(peers) if j != i] for i in range(peers)] if secure_aggregation else None
            write_peer_keys(out, addresses, everyone, force=True)
            write_peer_configs(out, addresses, ess=written_ess(config), secure_aggregation=secure_aggregation)
        hoods = ((f", {ROSTER_FILE}" if network else ", neighbourhoods-<i>.json")
                 if secure_aggregation and config.feature_partition is None else "")
        summary += f", keys/, known-peers-<i>.json{hoods} and peer-<i>.toml"
    click.echo(summary)
    if addresses is not None:  # new keys, a new run: no peer resumes these
        discarded = [f"checkpoint-{i}" for i in range(peers) if checkpoint.discard(Path(out) / f"checkpoint-{i}")]
        if discarded:
            note(f"removed {_first_names(discarded)}: checkpoints of an earlier run, which the peers of these new keys "
                 "(a new run id) could not resume from")
    stale = sorted(p.name for pattern in ("checkpoint-*", "model-*.json") for p in Path(out).glob(pattern))
    if stale:
        resumes = "a peer resumes from its checkpoint, and " if any(name.startswith("checkpoint-") for name in stale) else ""
        warn(f"{out} holds {_first_names(stale)} from an earlier run: {resumes}a peer replaces its model file only when "
             "it finishes its rounds (until then, or if it fails, crc predict reads the old one, which may not fit the "
             "new data); remove them to start afresh")
    if len(drawn.test_rows) < drawn.test_wanted:
        note(short_test_set_note(config.data, {"test": len(drawn.test_rows), "wanted": drawn.test_wanted,
                                               "train": len(drawn.train_rows)}, config.test_size))
    message = tiny_test_set_warning(len(drawn.test_rows), short=len(drawn.test_rows) < drawn.test_wanted)
    if message:
        warn(message)
