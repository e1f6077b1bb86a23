"""results/robust/byzantine.md from results/robust/byzantine.json (made by results/robust/byzantine.py)."""

import json
from pathlib import Path

HERE = Path(__file__).parent
cells = json.loads((HERE / "byzantine.json").read_text())
RULES = ("mean", "clipped", "screened", "median", "trimmed", "geomedian")
ATTACKS = ("none", "extreme", "scale", "permute", "noise", "dissensus")
GRAPHS = {"complete": "complete graph of 5", "ring+chord": "ring of 6 with one chord (results/robust/ring6-chord.txt)",
          "tree": "random tree of 10", "regular:4": "random 4-regular graph of 10"}


def cell(algorithm, graph, attack, rule):
    return cells.get(f"{algorithm}/{graph}/{attack}/{rule}")


lines = ["# Robust aggregation under attack: honest peers' test accuracy", "",
         "Produced by `python results/robust/byzantine.py --algorithm paper` and `python results/robust/byzantine.py "
         "--rules mean,clipped` (the default, accelerated algorithm) and the other runs of `results/robust/byzantine.sh`, "
         "then `python results/robust/byzantine_table.py`. "
         "Each cell is one `crc simulate --data penbased --nodes N --topology T --repeats 3 --aggregate RULE "
         "[--algorithm paper] [--byzantine 1 --attack A]` (naive Bayes, 50 instances per peer, 64 rounds): the mean "
         "test accuracy of the honest peers over 3 repeats (graph and Byzantine peer drawn per repeat, seeded). "
         "`none` is the clean run. The robust rules (screened, median, trimmed, geomedian) run the paper's averaging: "
         "exact diffusion's correction assumes the linear mean and integrates a neighbour's persistent bias "
         "(`--aggregate robust` therefore picks `--algorithm paper` unless an algorithm is named).", "",
         "Breakdown per peer: a peer of degree d keeps an honest majority in its closed neighbourhood of d + 1 with at "
         "most floor(d / 2) Byzantine neighbours. The column *beyond* counts the honest peers of the 3 repeats with "
         "more Byzantine neighbours than their degree allows (only there may the median and the geometric median "
         "break down).", "",
         "**Choice: `--aggregate robust` is the geometric median with the paper's averaging.** It is the one rule that "
         "stays within 1.3 points of its own clean run under extreme, scale, permute and noise on the complete graph, "
         "the ring with a chord and regular:4. `screened` costs nothing without attack and is best against gross "
         "outliers, but a permuted neighbour is not far enough to be left out on the ring (-5.8); the coordinate-wise "
         "median and trimmed mean stay within the honest range but mix coordinates of different peers, which "
         "`extreme` exploits (-22 on the ring). Under the accelerated algorithm the geometric median fails "
         "(exact diffusion integrates the Byzantine bias: 0.34 under extreme on the complete graph). The default "
         "stays `mean`: the paper's rule, the only one secure aggregation can compute, and 0.4 to 2.4 points better "
         "without attack.", ""]
for graph, title in GRAPHS.items():
    lines += [f"## {title}", ""]
    accelerated = [r for r in RULES if cell("accelerated", graph, "none", r)]
    if accelerated:
        lines += ["| attack (default: accelerated) | " + " | ".join(accelerated) + " |", "|---" * (len(accelerated) + 1) + "|"]
        for attack in ATTACKS:
            row = [cell("accelerated", graph, attack, r) for r in accelerated]
            if any(row):
                lines.append(f"| {attack} | " + " | ".join(f"{c['honest_accuracy']:.4f}" if c else "–" for c in row) + " |")
        lines.append("")
    lines += ["| attack (paper's averaging) | " + " | ".join(RULES) + " | tolerated per peer floor(d/2) | beyond |",
              "|---" * (len(RULES) + 3) + "|"]
    for attack in ATTACKS:
        row = [cell("paper", graph, attack, rule) for rule in RULES]
        if not any(row):
            continue
        values = " | ".join(f"{c['honest_accuracy']:.4f}" if c else "–" for c in row)
        some = next(c for c in row if c)
        if "breakdown" in some:
            b = some["breakdown"]
            tolerated = ", ".join(map(str, b["tolerated"])) + f" (degrees {', '.join(map(str, b['degrees']))})"
            beyond = f"{b['beyond']} of {b['honest_peers']}"
        else:
            tolerated = beyond = ""
        lines.append(f"| {attack} | {values} | {tolerated} | {beyond} |")
    lines.append("")
lines += ["## Issue 29's targets: `--aggregate robust` (the geometric median, paper's averaging), one Byzantine neighbour", "",
          "Honest accuracy, and its difference in points from three clean runs: the same rule without attack (the "
          "issue's own comparison), the mean with the paper's averaging, and the default configuration (mean, "
          "accelerated). Target: within 2 points on the complete graph, within 5 on the ring with a chord and on "
          "regular:4.", "",
          "| graph | attack | accuracy | vs geomedian clean | vs mean clean (paper) | vs default clean (accelerated) |",
          "|---|---|---|---|---|---|"]
for graph in ("complete", "ring+chord", "regular:4"):
    clean = {name: cell(alg, graph, "none", rule) for name, alg, rule in (("own", "paper", "geomedian"),
                                                                          ("paper", "paper", "mean"),
                                                                          ("default", "accelerated", "mean"))}
    for attack in ("extreme", "scale", "permute"):
        c = cell("paper", graph, attack, "geomedian")
        if not c or not all(clean.values()):
            continue
        deltas = " | ".join(f"{100 * (c['honest_accuracy'] - clean[k]['honest_accuracy']):+.1f}" for k in ("own", "paper", "default"))
        lines.append(f"| {graph} | {attack} | {c['honest_accuracy']:.4f} | {deltas} |")
lines.append("")
launch = {path.stem: json.loads(path.read_text()) for path in sorted((HERE / "launch").glob("*.json"))}
if launch:
    lines += ["## Real peers", "",
              "`crc launch --data penbased --nodes 5 --topology complete --rounds 64 --aggregate robust "
              "[--byzantine 1 --attack A]` (5 `crc node` processes on 127.0.0.1, seed 0, one repeat; the Byzantine peer "
              "is the one the simulator picks, node 0). Honest peers' test accuracy.", "",
              "| run | algorithm | aggregate | honest accuracy |", "|---|---|---|---|"]
    for name, r in launch.items():
        block = r.get("honest", r["crc"])
        lines.append(f"| {name.removeprefix('complete5-')} | {r['config']['algorithm']} | {r['config']['aggregate']} | "
                     f"{1 - block['test_error']:.4f} |")
    lines.append("")
(HERE / "byzantine.md").write_text("\n".join(lines))
