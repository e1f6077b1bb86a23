"""results/robust_byzantine.md from results/robust_byzantine.json (made by results/robust_byzantine.py)."""

import json
from pathlib import Path

HERE = Path(__file__).parent
cells = json.loads((HERE / "robust_byzantine.json").read_text())
RULES = ("mean", "clipped", "screened", "median", "trimmed", "geomedian")
ATTACKS = ("none", "extreme", "scale", "permute", "noise", "dissensus")
GRAPHS = {"complete": "complete graph of 5", "ring+chord": "ring of 6 with one chord (results/robust/ring6-chord.txt)",
          "tree": "random tree of 10", "regular:4": "random 4-regular graph of 10"}


def cell(algorithm, graph, attack, rule):
    return cells.get(f"{algorithm}/{graph}/{attack}/{rule}")


lines = ["# Robust aggregation under attack: honest peers' test accuracy", "",
         "Produced by `python results/robust_byzantine.py --algorithm paper` and `python results/robust_byzantine.py "
         "--rules mean,clipped` (the default, accelerated algorithm), then `python results/robust_byzantine_table.py`. "
         "Each cell is one `crc simulate --data penbased --nodes N --topology T --repeats 3 --aggregate RULE "
         "[--algorithm paper] [--byzantine 1 --attack A]` (naive Bayes, 50 instances per peer, 64 rounds): the mean "
         "test accuracy of the honest peers over 3 repeats (graph and Byzantine peer drawn per repeat, seeded). "
         "`none` is the clean run. The robust rules (screened, median, trimmed, geomedian) run the paper's averaging: "
         "exact diffusion's correction assumes the linear mean and integrates a neighbour's persistent bias "
         "(`--aggregate robust` therefore picks `--algorithm paper` unless an algorithm is named).", "",
         "Breakdown per peer: a peer of degree d keeps an honest majority in its closed neighbourhood of d + 1 with at "
         "most floor(d / 2) Byzantine neighbours. The column *beyond* counts the honest peers of the 3 repeats with "
         "more Byzantine neighbours than their degree allows (only there may the median and the geometric median "
         "break down).", ""]
for graph, title in GRAPHS.items():
    lines += [f"## {title}", ""]
    clean_acc = [cell("accelerated", graph, "none", r) for r in ("mean", "clipped")]
    if all(clean_acc):
        lines += [f"Default algorithm (accelerated), clean: mean {clean_acc[0]['honest_accuracy']:.4f}, clipped "
                  f"{clean_acc[1]['honest_accuracy']:.4f}; under attack with the mean / clipped: " + "; ".join(
                      f"{a} {cell('accelerated', graph, a, 'mean')['honest_accuracy']:.4f} / "
                      f"{cell('accelerated', graph, a, 'clipped')['honest_accuracy']:.4f}"
                      for a in ATTACKS[1:] if cell("accelerated", graph, a, "mean") and cell("accelerated", graph, a, "clipped")) + ".", ""]
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
(HERE / "robust_byzantine.md").write_text("\n".join(lines))
