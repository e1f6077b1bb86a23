"""Robust aggregation under attack (issue 29): honest peers' test accuracy per aggregation rule, graph and attack.

Runs the simulator in-process (``crc.protocol.simulator.simulate``, the code of ``crc simulate``): penbased, naive
Bayes, 50 instances per peer, 64 rounds, the default (accelerated) algorithm, one Byzantine peer (seeded, as
``crc simulate --byzantine 1`` picks it), 3 repeats. Each cell of results/robust/byzantine.md is one
``crc simulate --data penbased --nodes N --topology T --repeats 3 --aggregate RULE [--byzantine 1 --attack A]``.

Beside every graph: the breakdown point per peer, floor(d / 2) Byzantine neighbours for a peer of degree d (the
most its closed neighbourhood of d + 1 tolerates with an honest majority), and how many honest peers of the
repeats had more Byzantine neighbours than that.

    python results/robust/byzantine.py [--rules mean,clipped,...] [--attacks none,extreme,...] [--graphs complete,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import byzantine_for, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
GRAPHS = {  # name: (topology, nodes)
    "complete": ("complete", 5),
    "ring+chord": (f"file:{HERE / 'ring6-chord.txt'}", 6),
    "tree": ("tree", 10),
    "regular:4": ("regular:4", 10),
}
RULES = ("mean", "clipped", "screened", "median", "trimmed", "geomedian")
ATTACKS = ("none", "extreme", "scale", "permute", "noise", "dissensus")


class Cache:
    def __init__(self):
        self.store = {}

    def get(self, key):
        return self.store.get(json.dumps(key, sort_keys=True))

    def put(self, key, value):
        self.store[json.dumps(key, sort_keys=True)] = value


def breakdown(config: SimulationConfig, dataset) -> dict:
    """Per repeat: each honest peer's degree d, Byzantine neighbours b; the peers with b > floor(d / 2)."""
    network = network_factory(config.topology)
    degrees, over = [], 0
    honest_total = 0
    for index in range(config.repeats):
        rep = prepare_repeat(dataset, config, index)
        mixing = network(config.nodes, rep.graph_seed)
        adjacency = (np.asarray((mixing(1) if callable(mixing) else mixing).todense()) > 0) & ~np.eye(config.nodes, dtype=bool)
        bad = byzantine_for(rep, config)[0]
        for v in range(config.nodes):
            if v in bad:
                continue
            d, b = int(adjacency[v].sum()), int(adjacency[v, bad].sum())
            degrees.append(d)
            honest_total += 1
            over += b > d // 2
    return {"tolerated": sorted({d // 2 for d in degrees}), "degrees": sorted(set(degrees)), "beyond": over,
            "honest_peers": honest_total}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rules", default=",".join(RULES))
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--data", default="penbased")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--algorithm", default=None, help="accelerated (the default) or paper")
    parser.add_argument("--out", default=str(HERE / "byzantine.json"))
    args = parser.parse_args()
    out = Path(args.out)
    cells = json.loads(out.read_text()) if out.exists() else {}
    cache = Cache()
    dataset = None
    for graph in args.graphs.split(","):
        topology, nodes = GRAPHS[graph]
        for attack in args.attacks.split(","):
            for rule in args.rules.split(","):
                config = SimulationConfig.from_settings(data=args.data, nodes=nodes, topology=topology, repeats=args.repeats,
                                                        algorithm=args.algorithm, aggregate=rule, byzantine=0 if attack == "none" else 1,
                                                        attack="permute" if attack == "none" else attack)
                dataset = dataset or load_for(config)
                result = simulate(config, network_factory(topology), dataset=dataset, cache=cache)
                block = result.get("honest", result["crc"])
                cell = {"graph": graph, "nodes": nodes, "attack": attack, "rule": rule,
                        "honest_accuracy": 1 - block["test_error"], "rc_accuracy": 1 - result["rc"]["test_error"]}
                if attack != "none":
                    cell["breakdown"] = breakdown(config, dataset)
                cell["algorithm"] = result["config"]["algorithm"]
                cells[f"{cell['algorithm']}/{graph}/{attack}/{rule}"] = cell
                print(f"{cell['algorithm']:11s} {graph:10s} {attack:9s} {rule:9s} honest accuracy {cell['honest_accuracy']:.4f}",
                      file=sys.stderr, flush=True)
                out.write_text(json.dumps(cells, indent=1))


if __name__ == "__main__":
    main()
