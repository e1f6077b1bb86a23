"""Run a whole network of real ``crc node`` processes on 127.0.0.1 and evaluate it like the simulator.

The split, the graph, the ESS and the evaluation sample are those of the
simulator's first repeat for the same options, so with no faults the peers'
statistics equal the simulator's.

Each peer is its own process running ``node_command``'s command line, forked by
one spawner per launch that has imported what a peer needs (``crc.nodes.spawner``;
a fresh process per peer where fork or pidfds are missing).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from crc.core.distributed_noise import Neighbourhoods
from crc.core.errors import CRCError
from crc.core.loss import loss_seed
from crc.core.model_file import load_model
from crc.core.models import all_options
from crc.nodes.checkpoint import completed_round
from crc.nodes.deployment import node_file, write_deployment
from crc.nodes.keys import deployment_run_id, peer_known_peers_file, peer_neighbourhoods_file, peer_secret_key_file, write_peer_keys
from crc.nodes.roster import write_network_keys
from crc.nodes.settings import PeerSettings
from crc.nodes.spawner import SINGLE_THREADED, Child, Spawner, supported
from crc.protocol import SimulationConfig
from crc.protocol.central import central_results
from crc.protocol.neighbourhoods import check_graph_protectable
from crc.protocol.network_sum import masking_summary
from crc.protocol.repeat import ess_for, load_for, prepare_repeat
from crc.protocol.results import add_honest, repeat_results, results_json
from crc.protocol.rules import check_secure_aggregation
from crc.protocol.simulator import byzantine_for
from crc.topologies import Schedule, averaging_matrix, complete_graph

REAP_GRACE_S = 3.0


def free_ports(count: int) -> list[int]:
    """Ports on 127.0.0.1 that are free now (held open together so that they are distinct)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def node_command(index: int, addresses: list[str], neighbours: list[int], config: SimulationConfig, *, workdir: Path,
                 ess: float, timeout: float, first_round_timeout: float, log_level: str, attack: str | None = None,
                 plaintext: bool = False, start_at: float | None = None, sums_per_round: int | None = None,
                 roster: Path | None = None) -> list[str]:
    """The ``crc node`` command line of peer ``index``; the timeouts are in seconds (see PeerSettings); ``attack``
    makes it a Byzantine peer (``crc node --attack``); ``sums_per_round``: distributed noise's
    ``--dp-sums-per-round`` (None: each peer's own count); ``roster``: with secure aggregation, a network sum
    (``--sum-over network``) of the peers of this roster file instead of a sum over each neighbourhood.

    The peer encrypts its connections with the keys ``write_peer_keys`` writes into ``workdir``, or runs in
    plaintext without keys (``crc node --insecure``) with ``plaintext``."""
    keys = (["--insecure"] if plaintext else
            ["--secret-key", str(peer_secret_key_file(workdir, index)),
             "--known-peers", str(peer_known_peers_file(workdir, index))])
    flags = {option.name: option.flag for option in all_options()}
    model = [arg for name, value in config.model_options.items() for arg in (flags[name], str(value))]
    # -I: the installed crc, never a checkout that happens to be the working directory.
    return [sys.executable, "-I", "-m", "crc", "node", "--run-id", deployment_run_id(workdir), "--bind", addresses[index],
            "--peers", ",".join(addresses[j] for j in neighbours), "--data", str(node_file(workdir, index)),
            "--schema", str(workdir / "schema.json"), "--model", config.model, *model, "--rounds", str(config.rounds),
            "--algorithm", config.algorithm, "--iters", str(config.iters), "--momentum", repr(config.momentum), "--start", config.start,
            "--safeguard" if config.safeguard else "--no-safeguard", "--classifier", config.classifier,
            "--exact-diffusion" if config.exact_diffusion else "--no-exact-diffusion",
            "--loss", repr(config.loss),
            "--loss-seed", str(loss_seed(config.seed, 0, index)), "--ess", repr(ess), "--timeout", repr(timeout),
            "--first-round-timeout", repr(first_round_timeout), *(["--start-at", repr(start_at)] if start_at is not None else []),
            "--checkpoint", str(workdir / f"checkpoint-{index}"), "--out", str(workdir / f"model-{index}.json"),
            "--log-level", log_level, "--aggregate", config.aggregate, *(["--attack", attack] if attack else []),
            "--release-every", str(config.release_every),
            *_privacy_arguments(config, sums_per_round), *keys,
            *(_secure_aggregation_arguments(index, workdir, roster, config.dp_colluders) if config.secure_aggregation else [])]


def _secure_aggregation_arguments(index: int, workdir: Path, roster: Path | None, colluders: int) -> list[str]:
    """``--secure-aggregation`` with peer ``index``'s neighbourhoods file in ``workdir``, or with ``roster`` a network
    sum of its peers; and ``--colluders``."""
    scope = (["--sum-over", "network", "--roster", str(roster)] if roster is not None else
             ["--neighbourhoods", str(peer_neighbourhoods_file(workdir, index))])
    return ["--secure-aggregation", *scope, "--colluders", str(colluders)]


def sums_per_round(graph, dropouts: int = 0) -> int:
    """The most closed-neighbourhood sums any peer of ``graph`` (networkx) is in each round under ``--dp-dropouts``
    ``dropouts``: distributed noise's k, as the simulator's ``plan_distributed`` counts it."""
    return int(Neighbourhoods.of(averaging_matrix(graph), dropouts).sums_per_peer(graph.number_of_nodes()).max())


def _privacy_arguments(config: SimulationConfig, per_round: int | None) -> list[str]:
    """``--dp-epsilon``, ``--dp-delta`` and ``--clip`` of a private run (none otherwise); with distributed noise,
    ``--dp-noise``, ``--dp-dropouts`` and ``--dp-sums-per-round`` (``per_round``, if given)."""
    if config.dp_epsilon is None:
        return []
    common = ["--dp-epsilon", repr(config.dp_epsilon), "--dp-delta", repr(config.dp_delta), "--clip", repr(config.clip)]
    if config.dp_noise != "distributed":
        return common
    return [*common, "--dp-noise", "distributed", "--dp-dropouts", str(config.dp_dropouts),
            *(["--dp-sums-per-round", str(per_round)] if per_round is not None else [])]


class _Process(subprocess.Popen):
    """A peer started as a fresh process, where the spawner is not supported (no fork or no pidfds)."""

    @property
    def exited(self) -> bool:
        return self.poll() is not None


def reap(processes: list[_Process | Child]) -> None:
    """Stop every process still running: SIGTERM, then SIGKILL after a grace period."""
    for process in processes:
        if not process.exited:
            process.terminate()
    deadline = time.monotonic() + REAP_GRACE_S
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):  # unkillable (stuck in the kernel): exit code unknown
                process.wait(timeout=REAP_GRACE_S)


class PeerProcesses:
    """The peer processes of one launch: forked by one spawner that has imported what a peer needs (``spawner``; None
    where ``supported`` says no, then each peer is a fresh process). Leaving the ``with`` block (or ``close``) stops
    every peer still running (``reap``) and closes the spawner, after an error or an interruption too."""

    def __init__(self, *, ready_timeout: float):
        self.spawner = Spawner(ready_timeout=ready_timeout) if supported() else None
        self.started: list[_Process | Child] = []

    def __enter__(self) -> PeerProcesses:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wait_ready(self) -> bool:
        """Wait until the spawner can fork; whether peers are forked (fresh processes start too slowly and unevenly
        for a common start time to pay)."""
        if self.spawner is None:
            return False
        self.spawner.wait_ready()
        return True

    def start(self, command: list[str], log) -> _Process | Child:
        """Start a peer with ``command``, its standard error to ``log`` (a binary file)."""
        if self.spawner is None:
            process = _Process(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                               env={**os.environ, **SINGLE_THREADED})
        else:
            with open(os.devnull, "r+b") as devnull:
                process = self.spawner.start(command, stdin=devnull, stdout=devnull, stderr=log)
        self.started.append(process)
        return process

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less as soon as a forked peer's exit is reported."""
        if self.spawner is not None:
            self.spawner.pump(seconds)
        else:
            time.sleep(seconds)

    def await_exits(self, deadline: float, progress: Callable[[int, int], None] | None = None) -> None:
        """Wait until every peer started exited or ``deadline`` (``time.monotonic``) passed, telling ``progress``
        (exited, all) as they go."""
        while not all(p.exited for p in self.started) and time.monotonic() < deadline:
            if progress is not None:
                progress(sum(p.exited for p in self.started), len(self.started))
            self.pause(min(0.1, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        try:
            reap(self.started)
        finally:
            if self.spawner is not None:
                self.spawner.close()


START_ALLOWANCE_S = (0.2, 0.03)
"""(base, per peer) seconds from the moment the spawner can fork to the peers' common ``--start-at``: forking
a peer and its setup (data, keys, sockets) took 10-20 ms each for 16 peers on 2 cores; a peer ready
earlier listens until then, one ready later starts when ready."""


def start_time(peers: int) -> float:
    """The wall-clock time (seconds since the epoch) at which ``peers`` peers forked from now begin their rounds."""
    base, per_peer = START_ALLOWANCE_S
    return time.time() + base + per_peer * peers


def run_deadline_s(rounds: int, *, timeout: float, first_round_timeout: float) -> float:
    """Seconds a whole launch may take: the peers' start-up (which the first round's timeout is sized
    for), the first round, and every round waiting its full timeout, with one to spare for computing."""
    return 2 * first_round_timeout + rounds * timeout


def check_launch(config: SimulationConfig, *, plaintext: bool = False) -> None:
    """A CRCError (an OptionConflict for options that cannot go together) if real peers cannot run ``config``:
    what the simulator checks (a network sum's needs among them), plus a static graph, one repeat and keys for secure
    aggregation."""
    config.validate()
    if config.period is not None:
        raise CRCError("real peers use a static graph: --period is for the simulator")
    if config.repeats != 1:
        raise CRCError("crc launch runs one repeat")
    check_secure_aggregation(secure_aggregation=config.secure_aggregation, aggregate=config.aggregate,
                             encrypted_transport=not plaintext)


def launch(config: SimulationConfig, workdir, *, timeout: float = PeerSettings.timeout_s,
           first_round_timeout: float = PeerSettings.first_round_timeout_s, log_level: str = "warning",
           progress: Callable[[int, int], None] | None = None, plaintext: bool = False) -> dict:
    """Run ``config.nodes`` peers, wait for them (at most ``run_deadline_s``), and return the results JSON
    with ``network``. ``timeout`` and ``first_round_timeout`` are the peers' (seconds, see PeerSettings).

    The peers authenticate and encrypt with CURVE keys generated for this run in ``workdir``; with ``plaintext``
    they run without keys (``crc launch --insecure``). With ``config.sum_over`` network, secure aggregation is one sum of all
    peers a round, relayed along the graph: ``workdir/roster.json`` lists every peer and its key
    (``write_network_keys``)."""
    check_launch(config, plaintext=plaintext)
    workdir = Path(workdir)
    # The spawner imports what a peer needs (once for all peers) while the deployment is prepared.
    with PeerProcesses(ready_timeout=first_round_timeout) as peers:
        dataset = load_for(config)
        rep = prepare_repeat(dataset, config, 0)
        write_deployment(dataset, rep.split, workdir)
        graph = Schedule(config.topology, config.nodes, seed=rep.graph_seed).graph(1)
        network = config.sum_over == "network"
        # A network sum averages every peer each round, as the complete graph's neighbourhoods do: one sum of all.
        summed = complete_graph(config.nodes) if network else graph
        config.privacy(rep.split.model, averaging_matrix(graph))  # the peers' plan: one that cannot be made stops here
        if config.secure_aggregation:  # as in the simulator: here, not in every peer's log
            check_graph_protectable(averaging_matrix(summed), config.dp_colluders, config.dp_dropouts)
        addresses = [f"tcp://127.0.0.1:{port}" for port in free_ports(config.nodes)]
        ess = ess_for(config)
        byzantine = byzantine_for(rep, config)[0]  # the simulator's Byzantine peers for the same options
        roster = None
        if network:
            roster = write_network_keys(workdir, addresses, graph.edges(), force=True)
        elif not plaintext:
            write_peer_keys(workdir, addresses, [sorted(graph.neighbors(i)) for i in range(config.nodes)], force=True)
        started = time.monotonic()
        start_at = start_time(config.nodes) if peers.wait_ready() else None
        for index in range(config.nodes):
            command = node_command(index, addresses, sorted(graph.neighbors(index)), config, workdir=workdir, ess=ess,
                                   timeout=timeout, first_round_timeout=first_round_timeout, log_level=log_level,
                                   attack=config.attack if index in byzantine else None, plaintext=plaintext,
                                   start_at=start_at, roster=roster,
                                   sums_per_round=None if network else sums_per_round(graph, config.dp_dropouts))
            with open(workdir / f"node-{index}.log", "wb") as log:
                peers.start(command, log)
        peers.await_exits(started + run_deadline_s(config.rounds, timeout=timeout, first_round_timeout=first_round_timeout),
                          progress)
    wall = time.monotonic() - started
    results = evaluate_peers(dataset, config, rep, peers.started, workdir, ess=ess, wall=wall, addresses=addresses,
                             timeout=timeout, byzantine=byzantine, graph=graph)
    results["network"]["encrypted"] = not plaintext
    return results


def evaluate_peers(dataset, config: SimulationConfig, rep, processes: list, workdir: Path, *, ess: float, wall: float,
                   addresses: list[str], timeout: float, byzantine: np.ndarray, graph) -> dict:
    """The results JSON of a launch of ``config``'s first repeat ``rep`` with ``network`` and ``nodes``: the peers
    ``processes`` (index i: the peer of ``addresses[i]``) that exited with 0 and wrote ``model-<i>.json`` in
    ``workdir`` are evaluated like the simulator's; the others are listed as failed, with their checkpoint's round.
    ``wall``: seconds; ``byzantine``: the Byzantine peers' indices; ``graph``: the peers' communication graph."""
    finished, stats, status, metrics = [], [], [], []
    for index, process in enumerate(processes):
        path = workdir / f"model-{index}.json"
        entry = {"node": index, "bind": addresses[index], "exit_code": process.returncode}
        if process.returncode == 0 and path.exists():
            model = load_model(path)
            finished.append(index)
            stats.append(model.stats)
            metrics.append(model.metrics)
            entry.update(status="finished", rounds_done=model.metrics.get("rounds_done"))
        else:
            entry.update(status="failed", rounds_done=completed_round(workdir / f"checkpoint-{index}"))
        status.append(entry)
    if not finished:
        raise CRCError(f"no peer finished; see the logs in {workdir}")
    central = central_results(dataset, config, rep)
    results = repeat_results(rep, central, np.array(stats), ess=ess, nodes=np.array(finished))
    if config.byzantine:
        add_honest(results, rep, np.array(stats), np.array(finished), byzantine)
    privacy = [m["privacy"] for m in metrics if "privacy" in m]
    if privacy:
        results["privacy"] = privacy[0]
    if config.secure_aggregation:
        results["secure_aggregation"] = {**masking_summary(config.sum_over, averaging_matrix(graph), config.dp_colluders),
                                         "unmask_fallbacks": sum(m.get("unmask_fallbacks", 0) for m in metrics),
                                         "reveals_refused": sum(m.get("reveals_refused", 0) for m in metrics),
                                         "deviations": sum(m.get("deviations", 0) for m in metrics)}
    rounds_ms = [ms for m in metrics for ms in m.get("round_ms", [])]
    later_ms = [ms for m in metrics for ms in m.get("round_ms", [])[1:]]  # round 1 also waits for the peers' start-up
    rejected, refused = {}, {}
    for m in metrics:
        for cause, count in m.get("rejected", {}).items():
            rejected[cause] = rejected.get(cause, 0) + count
        for cause, count in m.get("refused", {}).items():
            refused[cause] = refused.get(cause, 0) + count
    payload = 8 * rep.split.model.size
    sent = sum(m.get("messages_sent", 0) for m in metrics)
    network = {
        "messages": sent, "bytes": sum(m.get("bytes_sent", 0) for m in metrics),
        "rejected": sum(rejected.values()), "rejected_by_cause": {k: v for k, v in rejected.items() if v},
        "refused_connections": {k: v for k, v in refused.items() if v},
        "missing": sum(sum(m.get("missing", {}).values()) for m in metrics),
        "round_ms_p50": float(np.percentile(rounds_ms, 50)) if rounds_ms else 0.0,
        "round_ms_p99": float(np.percentile(rounds_ms, 99)) if rounds_ms else 0.0,
        "round_ms_p99_after_first": float(np.percentile(later_ms, 99)) if later_ms else 0.0,
        "rounds_seconds": max(sum(m.get("round_ms", [])) for m in metrics) / 1000,
        "payload_bytes": payload,
        "bytes_per_message": (sum(m.get("bytes_sent", 0) for m in metrics) / sent) if sent else 0.0,
        "wall_s": wall, "finished": len(finished), "failed": [s for s in status if s["status"] != "finished"],
        "workdir": str(workdir),
    }
    combined = results_json(config, dataset, [results])
    combined["config"]["timeout"] = timeout
    return {**combined, "network": network, "nodes": status}

