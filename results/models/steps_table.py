"""The table of results/models/steps.sh's runs: python results/models/steps_table.py REPEATS (markdown on stdout).

Per data set and model: RC error (64 iterations) and CRC error at round 64 for each number of local steps per round,
with the gap CRC - RC; naive Bayes under its default (3 steps, local category counts) is the reference row, and a
CRC error above naive Bayes' CRC error where the model's RC is better than naive Bayes' RC is marked with `>NB`."""
import json
import re
import sys
from pathlib import Path

here = Path(__file__).parent / "steps" / "json"
repeats = sys.argv[1]
names = {"qda": "QDA", "pc2": "PC K=2", "pc4": "PC K=4", "pc8": "PC K=8", "pc-rg": "PC region graph"}
runs = {}
for path in here.glob(f"*-r{repeats}.json"):
    data, rest = path.stem.split("-", 1)
    match = re.fullmatch(r"(.+)-(iters(\d+)|default)-r\d+", rest)
    runs.setdefault(data, {}).setdefault(match[1], {})[int(match[3] or 0)] = json.loads(path.read_text())
steps = sorted({i for models in runs.values() for cells in models.values() for i in cells if i})


def mean(value):
    return value["mean"] if isinstance(value, dict) else value


def errors(run):
    """(RC test error, CRC test error) of a run, averaged over its repeats."""
    return mean(run["rc"]["test_error"]), mean(run["crc"]["test_error"])


print("| data set | model | RC error | " + " | ".join(f"CRC, {i} steps | gap" for i in steps) + " |")
print("| --- | --- | ---: | " + " | ".join("---: | ---:" for _ in steps) + " |")
for data in sorted(runs):
    nb_rc, nb_crc = errors(runs[data]["nb"][0])
    print(f"| {data} | NB, default (3 steps) | {nb_rc:.4f} | " + " | ".join(
        (f"{nb_crc:.4f} | {nb_crc - nb_rc:+.4f}" if i == 3 else " | ") for i in steps) + " |")
    for model in names:
        cells = runs[data].get(model, {})
        if not cells:
            continue
        rc = errors(next(iter(cells.values())))[0]
        out = []
        for i in steps:
            if i not in cells:
                out.append(" | ")
                continue
            crc = errors(cells[i])[1]
            flag = " >NB" if rc < nb_rc and crc > nb_crc else ""
            out.append(f"{crc:.4f}{flag} | {crc - rc:+.4f}")
        print(f"| {data} | {names[model]} | {rc:.4f} | " + " | ".join(out) + " |")
