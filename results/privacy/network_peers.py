"""One network sum a round on real peers: the setting of ``network_sum.py`` (magic, naive Bayes, 50 peers x 50
instances, the paper's random tree, 64 rounds, the paper's algorithm with the classifier from the last aggregate,
δ = 1e-5, 1,000 test instances) run by ``crc launch`` as 50 ``crc node`` processes on 127.0.0.1, each masking with
every other and relaying the sum along the tree, with exact discrete Gaussian shares; without noise and at ε = 4, on
the first repeat of three seeds (``crc launch`` runs one repeat). Beside it, per-neighbourhood distributed noise on the
same tree at ε = 4. Writes network_peers.json next to this file, one entry per finished run (rerun to resume), and
network_peers.md:

    python results/privacy/network_peers.py
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
SEEDS = (0, 1, 2)
RUNS = {"network sum, no noise": ["--sum-over", "network"],
        "network sum, ε = 4": ["--sum-over", "network", "--dp-epsilon", "4", "--dp-noise", "distributed"],
        "per neighbourhood, ε = 4": ["--dp-epsilon", "4", "--dp-noise", "distributed"]}
COMMON = ["--data", "magic", "--nodes", "50", "--local-size", "50", "--rounds", "64", "--test-size", "1000",
          "--algorithm", "paper", "--classifier", "aggregate", "--secure-aggregation"]


def launch(options: list[str], seed: int) -> dict:
    """The figures of one ``crc launch``: test error, wall seconds of the rounds, median round, messages."""
    with tempfile.TemporaryDirectory(prefix="crc-network-peers-") as work:
        out = Path(work) / "results.json"
        command = [sys.executable, "-m", "crc", "launch", *COMMON, *options, "--seed", str(seed), "--workdir", work,
                   "--out", str(out)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        results = json.loads(out.read_text())
    network = results["network"]
    return {"test_error": results["crc"]["test_error"], "rounds_seconds": network["rounds_seconds"],
            "round_ms_p50": network["round_ms_p50"], "messages": network["messages"],
            "unmask_fallbacks": results["secure_aggregation"]["unmask_fallbacks"]}


def main() -> None:
    path = HERE / "network_peers.json"
    done = json.loads(path.read_text()) if path.exists() else {}
    for name, options in RUNS.items():
        for seed in SEEDS:
            key = f"{name}/{seed}"
            if key not in done:
                done[key] = launch(options, seed)
                path.write_text(json.dumps(done, indent=1, sort_keys=True) + "\n")
    lines = ["| run | " + " | ".join(f"seed {s}" for s in SEEDS) + " | mean | rounds (s), median | round p50 (ms), median |",
             "|---|" + "---|" * (len(SEEDS) + 3)]
    for name in RUNS:
        cells = [done[f"{name}/{s}"] for s in SEEDS]
        errors = [c["test_error"] for c in cells]
        seconds = sorted(c["rounds_seconds"] for c in cells)[len(cells) // 2]
        p50 = sorted(c["round_ms_p50"] for c in cells)[len(cells) // 2]
        lines.append(f"| {name} | " + " | ".join(f"{e:.3f}" for e in errors)
                     + f" | {sum(errors) / len(errors):.3f} | {seconds:.1f} | {p50:.0f} |")
    fallbacks = sum(done[f"{name}/{s}"]["unmask_fallbacks"] for name in RUNS if name.startswith("network") for s in SEEDS)
    (HERE / "network_peers.md").write_text(
        "# One network sum a round on real peers: magic, 50 peers x 50 instances\n\n"
        "CRC's test error of 50 `crc node` processes on 127.0.0.1 started by `crc launch` (naive Bayes, the paper's "
        "algorithm, the classifier from the last aggregate, the paper's random tree, 64 rounds, δ = 1e-5, 1,000 test "
        f"instances, exact discrete Gaussian shares), one repeat of each of the seeds {', '.join(map(str, SEEDS))}; the "
        "seconds the slowest peer spent in its rounds; the median round. Rounds of a network sum that released "
        f"nothing: {fallbacks}. Written by `python results/privacy/network_peers.py`.\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
