"""results/byzantine.md and .csv from the runs of results/byzantine.sh: honest peers' mean test error."""

import csv
import io
import json
from pathlib import Path

HERE = Path(__file__).parent
KEYS = ["data", "byzantine", "attack", "aggregate", "honest_test_error", "honest_test_std", "rc_test_error"]


def read_rows(directory: Path) -> list[dict]:
    """One row per run JSON in ``directory`` (results/byzantine): its settings and the honest peers' test error."""
    rows = []
    for path in sorted(directory.glob("*.json")):
        r = json.loads(path.read_text())
        c = r["config"]
        block = r.get("honest", r["crc"])
        rows.append({"data": c["data"], "byzantine": c["byzantine"], "attack": c["attack"] if c["byzantine"] else "none",
                     "aggregate": c["aggregate"], "honest_test_error": round(block["test_error"], 4),
                     "honest_test_std": round(block["test_std"], 4), "rc_test_error": round(r["rc"]["test_error"], 4)})
    return rows


def read_launches(directory: Path) -> dict[str, dict]:
    """The real peers' runs in ``directory`` (results/byzantine-launch), by file stem."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def table_csv(rows: list[dict]) -> str:
    """The CSV of ``rows``, sorted by data set, K, attack and aggregate."""
    out = io.StringIO()
    writer = csv.DictWriter(out, KEYS)
    writer.writeheader()
    writer.writerows(sorted(rows, key=lambda x: (x["data"], x["byzantine"], x["attack"], x["aggregate"])))
    return out.getvalue()


def markdown(rows: list[dict], launch: dict[str, dict]) -> str:
    """The Markdown of the simulator's ``rows`` and of the real peers' runs ``launch`` (by file stem, results/byzantine-launch)."""
    index = {(x["data"], x["byzantine"], x["attack"], x["aggregate"]): x for x in rows}
    lines = ["# Byzantine peers in the simulator: honest peers' test error, mean vs clipped aggregation", "",
             "Produced by `results/byzantine.sh` (`crc simulate --algorithm paper --data D --repeats 3 --byzantine K --attack A "
             "--aggregate mean|clipped`; 50 peers on a random tree, 50 instances each, 64 rounds, naive Bayes). "
             "Each cell: mean test error of the honest peers (mean over 3 repeats), `mean` / `clipped`. "
             "K = 0 is the clean run. RC is centralized risk-based calibration on the pooled data.", "",
             "The robust rules (`screened`, `median`, `trimmed`, `geomedian` = `robust`) and the attacks `extreme` and "
             "`dissensus` are compared on small graphs, with the breakdown point per peer, in `results/robust/byzantine.md`.", ""]
    for data in sorted({x["data"] for x in rows}):
        rc = next(x["rc_test_error"] for x in rows if x["data"] == data)
        lines += [f"## {data} (RC test error {rc:.4f})", "", "| K | scale | permute | noise |", "|---|---|---|---|"]
        clean = [index.get((data, 0, "none", g)) for g in ("mean", "clipped")]
        if all(clean):
            lines.append(f"| 0 | {clean[0]['honest_test_error']:.4f} / {clean[1]['honest_test_error']:.4f} | | |")
        for k in sorted({x["byzantine"] for x in rows if x["byzantine"]}):
            cells = []
            for attack in ("scale", "permute", "noise"):
                pair = [index.get((data, k, attack, g)) for g in ("mean", "clipped")]
                cells.append(" / ".join(f"{p['honest_test_error']:.4f}" if p else "–" for p in pair))
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines.append("")
    if launch:
        clean = launch["launch-16-clean"]
        lines += ["## Real peers: one Byzantine neighbour at the centre of a 16-peer tree", "",
                  "`crc launch --algorithm paper --nodes 16 --rounds 64 --byzantine 1 --attack permute --aggregate mean|clipped` "
                  "(penbased, seed 0): the Byzantine peer is node 1, a leaf attached to node 12, a centre of the tree. Honest peers' "
                  "mean test accuracy (the clean run: all 16 peers).", "",
                  "| run | honest peers' test accuracy | wall time (s) |", "|---|---|---|",
                  f"| clean | {1 - clean['crc']['test_error']:.4f} | {clean['network']['wall_s']:.1f} |"]
        for aggregate in ("mean", "clipped"):
            run = launch.get(f"launch-16-permute-{aggregate}")
            if run:
                lines.append(f"| permute, {aggregate} | {1 - run['honest']['test_error']:.4f} | {run['network']['wall_s']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    rows = read_rows(HERE / "byzantine")
    (HERE / "byzantine.csv").write_text(table_csv(rows), newline="")
    (HERE / "byzantine.md").write_text(markdown(rows, read_launches(HERE / "byzantine-launch")))


if __name__ == "__main__":
    main()
