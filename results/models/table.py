"""The table of results/models/measure.sh's runs: python results/models/table.py > results/models/gaps.md"""
import json
from pathlib import Path

here = Path(__file__).parent / "json"
print("| data set | model | RC error | CRC error, default (accelerated) | gap | CRC error, paper | gap |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
rows = {}
for path in sorted(here.glob("*.json")):
    data, rest = path.stem.split("-", 1)
    model, algorithm = rest.rsplit("-", 1)
    rows.setdefault((data, model), {})[algorithm] = json.loads(path.read_text())
order = ["nb", "qda", "mixture", "region-graph"]
for (data, model), runs in sorted(rows.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
    cells = []
    rc = None
    for algorithm in ("accelerated", "paper"):
        run = runs.get(algorithm)
        if run is None:
            cells += ["", ""]
            continue
        rc = run["rc"]["test_error"]["mean"] if isinstance(run["rc"]["test_error"], dict) else run["rc"]["test_error"]
        crc = run["crc"]["test_error"]["mean"] if isinstance(run["crc"]["test_error"], dict) else run["crc"]["test_error"]
        gap = run["test_gap"]["mean"] if isinstance(run["test_gap"], dict) else run["test_gap"]
        cells += [f"{crc:.3f}", f"{gap:+.3f}"]
    print(f"| {data} | {model} | {rc:.3f} | " + " | ".join(cells) + " |")
