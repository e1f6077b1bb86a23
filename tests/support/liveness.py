"""A peer killed with SIGKILL among real peers: the survivors' time against a clean run, and what their model files
say about their neighbours (rounds missing or marked down, frames rejected).

The real-process liveness test uses ``kill_run``; run as a script it prints the figures of a clean run and of a
run with a kill, e.g. from the ``tests`` folder::

    python -m support.liveness --topology chain --rounds 40 --kill-at 5 --timeout 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics
import tempfile
import time
from pathlib import Path

from crc.core.model_file import load_model
from crc.nodes.settings import PeerSettings
from support.network import Network, close_shared_spawner, scenario

START_S = PeerSettings.first_round_timeout_s
"""The first round's window (``--first-round-timeout``, its default): the peers' start-up."""
SLOW_ROUNDS = {"data": "letter", "local_size": 400, "iters": 20}
"""Rounds of some 50-100 ms on these machines, so that a kill lands at the round asked for (checkpoints are polled
every 20 ms)."""


def victim_of(graph) -> int:
    """The peer whose death hurts most: the one with the most neighbours that have other neighbours too."""
    return max(graph, key=lambda v: (sum(graph.degree(u) > 1 for u in graph.neighbors(v)), graph.degree(v), -v))


def kill_run(directory: Path, *, topology: str, nodes: int = 5, rounds: int = 20, kill_at: int | None = 5,
             timeout: float = 1.0, limit_s: float = 120.0, **settings) -> dict:
    """Run ``nodes`` real peers on ``topology`` for ``rounds`` rounds with ``--timeout timeout``, SIGKILL the
    ``victim_of`` the graph once it has checkpointed round ``kill_at`` (None: a clean run), and wait for the others.

    Returns the survivors' ``wall_s`` (from the start of the first peer to the exit of the last), ``rounds_s`` (the
    most any survivor spent in its rounds after the first, whose wait is the peers' start-up: what a kill can cost,
    without the processes' start-up, which varies by seconds on a loaded machine), their exit ``codes``, the
    ``victim`` and its last checkpointed round ``killed_at``, and per survivor its model file's ``metrics`` with its
    neighbours' addresses replaced by their indices."""
    (run,) = kill_runs_together([directory], topology=topology, nodes=nodes, rounds=rounds, kill_at=kill_at,
                                timeout=timeout, limit_s=limit_s, settings=[settings])
    return run


def kill_runs_together(directories: list[Path], *, topology: str, nodes: int, rounds: int, kill_at: int | None,
                       timeout: float = 1.0, limit_s: float = 120.0, settings: list[dict]) -> list[dict]:
    """``kill_run`` for several deployments at once, one in each of ``directories`` with its own ``settings``: every
    network started, then each victim killed at its round, then every survivor awaited (their waits overlap).
    Returns ``kill_run``'s figures for each, in order; ``wall_s`` then counts from the start of the first network."""
    prepared = [(directory, *scenario(directory, nodes=nodes, rounds=rounds, topology=topology, **{**SLOW_ROUNDS, **own})[:2])
                for directory, own in zip(directories, settings, strict=True)]
    with contextlib.ExitStack() as stack:
        nets = [stack.enter_context(Network(directory, graph, config, timeout=timeout, first_round_timeout=START_S))
                for directory, config, graph in prepared]
        started = time.monotonic()
        for net in nets:
            net.start_all()
        victims = [victim_of(graph) for _, _, graph in prepared]
        killed_at = [None] * len(nets)
        if kill_at is not None:
            for i, (net, victim) in enumerate(zip(nets, victims)):
                net.wait_for_round(victim, kill_at, limit=limit_s)
                net.signal(victim, signal.SIGKILL)
                net.processes[victim].wait(timeout=10)
                killed_at[i] = net.checkpoint_round(victim)
        runs = []
        for net, victim, killed, (_, _, graph) in zip(nets, victims, killed_at, prepared):
            survivors = [i for i in range(nodes) if kill_at is None or i != victim]
            codes = net.wait(survivors, limit=limit_s)
            wall = time.monotonic() - started
            index = {address: i for i, address in enumerate(net.addresses)}
            metrics = {}
            for i in survivors:
                found = load_model(net.model_path(i)).metrics
                metrics[i] = {key: ({index[a]: v for a, v in value.items()} if key in ("missing", "down_rounds", "downtime_s")
                                    else value) for key, value in found.items()}
            rounds_s = max(sum(m["round_ms"][1:]) for m in metrics.values()) / 1000
            runs.append({"wall_s": wall, "rounds_s": rounds_s, "codes": codes, "victim": victim, "killed_at": killed,
                         "metrics": metrics, "edges": sorted(graph.edges())})
    return runs


def summary(run: dict) -> dict:
    """What the liveness figures look at: wall time, and between live peers: rounds missing, rounds marked down,
    seconds down, stale or far frames rejected."""
    victim = run["victim"] if run["killed_at"] is not None else None
    live = run["metrics"]
    return {
        "wall_s": round(run["wall_s"], 2), "victim": victim, "killed_at": run["killed_at"], "codes": run["codes"],
        "missing_between_live": sum(n for m in live.values() for u, n in m["missing"].items() if u != victim),
        "down_rounds_between_live": sum(n for m in live.values() for u, n in m["down_rounds"].items() if u != victim),
        "downtime_s_between_live": round(sum(s for m in live.values() for u, s in m["downtime_s"].items() if u != victim), 2),
        "stale_or_ahead": sum(m["rejected"].get("stale", 0) + m["rejected"].get("ahead", 0) for m in live.values()),
        "missing_from_victim": sum(m["missing"].get(victim, 0) for m in live.values()) if victim is not None else 0,
        "round_ms_median": round(statistics.median(ms for m in live.values() for ms in m["round_ms"]), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="chain")
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--kill-at", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args()
    figures = {}
    try:
        for name, kill_at in (("clean", None), ("killed", args.kill_at)):
            with tempfile.TemporaryDirectory(prefix=f"crc-liveness-{name}-") as directory:
                figures[name] = summary(kill_run(Path(directory), topology=args.topology, nodes=args.nodes,
                                                 rounds=args.rounds, kill_at=kill_at, timeout=args.timeout))
    finally:
        close_shared_spawner()
    figures["extra_s"] = round(figures["killed"]["wall_s"] - figures["clean"]["wall_s"], 2)
    print(json.dumps({"topology": args.topology, "nodes": args.nodes, "rounds": args.rounds, "timeout": args.timeout,
                      **figures}, indent=1))


if __name__ == "__main__":
    main()
