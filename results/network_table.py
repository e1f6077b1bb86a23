"""results/network.md from results/network.json (``crc bench --only network``'s output); run from the checkout:

    crc bench --only network --out results/network.json && python results/network_table.py
"""

import json
from pathlib import Path

from crc.bench.network import markdown

HERE = Path(__file__).parent
COMMAND = "crc bench --only network --out results/network.json && python results/network_table.py"

report = json.loads((HERE / "network.json").read_text())
(HERE / "network.md").write_text(markdown(report.get("network", report), COMMAND))
