"""The table of results/models/mixing.sh's runs: python results/models/mixing_table.py REPEATS (markdown on stdout).

Per data set and model: RC test error (64 iterations), RC run to convergence where results/models/converged/ holds it,
and CRC's test error at the last round in each cell of mixing.sh."""
import json
import sys
from pathlib import Path

here = Path(__file__).parent
repeats = sys.argv[1]
names = {"nb": "NB", "pc2": "PC K=2", "pc4": "PC K=4", "pc8": "PC K=8", "pc-rg": "PC region graph"}
converged_names = {"nb": "nb", "pc2": "pc2", "pc4": "pc4", "pc8": "pc8", "pc-rg": "region-graph"}
cells = {"tree": "tree (default)", "complete": "complete graph", "tree-256": "tree, 256 rounds"}


def mean(value):
    return value["mean"] if isinstance(value, dict) else value


datasets = sorted({path.name.split("-", 1)[0] for path in (here / "mixing" / "json").glob(f"*-r{repeats}.json")})
print("| data set | model | RC error (64) | RC error (converged) | " + " | ".join(cells.values()) + " |")
print("| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in cells) + " |")
for data in datasets:
    for model, name in names.items():
        runs = {cell: here / "mixing" / "json" / f"{data}-{model}-{cell}-r{repeats}.json" for cell in cells}
        runs = {cell: json.loads(path.read_text()) for cell, path in runs.items() if path.exists()}
        if not runs:
            continue
        rc = mean(next(iter(runs.values()))["rc"]["test_error"])
        converged_path = here / "converged" / f"{data}-{converged_names[model]}.json"
        converged = (f"{mean(json.loads(converged_path.read_text())['rc_converged']['test_error']):.4f}"
                     if converged_path.exists() else "")
        errors = [f"{mean(runs[cell]['crc']['test_error']):.4f}" if cell in runs else "" for cell in cells]
        print(f"| {data} | {name} | {rc:.4f} | {converged} | " + " | ".join(errors) + " |")
