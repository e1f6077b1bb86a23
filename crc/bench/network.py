"""Real peers over emulated wide-area links (``crc bench --only network``): a relay (``crc.bench.relay``) on every
directed edge, 50 ms +- 20 ms each way, and four faults, each against its bound.

Every peer's outbox to a neighbour connects to the relay's link for that directed edge (``crc node --via``); the
neighbour keeps its name on the wire, so the peers run unchanged. Scenarios, each a fresh network of the same
deployment (same split, graph, keys' layout, ESS), one after another:

* ``wan``: no fault, the reference of the others' wall time and final test gap;
* ``partition``: once a peer has completed ``FAULT_ROUND``, every link between two halves of the graph (the first
  half of a breadth-first order from peer 0, and the rest) is a blackhole for ``partition_s`` seconds, then heals;
* ``restart``: the peer with the most neighbours is killed (SIGKILL) once it has checkpointed ``FAULT_ROUND``, and
  restarted from its checkpoint ``restart_after_s`` later;
* ``late``: the same peer starts only once another peer has completed ``late_rounds`` rounds.

The peers share one start time (``--start-at``). Wall time runs from it to the last peer's exit. Bounds, with T the
round timeout, K ``--down-after``, F the first round's timeout and W the ``wan`` run's wall time, and a 2 s slack
for start-up and scheduling (the issue's allowance):

* ``wan``: the loopback run's wall time + R (L + J) + 2 s: each round waits at most one link's delay (latency L plus
  jitter J) more than on loopback, as a round needs only the neighbours' statistics of the round before;
* ``partition``: W + (K + 1) T + 2 s: a peer beside the cut waits K timeouts before it marks its neighbours across
  down (its own half waits with it, at the same time), and after the heal at most one more round waits a timeout
  for statistics lost with a reset connection; the halves go on on their own meanwhile;
* ``restart``: W + K T + 2 s: the victim's neighbours wait K timeouts before they mark it down; restarted, it skips
  ahead to their round;
* ``late``: W + F + (K - 1) T + 2 s: the first round waits F for the absent peer, the next K - 1 rounds a timeout
  each before it is marked down; started late, it skips ahead to its neighbours' round.

Messages lost and rounds marked down are read from the peers' model files (``missing``, ``down_rounds``: per
neighbour, counted by the receiver) and split between the links the fault touches (the cut, or the victim's edges:
losses there are the fault's) and all the others (between live, connected peers: any loss there is a defect).
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

from crc.bench import NETWORK_ROUNDS as NETWORK_ROUNDS  # still named here (results/network's scripts)
from crc.bench import SCENARIOS
from crc.bench.relay import Relay
from crc.core.model_file import load_model
from crc.nodes.checkpoint import completed_round
from crc.nodes.deployment import write_deployment
from crc.nodes.keys import write_peer_keys
from crc.nodes.launcher import PeerProcesses, evaluate_peers, free_ports, node_command, start_time, sums_per_round
from crc.nodes.settings import PeerSettings
from crc.protocol import SimulationConfig
from crc.protocol.repeat import ess_for, load_for, prepare_repeat
from crc.protocol.simulator import byzantine_for
from crc.topologies import Schedule

LATENCY_S, JITTER_S = 0.05, 0.02
TIMEOUT_S = 1.0
FIRST_ROUND_TIMEOUT_S = 2.0
FAULT_ROUND = 5
SLACK_S = 2.0
POLL_S = 0.05


def halves(graph) -> tuple[list[int], list[int]]:
    """Two halves of the graph's peers: the first half of a breadth-first order from peer 0 (connected), the rest."""
    order, seen = [0], {0}
    for node in order:
        for other in sorted(graph.neighbors(node)):
            if other not in seen:
                seen.add(other)
                order.append(other)
    order += [v for v in sorted(graph) if v not in seen]
    first = sorted(order[: len(order) // 2])
    return first, sorted(set(graph) - set(first))


def hub(graph) -> int:
    """The peer with the most neighbours (the lowest index among equals)."""
    return max(graph, key=lambda v: (graph.degree(v), -v))


class Network:
    """One run of real peers in ``workdir``, each directed edge through a relay link (none with ``loopback``); the
    peers wait ``timeout`` seconds a round, ``first_round_timeout`` the first (``results/network/chaos.py`` runs
    private and securely aggregating peers through it)."""

    def __init__(self, workdir: Path, config: SimulationConfig, *, loopback: bool, seed: int, timeout: float = TIMEOUT_S,
                 first_round_timeout: float = FIRST_ROUND_TIMEOUT_S):
        self.workdir, self.config = workdir, config
        self.timeout, self.first_round_timeout = timeout, first_round_timeout
        self.dataset = load_for(config)
        self.rep = prepare_repeat(self.dataset, config, 0)
        write_deployment(self.dataset, self.rep.split, workdir)
        self.graph = Schedule(config.topology, config.nodes, seed=self.rep.graph_seed).graph(1)
        edges = [(i, j) for i in range(config.nodes) for j in sorted(self.graph.neighbors(i))]
        # The links' ports are chosen with the peers': a port the system gave a link could be a peer's otherwise.
        ports = free_ports(config.nodes + (0 if loopback else len(edges)))
        self.ports, link_ports = ports[:config.nodes], dict(zip(edges, ports[config.nodes:]))
        self.addresses = [f"tcp://127.0.0.1:{port}" for port in self.ports]
        self.neighbours = [sorted(self.graph.neighbors(i)) for i in range(config.nodes)]
        self.ess = ess_for(config)
        write_peer_keys(workdir, self.addresses, self.neighbours, force=True)
        self.relay = self.peers = None
        self.links = {}
        self.processes = {}
        self.start_at = None
        try:
            if not loopback:
                self.relay = Relay(seed=seed)
                for i, j in edges:
                    self.links[i, j] = self.relay.add(self.ports[j], port=link_ports[i, j], name=f"{i}->{j}",
                                                      latency_s=LATENCY_S, jitter_s=JITTER_S)
            self.peers = PeerProcesses(ready_timeout=60.0)
            self.peers.wait_ready()
        except BaseException:
            self.close()
            raise

    def command(self, index: int) -> list[str]:
        command = node_command(index, self.addresses, self.neighbours[index], self.config, workdir=self.workdir, ess=self.ess,
                               timeout=self.timeout, first_round_timeout=self.first_round_timeout, log_level="info",
                               start_at=self.start_at, sums_per_round=sums_per_round(self.graph))
        if self.links:
            command += ["--via", ",".join(f"{self.addresses[j]}={self.links[index, j].address}" for j in self.neighbours[index])]
        return command

    def start(self, index: int) -> None:
        with open(self.workdir / f"node-{index}.log", "ab") as log:
            self.processes[index] = self.peers.start(self.command(index), log)

    def round_of(self, index: int) -> int:
        return completed_round(self.workdir / f"checkpoint-{index}") or 0

    def wait_until(self, done, deadline: float, what: str) -> None:
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within the run's deadline")
            self.peers.pause(POLL_S)

    def close(self) -> None:
        try:
            if self.peers is not None:
                self.peers.close()
        finally:
            if self.relay is not None:
                self.relay.close()


def run_scenario(name: str, config: SimulationConfig, workdir: Path, *, partition_s: float, restart_after_s: float,
                 late_rounds: int, seed: int = 0) -> dict:
    """Run scenario ``name`` (``SCENARIOS``) of ``config`` in ``workdir``; its figures (before the bound)."""
    net = Network(workdir, config, loopback=name == "loopback", seed=seed)
    nodes = config.nodes
    victim = hub(net.graph)
    first, second = halves(net.graph)
    cut = [(i, j) for (i, j) in net.links if (i in first) != (j in first)]
    touched = (set(cut) if name == "partition" else
               {(i, j) for i in range(nodes) for j in net.neighbours[i] if victim in (i, j)} if name in ("restart", "late")
               else set())
    events = {"load_average_at_start": round(os.getloadavg()[0], 2)}
    deadline = time.monotonic() + 2 * FIRST_ROUND_TIMEOUT_S + config.rounds * TIMEOUT_S * 3 + partition_s + 60
    try:
        net.start_at = start_time(nodes)
        for index in range(nodes):
            if not (name == "late" and index == victim):
                net.start(index)
        others = [i for i in range(nodes) if i != victim]
        if name == "partition":
            net.wait_until(lambda: max(net.round_of(i) for i in range(nodes)) >= FAULT_ROUND, deadline, "the partition's round")
            events["partition_from_s"] = time.time() - net.start_at
            for edge in cut:
                net.links[edge].blackhole(True)
            heal = time.monotonic() + partition_s
            net.wait_until(lambda: time.monotonic() >= heal or all(p.exited for p in net.processes.values()), deadline, "the heal")
            for edge in cut:
                net.links[edge].blackhole(False)
            events["healed_at_s"] = time.time() - net.start_at
            events["rounds_at_heal"] = [net.round_of(i) for i in range(nodes)]
        elif name == "restart":
            net.wait_until(lambda: net.round_of(victim) >= FAULT_ROUND, deadline, "the victim's round")
            net.processes[victim].send_signal(signal.SIGKILL)
            net.wait_until(lambda: net.processes[victim].exited, deadline, "the victim's death")
            events["killed_at_round"] = net.round_of(victim)
            events["killed_at_s"] = time.time() - net.start_at
            back = time.monotonic() + restart_after_s
            net.wait_until(lambda: time.monotonic() >= back, deadline, "the restart")
            net.start(victim)
            events["restarted_at_s"] = time.time() - net.start_at
        elif name == "late":
            net.wait_until(lambda: max(net.round_of(i) for i in others) >= late_rounds, deadline, "the late start")
            net.start(victim)
            events["started_at_s"] = time.time() - net.start_at
            events["others_round_then"] = max(net.round_of(i) for i in others)
        net.wait_until(lambda: all(p.exited for p in net.processes.values()) and len(net.processes) == nodes, deadline,
                       "the peers' exits")
        wall = time.time() - net.start_at
        events["load_average_at_end"] = round(os.getloadavg()[0], 2)
    finally:
        net.close()
    processes = [net.processes[i] for i in range(nodes)]
    results = evaluate_peers(net.dataset, config, net.rep, processes, workdir, ess=net.ess, wall=wall, addresses=net.addresses,
                        timeout=TIMEOUT_S, byzantine=byzantine_for(net.rep, config)[0], graph=net.graph)
    lost = {"touched": 0, "others": 0}
    down = {"touched": 0, "others": 0}
    index = {address: i for i, address in enumerate(net.addresses)}
    by_peer: list[float | None] = [None] * nodes
    for i in range(nodes):
        path = workdir / f"model-{i}.json"
        if not path.exists():
            continue
        model = load_model(path)
        by_peer[i] = round(float(net.rep.evaluate(model.stats[None])[1][0]), 4)
        metrics = model.metrics
        for key, into in (("missing", lost), ("down_rounds", down)):
            for address, count in metrics.get(key, {}).items():
                into["touched" if (index[address], i) in touched else "others"] += count
    figures = {
        "wall_s": round(wall, 2), "finished": results["network"]["finished"], "exit_codes": [p.returncode for p in processes],
        "test_error": results["crc"]["test_error"], "test_gap": results["test_gap"], "test_error_by_peer": by_peer,
        "worst_peer": max((i for i in range(nodes) if by_peer[i] is not None), key=lambda i: by_peer[i], default=None),
        "lost_between_live": lost["others"], "lost_on_faulted_links": lost["touched"],
        "rounds_down_between_live": down["others"], "rounds_down_on_faulted_links": down["touched"],
        "round_ms_p50": round(results["network"]["round_ms_p50"], 1), "messages": results["network"]["messages"],
        **events,
    }
    if name == "partition":
        figures.update(halves=[first, second], cut_edges=len(cut) // 2, partition_s=partition_s)
    if name in ("restart", "late"):
        figures.update(peer=victim, degree=net.graph.degree(victim))
    failed = [i for i, p in enumerate(processes) if p.returncode != 0]
    if failed:  # the workdir goes with the scenario: keep the end of what the failed peers said
        figures["failed_logs"] = {i: (workdir / f"node-{i}.log").read_text(errors="replace").splitlines()[-5:] for i in failed}
    if net.relay is not None:
        figures["relay_dropped_bytes"] = sum(link.counts.dropped_bytes for link in net.links.values())
        figures["relay_resets"] = sum(link.counts.resets for link in net.links.values())
    return figures


def network_run(config: SimulationConfig, *, partition_s: float = 30.0, restart_after_s: float = 3.0, late_rounds: int = 20,
                scenarios=SCENARIOS) -> dict:
    """Every scenario of ``scenarios`` (``loopback`` and ``wan`` always run: the bounds need them), one at a time;
    each with its figures, its bound in seconds and how it is made, and whether it holds."""
    K, T, F, R = PeerSettings.down_after, TIMEOUT_S, FIRST_ROUND_TIMEOUT_S, config.rounds
    report = {"data": config.data, "model": config.model, "algorithm": config.algorithm, "nodes": config.nodes, "topology": config.topology,
              "local_size": config.local_size, "rounds": R, "iters": config.iters, "timeout_s": T, "first_round_timeout_s": F,
              "down_after": K, "latency_ms": LATENCY_S * 1000, "jitter_ms": JITTER_S * 1000, "slack_s": SLACK_S, "scenarios": {}}
    wanted = [name for name in SCENARIOS if name in {"loopback", "wan", *scenarios}]
    for name in wanted:
        with tempfile.TemporaryDirectory(prefix=f"crc-network-{name}-") as workdir:
            report["scenarios"][name] = run_scenario(name, config, Path(workdir), partition_s=partition_s,
                                                     restart_after_s=restart_after_s, late_rounds=late_rounds)
    runs = report["scenarios"]
    loop_wall, wan_wall, wan_gap = runs["loopback"]["wall_s"], runs["wan"]["wall_s"], runs["wan"]["test_gap"]
    bounds = {
        "loopback": (None, "reference of the wan bound"),
        "wan": (loop_wall + R * (LATENCY_S + JITTER_S) + SLACK_S, f"loopback {loop_wall:.1f} s + R (L + J) + 2 s"),
        "partition": (wan_wall + (K + 1) * T + SLACK_S, f"wan {wan_wall:.1f} s + (K + 1) T + 2 s"),
        "restart": (wan_wall + K * T + SLACK_S, f"wan {wan_wall:.1f} s + K T + 2 s"),
        "late": (wan_wall + F + (K - 1) * T + SLACK_S, f"wan {wan_wall:.1f} s + F + (K - 1) T + 2 s"),
    }
    for name, figures in runs.items():
        bound, how = bounds[name]
        figures["bound_s"] = None if bound is None else round(bound, 2)
        figures["bound"] = how
        figures["within_bound"] = None if bound is None else figures["wall_s"] <= bound
        figures["gap_vs_wan"] = round(figures["test_gap"] - wan_gap, 4)
        figures["gap_within_0.01"] = abs(figures["test_gap"] - wan_gap) <= 0.01
        figures["all_finished"] = figures["finished"] == config.nodes
    return report


def markdown(report: dict, command: str, source: str) -> str:
    """The report as a Markdown table, with the command that made it and the JSON file it was read from."""
    lines = [f"Made by `{command}` (JSON: `{source}`).\n",
             f"{report['nodes']} peers, `{report['topology']}`, {report['data']} ({report['model']}, algorithm "
             f"`{report.get('algorithm', 'accelerated')}`), {report['local_size']} "
             f"instances each, {report['rounds']} rounds, timeout T = {report['timeout_s']:g} s, first round F = "
             f"{report['first_round_timeout_s']:g} s, K = {report['down_after']} (`--down-after`); every directed edge through "
             f"a relay link of {report['latency_ms']:g} ms +- {report['jitter_ms']:g} ms each way (loopback: none).\n",
             "| scenario | wall s | bound s | bound | within | finished | lost between live | lost on faulted links "
             "| rounds down between live | rounds down on faulted links | test gap | gap - wan's | worst peer's test error "
             "| load average at start / end |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, f in report["scenarios"].items():
        bound = "-" if f["bound_s"] is None else f"{f['bound_s']:.1f}"
        within = "-" if f["within_bound"] is None else ("yes" if f["within_bound"] else "**no**")
        lines.append(f"| {name} | {f['wall_s']:.1f} | {bound} | {f['bound']} | {within} | {f['finished']}/{report['nodes']} "
                     f"| {f['lost_between_live']} | {f['lost_on_faulted_links']} | {f['rounds_down_between_live']} "
                     f"| {f['rounds_down_on_faulted_links']} | {f['test_gap']:+.4f} | {f['gap_vs_wan']:+.4f} "
                     f"| {f['test_error_by_peer'][f['worst_peer']]:.4f} (peer {f['worst_peer']}) "
                     f"| {f.get('load_average_at_start', '-')} / {f.get('load_average_at_end', '-')} |")
    return "\n".join(lines) + "\n"


