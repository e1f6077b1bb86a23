"""Write results/acceleration.md, results/acceleration/summary.csv and .json and the figures in
results/acceleration/plots from
sets.json (measure.py: the paper's algorithm, the accelerated one, the momentum preset, the synthetic sets),
previous.json (the accelerated algorithm before issue 31, uniform start and two local steps: its default and
label-drift entries of sets.json, curves cut to their test errors), sets-loss-arrived.json (the accelerated
algorithm's message-loss entries on the sets with discrete features when a peer averaged only the messages that
arrived, before a lost one was replaced by the last heard: measure.py at commit 8c4ef61) and the experiment tables under paper/ and
accelerated/ (``crc experiment``; momentum/ holds the momentum preset's):

    python results/acceleration/report.py
"""

import csv
import json
from pathlib import Path

import numpy as np

from crc.core.acceleration import ACCELERATED, MODEL_SETTINGS
from crc.tables.datasets import BUNDLED

HERE = Path(__file__).parent
RESULTS = HERE.parent
TARGET = 0.01
AT = 64
HALF = 32
"""Issue 31: the gap within TARGET at round HALF, half the paper's rounds, on most sets."""
TREE_MESSAGES = 2 * 49
"""Messages per round on a random tree of 50 peers: each of the 49 edges carries one message each way."""
TABLES = ("table3", "table4", "table5", "table6", "table7", "table8", "table9", "table10", "table11", "table12")
"""The tables whose accelerated cells were rerun after issue 31; the others' are the previous accelerated algorithm's."""


def fmt(value, digits=3):
    return "–" if value is None else f"{value:+.{digits}f}"


def first_round(entry) -> int | None:
    """First round whose mean (over repeats) test error is within TARGET of the mean RC test error."""
    rc = entry["rc"]["test_error"]
    for row in entry["rounds"]:
        if row["test_error"] - rc <= TARGET:
            return int(row["round"])
    return None


def gap_at(entry, round_=AT) -> float:
    rows = entry["rounds"]
    return rows[round_ - 1]["test_error"] - entry["rc"]["test_error"] if len(rows) >= round_ else entry["test_gap"]


def converged_gap_at(entry, round_=AT) -> float:
    return gap_at(entry, round_) + entry["rc"]["test_error"] - entry["rc_converged"]["test_error"]


def set_rows(sets: dict) -> list[dict]:
    rows = []
    for setting in ("default", "label-tree+80", "loss0.1", "loss0.3", "tree-period1"):
        for data in BUNDLED:
            paper, accel = sets.get(f"{setting}/{data}/paper"), sets.get(f"{setting}/{data}/accelerated")
            if paper is None or (accel is None and setting == "default"):
                continue
            momentum, previous = sets.get(f"{setting}/{data}/momentum"), sets.get(f"{setting}/{data}/previous")
            arrived, uniform = sets.get(f"{setting}/{data}/arrived"), sets.get(f"{setting}/{data}/uniform")
            row = {"setting": setting, "data": data, "rc_test_error": paper["rc"]["test_error"],
                   "rc_converged_test_error": paper["rc_converged"]["test_error"],
                   "paper_gap": gap_at(paper), "accelerated_gap": None if accel is None else gap_at(accel),
                   "momentum_gap": None if momentum is None else gap_at(momentum),
                   "previous_gap": None if previous is None else gap_at(previous),
                   "arrived_gap": None if arrived is None else gap_at(arrived),
                   "uniform_gap": None if uniform is None else gap_at(uniform),
                   "paper_gap_converged": converged_gap_at(paper),
                   "accelerated_gap_converged": None if accel is None else converged_gap_at(accel)}
            if setting == "default":
                row.update(paper_round=first_round(paper), accelerated_round=first_round(accel),
                           previous_round=None if previous is None else first_round(previous),
                           paper_gap_32=gap_at(paper, HALF), accelerated_gap_32=gap_at(accel, HALF),
                           previous_gap_32=None if previous is None else gap_at(previous, HALF),
                           paper_gap_256=paper["test_gap"], accelerated_gap_256=accel["test_gap"])
            rows.append(row)
    return rows


def rounds_text(round_):
    return "> 256" if round_ is None else str(round_)


def messages_text(round_):
    return "> 25,088" if round_ is None else f"{round_ * TREE_MESSAGES:,}"


def sets_markdown(rows: list[dict]) -> list[str]:
    out = []
    default = [r for r in rows if r["setting"] == "default"]
    if default:
        out += ["## Default setting: 15 bundled data sets (random tree, n = 50, m_v = 50, 3 repeats)", "",
                "Gap = CRC's mean test error minus RC's (RC at 64 iterations; in the 'conv.' columns RC run to "
                "convergence), at round 64 unless said; 'previous' is the accelerated algorithm before issue 31 "
                "(uniform start, two local steps); 'momentum' is the momentum preset (`--momentum 0.7 --safeguard "
                "--classifier aggregate`). Rounds to reach gap ≤ 0.01 read off the mean curve of a "
                "256-round run; "
                f"messages = rounds × {TREE_MESSAGES} (a tree of 50 peers, one message per edge and direction per "
                "round: the same for every algorithm).", "",
                "| data | RC test | paper gap | accel. gap | previous gap | momentum gap | accel. − paper | "
                "paper gap @32 | accel. gap @32 | previous gap @32 | paper conv. gap | accel. conv. gap | "
                "paper rounds to 0.01 | accel. rounds | previous rounds | paper messages | accel. messages | "
                "paper gap @256 | accel. gap @256 |",
                "|---|" + "---:|" * 18]
        for r in default:
            out.append(f"| {r['data']} | {r['rc_test_error']:.3f} | {fmt(r['paper_gap'])} | {fmt(r['accelerated_gap'])} | "
                       f"{fmt(r['previous_gap'])} | {fmt(r['momentum_gap'])} | "
                       f"{fmt(r['accelerated_gap'] - r['paper_gap'])} | {fmt(r['paper_gap_32'])} | "
                       f"{fmt(r['accelerated_gap_32'])} | {fmt(r['previous_gap_32'])} | {fmt(r['paper_gap_converged'])} | "
                       f"{fmt(r['accelerated_gap_converged'])} | {rounds_text(r['paper_round'])} | "
                       f"{rounds_text(r['accelerated_round'])} | {rounds_text(r['previous_round'])} | "
                       f"{messages_text(r['paper_round'])} | "
                       f"{messages_text(r['accelerated_round'])} | {fmt(r['paper_gap_256'])} | "
                       f"{fmt(r['accelerated_gap_256'])} |")
        within = lambda key: sum(r[key] is not None and r[key] <= TARGET for r in default)
        worst = max(default, key=lambda r: r["accelerated_gap"] - r["paper_gap"])
        out += ["", f"Gap ≤ 0.01 at round 64: paper {within('paper_gap')}/{len(default)}, accelerated "
                    f"{within('accelerated_gap')}/{len(default)}, previous {within('previous_gap')}/{len(default)}. "
                    f"At round 32: paper {within('paper_gap_32')}/{len(default)}, accelerated "
                    f"{within('accelerated_gap_32')}/{len(default)}, previous {within('previous_gap_32')}/{len(default)}. "
                    f"Largest loss against the paper: {worst['data']} "
                    f"({fmt(worst['accelerated_gap'] - worst['paper_gap'])}).", ""]
    for setting, title in (("label-tree+80", "Label drift p(y) on tree+80 (each peer one class), 64 rounds"),
                           ("loss0.1", "Message loss p = 0.1 (random tree), 64 rounds"),
                           ("loss0.3", "Message loss p = 0.3 (random tree), 64 rounds"),
                           ("tree-period1", "A fresh random tree every round, 64 rounds")):
        part = [r for r in rows if r["setting"] == setting]
        if not part:
            continue
        rerun = [r for r in part if r["accelerated_gap"] is not None]
        lossy = setting.startswith("loss")
        out += [f"## {title}", ""]
        if lossy:
            out += ["Sets with discrete features: accel. = a lost message replaced by the last heard from its sender "
                    "(`crc.core.last_heard`); what arrived = the accelerated algorithm averaging only the messages that "
                    "arrived (before that change); uniform = the accelerated algorithm with `--start uniform`.", ""]
        extra = ["accel. what arrived", "accel. uniform start"] if lossy else []
        out += ["| data | RC test | paper gap | accel. gap | " + "".join(f"{name} | " for name in extra) +
                "previous gap | momentum gap | accel. − paper | paper conv. gap | accel. conv. gap |",
                "|---|" + "---:|" * (8 + len(extra))]
        for r in part:
            change = None if r["accelerated_gap"] is None else r["accelerated_gap"] - r["paper_gap"]
            cells = "".join(f"{fmt(r[key])} | " for key in ("arrived_gap", "uniform_gap")) if lossy else ""
            out.append(f"| {r['data']} | {r['rc_test_error']:.3f} | {fmt(r['paper_gap'])} | {fmt(r['accelerated_gap'])} | "
                       f"{cells}{fmt(r['previous_gap'])} | {fmt(r['momentum_gap'])} | "
                       f"{fmt(change)} | {fmt(r['paper_gap_converged'])} | "
                       f"{fmt(r['accelerated_gap_converged'])} |")
        worst = [f"paper {max(r['paper_gap'] for r in part):.3f}"]
        worst += [f"accelerated {max(r['accelerated_gap'] for r in rerun):.3f} ({len(rerun)} data sets)"] if rerun else [
            "accelerated not rerun since issue 31 (–)"]
        worst += [f"previous {max(r['previous_gap'] for r in part if r['previous_gap'] is not None):.3f}"]
        out += ["", f"Max gap: {', '.join(worst)}.", ""]
    return out


def synthetic_markdown(sets: dict) -> list[str]:
    """The paper's and the accelerated algorithm on the synthetic sets (measure.py's synthetic run), rounds 32 and 64."""
    names = sorted({key.split("/")[1] for key in sets if key.startswith("synthetic/")})
    if not names:
        return []
    out = ["## Synthetic sets of kinds the bundled ones do not cover (default setting, 3 repeats)", "",
           "`results/acceleration/synthetic.py` writes them (its docstring describes each); gap to RC at 64 "
           "iterations; 64-round runs (`> 64`: not within 0.01 by then).", "",
           "| data | RC test | paper gap @32 | paper gap | accel. gap @32 | accel. gap | accel. rounds to 0.01 |",
           "|---|" + "---:|" * 6]
    for name in names:
        paper, accel = sets.get(f"synthetic/{name}/paper"), sets.get(f"synthetic/{name}/accelerated")
        if paper is None or accel is None:
            continue
        round_ = first_round(accel)
        out.append(f"| {name} | {paper['rc']['test_error']:.3f} | {fmt(gap_at(paper, HALF))} | {fmt(gap_at(paper))} | "
                   f"{fmt(gap_at(accel, HALF))} | {fmt(gap_at(accel))} | {'> 64' if round_ is None else round_} |")
    return out + [""]


def sweep_markdown(sets: dict) -> list[str]:
    """The previous preset (momentum) with a larger β on letter and chess (measure.py's momentum-sweep), round 64."""
    betas = [0.7, 0.75, 0.8, 0.85]
    out = ["## The momentum form with a larger β (the previous preset used 0.7), round 64", "",
           "| data | " + " | ".join(f"β = {beta}" for beta in betas) + " |", "|---|" + "---:|" * len(betas)]
    for data in ("letter", "chess"):
        cells = []
        for beta in betas:
            key = "default/{}/momentum" if beta == 0.7 else f"momentum-sweep/{{}}/momentum-beta{beta}"
            entry = sets.get(key.format(data))
            cells.append("…" if entry is None else fmt(gap_at(entry)))
        out.append(f"| {data} | " + " | ".join(cells) + " |")
    return out + [""]


def table_markdown(name: str) -> list[str]:
    paper_path, accel_path = HERE / "paper" / f"{name}.json", HERE / "accelerated" / f"{name}.json"
    if not paper_path.exists() or not accel_path.exists():
        return []
    paper, accel = json.loads(paper_path.read_text()), json.loads(accel_path.read_text())
    columns = paper["columns"]
    out = [f"## {name}: {paper['title']}", "", "Each cell: paper → accelerated (test gap to RC at 64 iterations, "
           "round 64, 3 repeats, 2,000 test instances); … = not finished.", "",
           "| data | " + " | ".join(c["header"] for c in columns) + " |", "|---|" + "---:|" * len(columns)]
    accel_rows = {row["data"]: row for row in accel["rows"]}
    worst = None
    for row in paper["rows"]:
        cells = []
        for column in columns:
            p = row["cells"].get(column["key"], {})
            a = accel_rows.get(row["data"], {"cells": {}})["cells"].get(column["key"], {})
            text = lambda c: "n/a" if "skip" in c else ("…" if "value" not in c else f"{c['value']:+.3f}")
            cells.append(f"{text(p)} → {text(a)}")
            if "value" in p and "value" in a and (worst is None or a["value"] - p["value"] > worst[0]):
                worst = (a["value"] - p["value"], f"{row['data']} {column['header']}")
        out.append(f"| {row['data']} | " + " | ".join(cells) + " |")
    if worst is not None:
        out += ["", f"Largest accelerated − paper difference in this table: {worst[0]:+.3f} ({worst[1]})."]
    return out + [""]


def plots(sets: dict, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = HERE / "plots"
    directory.mkdir(exist_ok=True)
    default = [r for r in rows if r["setting"] == "default"]
    if default:
        fig, ax = plt.subplots(figsize=(9, 4))
        x = np.arange(len(default))
        ax.bar(x - 0.27, [r["paper_gap"] for r in default], 0.27, label="paper")
        ax.bar(x, [np.nan if r["momentum_gap"] is None else r["momentum_gap"] for r in default], 0.27,
               label="momentum (previous preset)")
        ax.bar(x + 0.27, [r["accelerated_gap"] for r in default], 0.27, label="accelerated")
        ax.axhline(TARGET, color="grey", linestyle="--", linewidth=0.8, label="gap 0.01")
        ax.set_xticks(x, [r["data"] for r in default], rotation=45, ha="right")
        ax.set_ylabel("test gap CRC − RC at round 64")
        ax.set_title("Default setting (tree, n = 50, m_v = 50, 3 repeats)")
        ax.legend()
        fig.tight_layout()
        for suffix in ("png", "pdf"):
            fig.savefig(directory / f"gaps-default.{suffix}", dpi=200)
        plt.close(fig)
        fig, axes = plt.subplots(3, 5, figsize=(15, 8), sharex=True)
        for ax, data in zip(axes.ravel(), BUNDLED):
            for variant in ("paper", "momentum", "accelerated"):
                entry = sets.get(f"default/{data}/{variant}")
                if entry is None:
                    continue
                rc = entry["rc"]["test_error"]
                ax.plot([row["round"] for row in entry["rounds"]], [row["test_error"] - rc for row in entry["rounds"]],
                        label=variant)
            ax.axhline(TARGET, color="grey", linestyle="--", linewidth=0.8)
            ax.axhline(0, color="black", linewidth=0.5)
            ax.axvline(AT, color="grey", linestyle=":", linewidth=0.8)
            ax.set_title(data)
            ax.set_ylim(-0.1, 0.3)
        axes[0, 0].legend()
        for ax in axes[-1]:
            ax.set_xlabel("round")
        fig.suptitle("Test gap to RC by round (mean of 3 repeats); dashed: 0.01, dotted: round 64")
        fig.tight_layout()
        for suffix in ("png", "pdf"):
            fig.savefig(directory / f"curves-default.{suffix}", dpi=200)
        plt.close(fig)


def main() -> None:
    sets = {}
    for path in sorted(HERE.glob("sets*.json")) + [HERE / "previous.json"]:
        sets.update(json.loads(path.read_text()))
    rows = set_rows(sets)
    preset = ", ".join(f"{k} = {v}" for k, v in {**ACCELERATED, **MODEL_SETTINGS["nb"]}.items())
    lines = ["# Accelerated CRC against the paper's algorithm", "",
             f"Accelerated = `crc ... --algorithm accelerated`, the default (for naive Bayes {preset}: exact diffusion with "
             "three local steps per round from the peers' own category counts, the classifier's category counts averaged over "
             "the rounds; "
             "see the README's 'Accelerated CRC'). Momentum = the momentum preset, recommended before exact diffusion "
             "(`--momentum 0.7 --safeguard "
             "--classifier aggregate`). Previous = the accelerated algorithm before issue 31 (uniform start, two local steps). "
             "Paper = `--algorithm paper` (Algorithm 2). Produced by "
             "`results/acceleration/synthetic.py` (the synthetic sets), `results/acceleration/measure.py` (the 15 sets and the "
             "synthetic ones), `results/acceleration/decompose.py` (the gap decomposition), "
             "`results/acceleration/pooled_start.py` and `results/acceleration/suffix.py` (the categorical set's "
             "disagreement and averaging over the rounds), "
             "`crc experiment table3 table4 table5 table6 table7 table8 table9 table10 table11 table12 --repeats 3 "
             "--out results/acceleration/paper` and the same with `--algorithm accelerated --out results/acceleration/accelerated`, "
             "then `results/acceleration/report.py`. Figures: `results/acceleration/plots/`; every figure of this page as "
             "CSV/JSON: `results/acceleration/summary.csv`, `summary.json`; the tables' cells under `paper/` and "
             "`accelerated/` (the previous preset's under `momentum/`).", ""]
    lines += ["FINDINGS_PLACEHOLDER", ""]
    lines += sets_markdown(rows)
    lines += synthetic_markdown(sets)
    lines += sweep_markdown(sets)
    for name in TABLES:
        lines += table_markdown(name)
    text = "\n".join(lines) + "\n"
    findings = HERE / "findings.md"
    text = text.replace("FINDINGS_PLACEHOLDER", findings.read_text().strip() if findings.exists() else "")
    (RESULTS / "acceleration.md").write_text(text)
    (HERE / "summary.json").write_text(json.dumps({"preset": ACCELERATED, "sets": rows}, indent=1) + "\n")
    with open(HERE / "summary.csv", "w", newline="") as stream:
        keys = sorted({key for row in rows for key in row}, key=lambda k: (k not in ("setting", "data"), k))
        writer = csv.DictWriter(stream, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    plots(sets, rows)


if __name__ == "__main__":
    main()
