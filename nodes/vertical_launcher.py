"""Run the groups of a vertical or hybrid partition as real ``crc node --partition ...`` processes on 127.0.0.1 and
evaluate them like the simulator (``crc.nodes.launcher`` does the same for horizontal partitions).

The split, the blocks, the graph over the groups and the ESS are those of the simulator's first repeat for the same
options; each peer's file holds its block's columns of its group's instances with an id column, in an order of its
own, so that each group aligns its rows as a real one would. A group's classifier is the join of its peers' block
statistics: with no faults it equals the simulator's (a vertical group: centralized RC of the block model with RC's
choice of the iterate; hybrid groups: CRC over the graph of the groups).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from crc.core.errors import CRCError
from crc.core.model_file import load_model
from crc.core.models import all_options
from crc.nodes.block_steps import em_passes, rounds_of
from crc.nodes.checkpoint import completed_round
from crc.nodes.deployment import write_vertical_deployment
from crc.nodes.group_settings import group_graph, group_peer_settings, neighbourhoods, node_arguments, write_group_keys
from crc.nodes.launcher import PeerProcesses, free_ports, run_deadline_s
from crc.nodes.settings import PeerSettings
from crc.protocol import SimulationConfig
from crc.protocol.central import central_results
from crc.protocol.repeat import ess_for, load_for, prepare_repeat
from crc.protocol.results import repeat_results, results_json
from crc.protocol.vertical import describe, resolve_partition

SETUP_KINDS = ("psi-request", "psi-answer", "psi-ids", "start")
"""The messages of a group's set-up (``crc.nodes.vertical_peer.Frame``): the alignment, the round-0 weights and a
mixture's EM passes."""


def vertical_node_command(peer: int, addresses: list[str], config: SimulationConfig, *, members: list[int],
                          block_peers: list[int], workdir: Path, ess: float, timeout: float, first_round_timeout: float,
                          log_level: str, plaintext: bool = False) -> list[str]:
    """The ``crc node`` command line of peer ``peer`` = g K + b (at ``addresses[peer]``), the holder of block b of group
    g, whose group ``members`` and (hybrid) ``block_peers`` are peer numbers too: its settings in the deployment
    (``group_peer_settings``, as ``crc split --keys-for`` writes them, with ``ess``), and the run's model, rounds,
    timeouts (seconds) and log level."""
    settings = group_peer_settings(peer, addresses, config.feature_partition, members=members, block_peers=block_peers,
                                   directory=workdir, ess=ess, secure_aggregation=config.secure_aggregation,
                                   plaintext=plaintext)
    flags = {option.name: option.flag for option in all_options()}
    model = [arg for name, value in config.model_options.items() for arg in (flags[name], str(value))]
    return [sys.executable, "-I", "-m", "crc", "node", *node_arguments(settings), "--model", config.model, *model,
            "--rounds", str(config.rounds), "--timeout", repr(timeout), "--first-round-timeout", repr(first_round_timeout),
            "--log-level", log_level]


def launch_groups(config: SimulationConfig, workdir, *, timeout: float = PeerSettings.timeout_s,
                    first_round_timeout: float = PeerSettings.first_round_timeout_s, log_level: str = "warning",
                    progress: Callable[[int, int], None] | None = None, plaintext: bool = False) -> dict:
    """Run the G x K peers of ``config``'s vertical or hybrid partition, wait for them (at most ``run_deadline_s`` of
    every wait a round may take), and return the results JSON with ``network``, over the groups whose every peer
    finished (a group with a peer that did not finish has no classifier); none: a CRCError naming the peers and the
    work directory."""
    workdir = Path(workdir)
    with PeerProcesses(ready_timeout=first_round_timeout) as peers:
        dataset = load_for(config)
        config = resolve_partition(config, dataset)
        rep = prepare_repeat(dataset, config, 0)
        write_vertical_deployment(dataset, rep.split, workdir, seed=config.seed)
        fp = config.feature_partition
        graph = group_graph(config, rep.graph_seed)
        around = neighbourhoods(config, graph)
        addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(fp.peers)]
        ess = ess_for(config)
        if not plaintext:
            write_group_keys(workdir, addresses, around)
        started = time.monotonic()
        peers.wait_ready()
        for peer, (members, blocks) in enumerate(around):
            command = vertical_node_command(peer, addresses, config, members=members, block_peers=blocks, workdir=workdir,
                                            ess=ess, timeout=timeout, first_round_timeout=first_round_timeout,
                                            log_level=log_level, plaintext=plaintext)
            with open(workdir / f"node-{peer}.log", "wb") as log:
                peers.start(command, log)
        # every round may wait for the block neighbours and then for the group
        waits = config.rounds + 1 if graph is None else 2 * config.rounds
        peers.await_exits(started + run_deadline_s(waits, timeout=timeout, first_round_timeout=first_round_timeout), progress)
    wall = time.monotonic() - started
    results = _evaluate(dataset, config, rep, peers.started, workdir, ess=ess, wall=wall, addresses=addresses)
    results["network"]["encrypted"] = not plaintext
    results["config"]["timeout"] = timeout
    return results


def _evaluate(dataset, config: SimulationConfig, rep, processes, workdir: Path, *, ess: float, wall: float,
              addresses: list[str]) -> dict:
    """The results of the groups whose every peer finished (a group's classifier needs every block)."""
    fp = config.feature_partition
    em = em_passes(config.model)

    def rounds_done(passes: int | None) -> int | None:  # a peer counts passes; the results count rounds
        return None if passes is None else rounds_of(passes, em, config.rounds)

    status, models = [], {}
    for peer, process in enumerate(processes):
        path = workdir / f"model-{peer}.json"
        entry = {"node": peer, "group": peer // fp.blocks, "bind": addresses[peer], "exit_code": process.returncode}
        if process.returncode == 0 and path.exists():
            models[peer] = load_model(path)
            entry.update(status="finished", rounds_done=rounds_done(models[peer].metrics.get("rounds_done")))
        else:
            entry.update(status="failed", rounds_done=rounds_done(completed_round(workdir / f"checkpoint-{peer}")))
        status.append(entry)
    finished = [g for g in range(fp.groups) if all(fp.peer(g, b) in models for b in range(fp.blocks))]
    if not finished:
        failed = [entry for entry in status if entry["status"] != "finished"]
        listed = ", ".join(f"peer {e['node']} (exit code {e['exit_code']}, round {e['rounds_done']})" for e in failed)
        raise CRCError(f"no group finished, so none has a classifier (a group needs every block): {listed}; see the "
                       f"logs in {workdir}")
    model = rep.split.model
    joined = np.array([model.join([models[fp.peer(g, b)].stats for b in range(fp.blocks)]) for g in finished])
    result = repeat_results(rep, central_results(dataset, config, rep), joined, ess=ess, nodes=np.array(finished))
    result["feature_partition"] = describe(config, model)
    if config.secure_aggregation:  # what the label holder learns of the scores
        result["secure_aggregation"] = {"scores": "the members' sum", "members": fp.blocks - 1}
    combined = results_json(config, dataset, [result])
    passes = config.rounds + (1 if fp.kind == "vertical" else 0)
    return {**combined, "network": network_section([{**models[p].metrics, "group": p // fp.blocks} for p in sorted(models)],
                                                    passes, em, wall=wall, workdir=workdir, status=status),
            "nodes": status}


def network_section(metrics: list[dict], passes: int, em: int, *, wall: float, workdir: Path, status: list[dict]) -> dict:
    """The results' ``network`` from the finished peers' metrics (in peer order, each with its ``group``): totals as
    for horizontal peers, the set-up (alignment and start, with a mixture's ``em`` EM passes) apart, and per peer
    (its group and block) the messages and bytes of one of the ``passes`` (its scores, or the label holder's
    weights to every member, and in a hybrid partition its statistics to its block neighbours). The round times are
    the label holders' (a group's pass ends there)."""
    rejected = _summed(metrics, "rejected")
    holders = [m.get("round_ms", []) for m in metrics if m.get("role") == "label holder"]
    pass_ms = [ms for times in holders for ms in times[1 + em:]]  # pass 0: start-up, alignment, start; then EM

    def per_peer(m: dict) -> dict:
        by_kind = m.get("bytes_by_kind", {})
        setup = sum(by_kind.get(kind, 0) for kind in SETUP_KINDS)
        round_bytes = sum(count for kind, count in by_kind.items() if kind not in SETUP_KINDS)
        round_messages = sum(count for kind, count in m.get("messages_by_kind", {}).items() if kind not in SETUP_KINDS)
        return {"group": m.get("group"), "block": m.get("block"), "role": m.get("role"), "bind": m.get("bind"), "rows": m.get("rows"),
                "instances": m.get("instances"),
                "rows_dropped": m.get("rows_dropped"), "messages_sent": m.get("messages_sent"),
                "bytes_sent": m.get("bytes_sent"), "bytes_received": m.get("bytes_received"), "setup_bytes_sent": setup,
                "messages_per_round": round_messages / passes, "bytes_per_round": round_bytes / passes}

    return {
        "messages": sum(m.get("messages_sent", 0) for m in metrics), "bytes": sum(m.get("bytes_sent", 0) for m in metrics),
        "rejected": sum(rejected.values()), "rejected_by_cause": {k: v for k, v in rejected.items() if v},
        "refused_connections": {k: v for k, v in _summed(metrics, "refused").items() if v},
        "missing": sum(sum(m.get("missing", {}).values()) for m in metrics),
        "instances": sum(m.get("instances", 0) for m in metrics if m.get("role") == "label holder"),
        "setup_ms": max((sum(times[:1 + em]) for times in holders if times), default=0.0),
        "round_ms_p50": float(np.percentile(pass_ms, 50)) if pass_ms else 0.0,
        "round_ms_p99": float(np.percentile(pass_ms, 99)) if pass_ms else 0.0,
        "rounds_seconds": sum(pass_ms) / 1000,
        "peers": [per_peer(m) for m in metrics],
        "wall_s": wall, "finished": len(metrics), "failed": [s for s in status if s["status"] != "finished"],
        "workdir": str(workdir),
    }


def _summed(metrics: list[dict], key: str) -> dict:
    total = {}
    for m in metrics:
        for cause, count in m.get(key, {}).items():
            total[cause] = total.get(cause, 0) + count
    return total
