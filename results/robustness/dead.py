"""A neighbour dead from round 1 in a 64-round run (4 peers on a tree, penbased, timeout 2 s, the first round's too):
time for the others to finish, against a clean run.  python results/robustness/dead.py"""
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from crc.core.model_file import load_model
from support.network import Network, scenario

TIMEOUT = 2.0
def run(kill):
    d = Path(tempfile.mkdtemp(prefix=f"crc-dead-{kill}-"))
    config, graph, _ = scenario(d, nodes=4, rounds=64, data="penbased", local_size=50)
    leaf = min(v for v in graph if graph.degree(v) == 1)
    with Network(d, graph, config, timeout=TIMEOUT) as net:
        t0 = time.monotonic()
        net.start_all()
        if kill:
            net.wait_for_round(leaf, 1)
            net.signal(leaf, signal.SIGKILL)
        others = [i for i in range(4) if i != leaf or not kill]
        codes = net.wait(others, limit=300)
        wall = time.monotonic() - t0
        friend = next(iter(graph.neighbors(leaf)))
        m = load_model(net.model_path(friend)).metrics
        a = net.addresses[leaf]
        print(json.dumps({"killed": kill, "wall_s": round(wall, 2), "codes": codes, "friend_missing": m["missing"][a],
                          "friend_down_rounds": m["down_rounds"][a], "friend_downtime_s": round(m["downtime_s"][a], 2),
                          "friend_rounds_s": round(sum(m["round_ms"]) / 1000, 2)}))
run(False)
run(True)
