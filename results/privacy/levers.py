"""What each privacy lever buys at the paper's local size: magic, naive Bayes, 50 peers x 50 instances, δ = 1e-5,
1,000 test instances, 3 repeats, the paper's algorithm with one local step. Levers: the classifier (the peer's
own noisy statistics, or its last aggregate), distributed noise through secure aggregation (``--dp-noise
distributed``), the graph (the paper's random tree, or complete) and fewer rounds (16 instead of 64, also with
momentum 0.7, the acceleration privacy allows), and fewer releases in the same 64 rounds on the tree
(``--release-every k``: the local step and its noisy release every k-th round, averaging only between). Writes
levers.json next to this file, one entry per finished cell (rerun to resume), and levers.md:

    python results/privacy/levers.py
"""

import json
import math
from pathlib import Path

from crc.experiments.cells import DirectoryCache
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
    "release every 2": {"topology": "tree", "rounds": 64, "classifier": "aggregate", "release_every": 2},
    "release every 4": {"topology": "tree", "rounds": 64, "classifier": "aggregate", "release_every": 4},
    "release every 8": {"topology": "tree", "rounds": 64, "classifier": "aggregate", "release_every": 8},
    "release every 4, momentum": {"topology": "tree", "rounds": 64, "classifier": "aggregate", "momentum": 0.7,
                                  "release_every": 4},
    "release every 8, momentum": {"topology": "tree", "rounds": 64, "classifier": "aggregate", "momentum": 0.7,
                                  "release_every": 8},
}
AVERAGED = 16
"""The tree levers are also listed with their classifier averaged over their last AVERAGED rounds (``averaging.py``)."""
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


def fill(out: Path, rows, epsilons, key, cell) -> dict:
    """The finished cells stored in ``out`` (JSON) and every missing one of the grid ``rows`` × ``epsilons``: cell
    ``key(row, ε)`` is ``cell(row, ε)``, computed, stored after each and printed."""
    done = json.loads(out.read_text()) if out.exists() else {}
    for row in rows:
        for epsilon in epsilons:
            name = key(row, epsilon)
            if name not in done:
                done[name] = cell(row, epsilon)
                out.write_text(json.dumps(done, indent=1))
                print(name, done[name], flush=True)
    return done


def grid_lines(leading: list[str], epsilons, trailing: list[str], rows) -> str:
    """A Markdown table: the ``leading`` columns, one per ε of ``epsilons`` (∞ for None) and the ``trailing`` ones,
    then one line per (leading cells, errors by ε (None: not run), trailing cells) of ``rows``."""
    header = [*leading, *("∞" if e is None else f"ε = {e:g}" for e in epsilons), *trailing]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for first, errors, last in rows:
        lines.append("| " + " | ".join([*first, *("–" if e is None else f"{e:.3f}" for e in errors), *last]) + " |")
    return "\n".join(lines)


def first_within(errors: list[float | None], reference: float, epsilons: tuple = EPSILONS[1:]) -> str:
    """The smallest ε of the grid whose error (``errors``, one per private ε of ``epsilons``, None: not run) is within
    WITHIN of ``reference``, from which on every larger ε's is."""
    found = None
    for epsilon, error in reversed(list(zip(epsilons, errors))):
        if error is None or error > reference + WITHIN:
            break
        found = epsilon
    return "–" if found is None else f"{found:g}"


def smallest(done: dict, lever: str, reference: dict | None) -> str:
    """``first_within`` for ``lever``'s runs and ``reference``'s error."""
    if reference is None:
        return "–"
    errors = [done[key(lever, e)]["crc"]["test_error"] if key(lever, e) in done else None for e in EPSILONS[1:]]
    return first_within(errors, reference["crc"]["test_error"])


def averaged() -> dict:
    """Rows of ``done``'s form for the tree levers of averaging.json (``averaging.py``) with their classifier averaged
    over the last AVERAGED rounds, named "<lever>, last K averaged"; none before averaging.py has run."""
    path = HERE / "averaging.json"
    cells = json.loads(path.read_text()) if path.exists() else {}
    return {f"{lever}, last {AVERAGED} averaged/{epsilon}": {"crc": {"test_error": errors[str(AVERAGED)]}}
            for name, errors in cells.items() for lever, epsilon in [name.rsplit("/", 1)]}


def table(done: dict) -> str:
    rows = averaged()
    done = {**done, **rows}
    lines = ["| lever | " + " | ".join("∞" if e is None else f"ε = {e:g}" for e in EPSILONS)
             + " | ε within 0.05 of its own ∞ | of today's ∞ |", "|---" * (len(EPSILONS) + 3) + "|"]
    for lever in [*LEVERS, *dict.fromkeys(name.rsplit("/", 1)[0] for name in rows)]:
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
        f"64 rounds); \"release every k\": `--release-every k`, the local step and its noisy release every k-th of the "
        f"64 rounds, averaging public values only between (ceil(64 / k) releases, `releases.py`); \"last {AVERAGED} "
        f"averaged\": the lever's classifier from the average of its classifier statistics "
        "over its last rounds (post-processing, `averaging.py`). Written by `python results/privacy/averaging.py` then "
        "`python results/privacy/levers.py`.\n\n"
        + table(done) + "\n")


if __name__ == "__main__":
    main()
