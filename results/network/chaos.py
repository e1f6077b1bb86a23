"""Chaos runs of private and securely aggregating real peers: one fault scenario of ``crc node`` processes on
127.0.0.1 (the deployment of ``crc.bench.network``: every directed edge through a relay link), its figures as JSON.

    python results/network/chaos.py --privacy sa --topology ring --nodes 4 --scenario kill --workdir DIR --out FILE

Privacy: ``sa`` (``--secure-aggregation``), ``distributed`` (with ``--dp-epsilon E --dp-noise distributed``),
``local`` (``--dp-epsilon E``, local noise); ``plain`` (neither, the reference); ``--dp-dropouts D`` for
distributed noise. Scenarios (the victim: the peer
with the most neighbours):

* ``none``: no fault, the reference of the others' wall time and test gap;
* ``kill``: the victim is killed (SIGKILL) once it has checkpointed ``--fault-round`` and never restarted;
* ``restart``: the victim is killed ``--restarts`` times, each at a different delay after a new checkpoint
  (``RESTART_DELAYS_S``: at once, i.e. before its send, and inside the unmasking that follows), and restarted from
  its checkpoint directory at once;
* ``startup``: a neighbour of the victim starts late; the victim, waiting for it in the first round after its first
  send, is killed ``STARTUP_KILL_S`` after it starts its rounds and restarted from its checkpoint directory at once
  (``noise_key_kept``, ``resumed_at_round_0``), then the late neighbour starts;
* ``partition``: the links between two halves of the graph are a blackhole for ``--partition-s`` seconds;
* ``lossy``: every link 50 ms +- 40 ms each way, and every link reset (its connections' queued bytes lost) every
  ``RESET_EVERY_S``;
* ``late``: the victim starts once another peer has completed ``--fault-round`` rounds.

The releases: the victim's checkpoint is read every poll (``POLL_S``) and its round and a digest of its statistics
noted; a peer sends a round only once its checkpoint holds it, so ``released_twice`` counts the rounds seen in two
checkpoints with different statistics (a round computed and sent again from other inputs);
``victim_rounds_seen`` says how many of its rounds the polls caught. ``growth`` compares the live
peers' resident memory and warning lines between the two halves of the run after the fault.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import time
from pathlib import Path

from crc.bench.network import FAULT_ROUND, LATENCY_S, POLL_S, Network, halves, hub
from crc.core.errors import CRCError
from crc.core.model_file import load_model
from crc.nodes.checkpoint import _read
from crc.nodes.launcher import evaluate_peers, start_time
from crc.protocol import SimulationConfig
from crc.protocol.simulator import byzantine_for

PRIVACY = {"sa": {"secure_aggregation": True},
           "distributed": {"secure_aggregation": True, "dp_noise": "distributed"},
           "local": {},
           "plain": {}}
RESTART_DELAYS_S = (0.0, 0.02, 0.05, 0.1, 0.2)
RESET_EVERY_S = 2.0
STARTUP_KILL_S = 0.5


def config_for(privacy: str, *, topology: str, nodes: int, rounds: int, epsilon: float, local_size: int,
               dropouts: int = 0) -> SimulationConfig:
    """The run's options: the paper's algorithm and the aggregate classifier (what distributed noise needs), twonorm;
    ``dropouts``: distributed noise's ``--dp-dropouts``."""
    extra = dict(PRIVACY[privacy])
    if privacy in ("distributed", "local"):
        extra["dp_epsilon"] = epsilon
    if privacy == "distributed":
        extra["dp_dropouts"] = dropouts
    return SimulationConfig.from_settings(data="twonorm", nodes=nodes, local_size=local_size, rounds=rounds,
                                          topology=topology, test_size=1000, algorithm="paper", classifier="aggregate",
                                          **extra)


def held(directory: Path) -> tuple[int, str] | None:
    """(round, digest of the statistics) of the checkpoint in ``directory``, or None (none, or replaced while read)."""
    try:
        _, found = _read(directory)
    except (CRCError, OSError):
        return None
    if found is None:
        return None
    header, stats = found
    return header["round"], hashlib.sha256(stats.tobytes()).hexdigest()[:16]


def rss_kib(pid: int) -> int | None:
    """Resident memory of process ``pid`` (KiB), or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def warnings(log: Path) -> int:
    """Lines of ``log`` at warning level or above (a peer logs one info line a round by design)."""
    return sum(b" WARNING " in line or b" ERROR " in line for line in log.read_bytes().splitlines())


def run(privacy: str, scenario: str, *, topology: str, nodes: int, rounds: int, epsilon: float, local_size: int,
        timeout: float, first_round_timeout: float, fault_round: int, restarts: int, partition_s: float,
        workdir: Path, dropouts: int = 0) -> dict:
    config = config_for(privacy, topology=topology, nodes=nodes, rounds=rounds, epsilon=epsilon, local_size=local_size,
                        dropouts=dropouts)
    net = Network(workdir, config, loopback=False, seed=0, timeout=timeout, first_round_timeout=first_round_timeout)
    victim = hub(net.graph)
    others = [i for i in range(nodes) if i != victim]
    events: dict = {"victim": victim, "checkpoints_at_kills": [], "restarted_at_round": []}
    samples: list[tuple[float, dict[int, int | None], dict[int, int]]] = []
    deadline = time.monotonic() + 2 * first_round_timeout + rounds * timeout * 3 + partition_s + 120

    ledger: dict[int, set[str]] = {}  # round -> digests of the victim's checkpoints of it seen

    def watch() -> bool:
        """Note the victim's checkpoint (False: the condition of a wait that only watches)."""
        found = held(workdir / f"checkpoint-{victim}")
        if found is not None:
            ledger.setdefault(found[0], set()).add(found[1])
        return False

    def wait(done, what: str) -> None:
        net.wait_until(lambda: watch() or done(), deadline, what)

    def sample() -> None:
        samples.append((time.time() - net.start_at, {i: rss_kib(net.processes[i].pid) for i in others},
                        {i: warnings(workdir / f"node-{i}.log") for i in others}))

    def kill() -> None:
        net.processes[victim].send_signal(signal.SIGKILL)
        wait(lambda: net.processes[victim].exited, "the victim's death")
        events["checkpoints_at_kills"].append(held(workdir / f"checkpoint-{victim}"))

    late = victim if scenario == "late" else min(net.neighbours[victim]) if scenario == "startup" else None
    try:
        net.start_at = start_time(nodes)
        for index in range(nodes):
            if index != late:
                net.start(index)
        if scenario == "lossy":
            for link in net.links.values():
                link.set(latency_s=LATENCY_S, jitter_s=0.04)
        at_fault = lambda: max(net.round_of(i) for i in range(nodes)) >= fault_round
        if scenario == "startup":  # the victim has sent round 0 and waits for the late neighbour
            wait(lambda: b"listening on" in (workdir / f"node-{victim}.log").read_bytes(), "the victim's start")
            time.sleep(STARTUP_KILL_S)
        else:
            wait(at_fault if scenario != "restart" else lambda: net.round_of(victim) >= fault_round, "the fault's round")
        events["fault_at_s"] = round(time.time() - net.start_at, 2)
        if scenario == "startup":
            key = workdir / f"checkpoint-{victim}" / "noise.key"
            before = key.read_bytes() if key.exists() else None
            kill()
            net.start(victim)
            wait(lambda: (workdir / f"node-{victim}.log").read_bytes().count(b"starting at round") >= 2
                 or net.processes[victim].exited, "the restarted victim's start")
            events["noise_key_kept"] = None if before is None else key.read_bytes() == before
            events["resumed_at_round_0"] = b"resumed from checkpoint at round 0" in (workdir / f"node-{victim}.log").read_bytes()
            net.start(late)
        elif scenario == "kill":
            kill()
        elif scenario == "restart":
            for n in range(restarts):
                seen = net.round_of(victim)
                wait(lambda seen=seen: net.round_of(victim) > seen or net.processes[victim].exited,
                     "the victim's next checkpoint")
                time.sleep(RESTART_DELAYS_S[n % len(RESTART_DELAYS_S)])
                if net.processes[victim].exited:
                    break
                kill()
                net.start(victim)
                events["restarted_at_round"].append(net.round_of(victim))
                wait(lambda: net.round_of(victim) > events["restarted_at_round"][-1] + 1 or net.processes[victim].exited,
                     "the restarted victim's progress")
        elif scenario == "partition":
            first, _ = halves(net.graph)
            cut = [edge for edge in net.links if (edge[0] in first) != (edge[1] in first)]
            for edge in cut:
                net.links[edge].blackhole(True)
            wait(lambda: time.time() - net.start_at >= events["fault_at_s"] + partition_s, "the heal")
            for edge in cut:
                net.links[edge].blackhole(False)
            events["cut_edges"] = len(cut) // 2
        elif scenario == "late":
            net.start(late)
        last_reset = time.monotonic()
        while not all(net.processes[i].exited for i in others) or (scenario != "kill" and not net.processes[victim].exited):
            if time.monotonic() > deadline:
                raise TimeoutError("the peers' exits: not within the run's deadline")
            if scenario == "lossy" and time.monotonic() - last_reset >= RESET_EVERY_S:
                events["resets"] = events.get("resets", 0) + sum(link.reset() for link in net.links.values())
                last_reset = time.monotonic()
            if not samples or time.time() - net.start_at - samples[-1][0] >= 1.0:
                sample()
            watch()
            net.peers.pause(POLL_S)
        wall = time.time() - net.start_at
    finally:
        net.close()
    processes = [net.processes[i] for i in range(nodes)]
    results = evaluate_peers(net.dataset, config, net.rep, processes, workdir, ess=net.ess, wall=wall,
                             addresses=net.addresses, timeout=timeout, byzantine=byzantine_for(net.rep, config)[0],
                             graph=net.graph)
    per_peer = {}
    for i in range(nodes):
        path = workdir / f"model-{i}.json"
        if path.exists():
            model = load_model(path)
            m = model.metrics
            per_peer[i] = {"exit": processes[i].returncode, "rounds_done": m.get("rounds_done"),
                           "test_error": round(float(net.rep.evaluate(model.stats[None])[1][0]), 4),
                           "round_ms_max": round(max(m.get("round_ms", [0])), 1),
                           "rounds_over_2T": sum(ms > 2000 * timeout for ms in m.get("round_ms", [])),
                           "rounds_over_T": sum(ms > 1000 * timeout for ms in m.get("round_ms", [])),
                           "unmask_fallbacks": m.get("unmask_fallbacks"), "reveals_refused": m.get("reveals_refused"),
                           "deviations": m.get("deviations"), "rounds_kept": m.get("rounds_kept"),
                           "rounds_skipped": m.get("rounds_skipped"), "missing": sum(m.get("missing", {}).values()),
                           "down_rounds": sum(m.get("down_rounds", {}).values()),
                           "privacy_rounds": (m.get("privacy") or {}).get("rounds")}
        else:
            per_peer[i] = {"exit": processes[i].returncode}
    half = [s for s in samples if s[0] >= events["fault_at_s"]]
    growth = None
    if len(half) >= 4:
        a, b = half[len(half) // 4], half[-1]
        growth = {"seconds": round(b[0] - a[0], 1),
                  "rss_kib": {i: (a[1][i], b[1][i]) for i in others},
                  "warning_lines": {i: (a[2][i], b[2][i]) for i in others}}
    return {"privacy": privacy, "scenario": scenario, "topology": topology, "nodes": nodes, "rounds": rounds,
            "epsilon": epsilon if privacy in ("distributed", "local") else None, "local_size": local_size,
            "dp_dropouts": config.dp_dropouts,
            "partition_s": partition_s if scenario == "partition" else None,
            "timeout_s": timeout, "first_round_timeout_s": first_round_timeout, "wall_s": round(wall, 2),
            "finished": results["network"]["finished"], "test_error": results["crc"]["test_error"],
            "test_gap": results["test_gap"], "secure_aggregation": results.get("secure_aggregation"),
            "victim_rounds_seen": len(ledger), "released_twice": sum(len(d) > 1 for d in ledger.values()),
            "per_peer": per_peer, "growth": growth,
            **events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--privacy", choices=sorted(PRIVACY), required=True)
    parser.add_argument("--scenario", choices=["none", "kill", "restart", "startup", "partition", "lossy", "late"],
                        required=True)
    parser.add_argument("--topology", default="ring")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--epsilon", type=float, default=16.0)
    parser.add_argument("--local-size", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--first-round-timeout", type=float, default=5.0)
    parser.add_argument("--fault-round", type=int, default=FAULT_ROUND)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--partition-s", type=float, default=15.0)
    parser.add_argument("--dp-dropouts", type=int, default=0)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    figures = run(args.privacy, args.scenario, topology=args.topology, nodes=args.nodes, rounds=args.rounds,
                  epsilon=args.epsilon, local_size=args.local_size, timeout=args.timeout,
                  first_round_timeout=args.first_round_timeout, fault_round=args.fault_round, restarts=args.restarts,
                  partition_s=args.partition_s, workdir=args.workdir, dropouts=args.dp_dropouts)
    args.out.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "per_peer"}))


if __name__ == "__main__":
    main()
