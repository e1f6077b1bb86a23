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


def mean(value):
    return value["mean"] if isinstance(value, dict) else value


far, worse = [], []
for (data, model), runs in sorted(rows.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
    cells = []
    rc = None
    for algorithm in ("accelerated", "paper"):
        run = runs.get(algorithm)
        if run is None:
            cells += ["", ""]
            continue
        rc, crc, gap = mean(run["rc"]["test_error"]), mean(run["crc"]["test_error"]), mean(run["test_gap"])
        cells += [f"{crc:.3f}", f"{gap:+.3f}"]
    print(f"| {data} | {model} | {rc:.3f} | " + " | ".join(cells) + " |")
    default, nb = runs.get("accelerated"), rows[(data, "nb")].get("accelerated")
    if default is None:
        continue
    if mean(default["test_gap"]) > 0.02:
        far.append(f"{model} on `{data}` ({mean(default['test_gap']):+.3f})")
    if nb is not None and mean(default["rc"]["test_error"]) < mean(nb["rc"]["test_error"]) \
            and mean(default["crc"]["test_error"]) > mean(nb["crc"]["test_error"]):
        worse.append(f"{model} on `{data}` (CRC {mean(default['crc']['test_error']):.4f} against naive Bayes' "
                     f"{mean(nb['crc']['test_error']):.4f}; RC {mean(default['rc']['test_error']):.4f} against "
                     f"{mean(nb['rc']['test_error']):.4f})")
print()
print("More than 0.02 above RC under the default algorithm: " + (", ".join(far) or "none") + ".")
print()
print("Worse under CRC than naive Bayes under CRC where its RC is better than naive Bayes' RC (default algorithm): "
      + (", ".join(worse) or "none") + ".")
