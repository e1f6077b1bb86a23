"""What each privacy lever buys at the paper's local size: magic, naive Bayes, 50 peers x 50 instances, δ = 1e-5,
1,000 test instances, 3 repeats, the paper's algorithm with one local step. Levers: the classifier (the peer's
own noisy statistics, or its last aggregate), distributed noise through secure aggregation (``--dp-noise
distributed``), the graph (the paper's random tree, or complete) and fewer rounds (16 instead of 64, also with
momentum 0.7, the acceleration privacy allows). Writes
levers.json next to this file, one entry per finished cell (rerun to resume), and levers.md:

    python results/privacy/levers.py
"""

import json
import math
from pathlib import Path

from crc.experiments.runner import DirectoryCache
from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
EPSILONS = (None, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
SETTING = {"data": "magic", "model": "nb", "nodes": 50, "local_size": 50, "test_size": 1000, "repeats": 3,
           "algorithm": "paper", "rc_iterations": 64, "rc_converged": False, "dp_delta": 1e-5}
LEVERS = {
    "today": {"topology": "tree", "rounds": 64},
    "distributed, complete": {"topology": "complete", "rounds": 64, "classifier": "aggregate", "dp_noise": "distributed"},
    "distributed, tree": {"topology": "tree", "rounds": 64, "classifier": "aggregate", "dp_noise": "distributed"},
    "aggregate classifier": {"topology": "tree", "rounds": 64, "classifier": "aggregate"},
    "local, complete": {"topology": "complete", "rounds": 64, "classifier": "aggregate"},
    "distributed, complete, 16 rounds": {"topology": "complete", "rounds": 16, "classifier": "aggregate",
                                         "dp_noise": "distributed"},
    "local, complete, 16 rounds": {"topology": "complete", "rounds": 16, "classifier": "aggregate"},
    "momentum, 16 rounds": {"topology": "tree", "rounds": 16, "classifier": "aggregate", "momentum": 0.7},
}
WITHIN = 0.05
"""A private run is affordable when its test error is within this of the same lever's non-private run."""


def key(lever: str, epsilon: float | None) -> str:
    return f"{lever}/{'inf' if epsilon is None else f'{epsilon:g}'}"


def run(done: dict, out: Path) -> None:
    cache = DirectoryCache(HERE / ".cache")
    for lever, settings in LEVERS.items():
        for epsilon in EPSILONS:
            if key(lever, epsilon) in done:
                continue
            private = epsilon is not None
            config = SimulationConfig.from_settings(
                **SETTING, **{k: v for k, v in settings.items() if private or k != "dp_noise"}, dp_epsilon=epsilon,
                secure_aggregation=settings.get("dp_noise") == "distributed")
            result = simulate(config, network_factory(config.topology, math.inf), cache=cache)
            result.pop("repeats")
            done[key(lever, epsilon)] = result
            out.write_text(json.dumps(done, indent=1))
            print(key(lever, epsilon), round(result["crc"]["test_error"], 4), flush=True)


def smallest(done: dict, lever: str, reference: dict | None) -> str:
    """The smallest ε of the grid whose error is within WITHIN of ``reference``'s, from which on every larger ε is."""
    if reference is None:
        return "–"
    found = None
    for epsilon in reversed(EPSILONS[1:]):
        result = done.get(key(lever, epsilon))
        if result is None or result["crc"]["test_error"] > reference["crc"]["test_error"] + WITHIN:
            break
        found = epsilon
    return "–" if found is None else f"{found:g}"


def table(done: dict) -> str:
    lines = ["| lever | " + " | ".join("∞" if e is None else f"ε = {e:g}" for e in EPSILONS)
             + " | ε within 0.05 of its own ∞ | of today's ∞ |", "|---" * (len(EPSILONS) + 3) + "|"]
    for lever in LEVERS:
        cells = [f"{done[key(lever, e)]['crc']['test_error']:.3f}" if key(lever, e) in done else "–" for e in EPSILONS]
        lines.append(f"| {lever} | " + " | ".join(cells) + f" | {smallest(done, lever, done.get(key(lever, None)))} | "
                     f"{smallest(done, lever, done.get(key('today', None)))} |")
    return "\n".join(lines)


def main() -> None:
    out = HERE / "levers.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    run(done, out)
    (HERE / "levers.md").write_text(
        "# Privacy levers on magic, 50 peers x 50 instances\n\nCRC's test error (mean of 3 repeats; naive Bayes, the "
        "paper's algorithm, δ = 1e-5, 1,000 test instances) by ε, and the smallest ε of the grid from which on the error "
        f"stays within {WITHIN} of the same lever's non-private run, and of today's (the paper's algorithm on the tree, "
        "64 rounds). Written by `python results/privacy/levers.py`.\n\n"
        + table(done) + "\n")


if __name__ == "__main__":
    main()
