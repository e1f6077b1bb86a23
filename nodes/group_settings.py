"""The ``crc node`` settings of every peer of a vertical or hybrid deployment: whom it talks to (its group's other
members and, in a hybrid partition, its block's peers in the neighbouring groups) and the deployment's files it reads
and writes. ``crc launch`` passes them as a command line (``crc.nodes.vertical_launcher``) and ``crc split
--keys-for`` writes them into ``peer-<i>.toml``: one definition for both."""

from __future__ import annotations

from pathlib import Path

from crc.core.feature_partition import FeaturePartition
from crc.nodes.deployment import ID_COLUMN, LABEL_BLOCK, blocks_file, node_file
from crc.nodes.keys import deployment_run_id, peer_known_peers_file, peer_secret_key_file, write_peer_keys
from crc.protocol import SimulationConfig


def group_graph(config: SimulationConfig, graph_seed):
    """The graph over a hybrid partition's groups, drawn as the simulator draws it from ``graph_seed`` (a repeat's);
    None for a vertical partition (one group)."""
    from crc.topologies import Schedule  # the graph libraries on use: `crc split --help` imports this module

    fp = config.feature_partition
    return Schedule(config.topology, fp.groups, seed=graph_seed).graph(1) if fp.kind == "hybrid" else None


def neighbourhoods(config: SimulationConfig, graph) -> list[tuple[list[int], list[int]]]:
    """Each peer's (group members, block neighbours) by peer number g K + b: the other peers of group g, and the peers
    of block b in the groups next to g on ``graph`` (over the groups; None for a vertical partition)."""
    fp = config.feature_partition
    out = []
    for g in range(fp.groups):
        for b in range(fp.blocks):
            members = [fp.peer(g, other) for other in range(fp.blocks) if other != b]
            blocks = [] if graph is None else [fp.peer(h, b) for h in sorted(graph.neighbors(g))]
            out.append((members, blocks))
    return out


def write_group_keys(directory, addresses: list[str], around: list[tuple[list[int], list[int]]]) -> None:
    """New keys for the peers at ``addresses`` (``crc.nodes.keys.write_peer_keys``, replacing any there), each knowing
    the keys of its members and block neighbours (``around``, as ``neighbourhoods`` gives them) and of theirs; no
    neighbourhoods files (a group's peers mask their scores with their members' keys, ``crc.nodes.score_masks``)."""
    write_peer_keys(directory, addresses, [members + blocks for members, blocks in around], force=True,
                    neighbourhoods=False)


def group_peer_settings(peer: int, addresses: list[str], fp: FeaturePartition, *, members: list[int],
                        block_peers: list[int], directory, ess: float | None, secure_aggregation: bool = False,
                        plaintext: bool = False) -> dict[str, object]:
    """Peer ``peer`` = g K + b's settings (at ``addresses[peer]``, the holder of block b of group g, whose group
    ``members`` and, hybrid, ``block_peers`` are peer numbers too), by ``crc node`` option key (its long name without
    the dashes): its files and keys in ``directory`` (Paths), its checkpoint ``checkpoint-<peer>`` and model file
    ``model-<peer>.json`` beside them, the run id of the keys written there, the group's label holder (the peer of
    ``LABEL_BLOCK``, whose PSI request alone a member answers); ``ess`` left out if None (a vertical
    group's peers then take m / lr of the aligned group); ``plaintext``: no keys (``insecure``)."""
    directory = Path(directory)
    settings = {"run-id": deployment_run_id(directory), "partition": fp.spec, "blocks": blocks_file(directory),
                "block": peer % fp.blocks, "id-column": ID_COLUMN, "bind": addresses[peer],
                "peers": [addresses[q] for q in members],
                "label-holder": addresses[peer - peer % fp.blocks + LABEL_BLOCK]}
    if fp.kind == "hybrid":
        settings["block-peers"] = [addresses[q] for q in block_peers]
    if ess is not None:
        settings["ess"] = ess
    settings |= {"data": node_file(directory, peer), "schema": directory / "schema.json",
                 "checkpoint": directory / f"checkpoint-{peer}", "out": directory / f"model-{peer}.json"}
    settings |= ({"insecure": True} if plaintext else
                 {"secret-key": peer_secret_key_file(directory, peer), "known-peers": peer_known_peers_file(directory, peer)})
    if secure_aggregation:
        settings["secure-aggregation"] = True
    return settings


def node_arguments(settings: dict[str, object]) -> list[str]:
    """``settings`` (by option key, as ``group_peer_settings`` gives them) as ``crc node`` arguments: a list
    comma-separated, True a flag."""
    arguments = []
    for key, value in settings.items():
        if value is True:
            arguments.append(f"--{key}")
        else:
            arguments += [f"--{key}", ",".join(value) if isinstance(value, list) else str(value)]
    return arguments
