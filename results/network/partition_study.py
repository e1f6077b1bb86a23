"""The network bench's partition in the simulator: why exact diffusion ended above the wide-area run, and the fix.

The scenario of ``crc bench --only network`` (16 peers, ``regular:4``, twonorm, naive Bayes, 50 instances each, 480
rounds) with its partition replayed round by round in-process: the 12 edges between the two halves
(``crc.bench.network.halves``) carry nothing from round FAULT_ROUND + 1 to HEAL_ROUND - 1 (the real run: 5 to about 400). A real
peer averages what arrived while a neighbour is silent; after ``down_after`` (K = 3) silent rounds it marks it down,
and it hears it again in the first round after the heal. How the peers beside the cut handle that:

* ``restart`` (before): the silent neighbours averaged out; a restart of exact diffusion's correction in the round
  that marks them down and in the round they come back (the simulator's ``changed_neighbourhoods``);
* ``kept`` (tried): silent neighbours averaged out for K rounds, then, marked down, their share kept with the peer's
  own statistics (the mixing stays symmetric in the weights d + 1); no restart;
* ``settled`` (now, ``crc.core.acceleration.SETTLE_ROUNDS``): the silent neighbours averaged out, and the peers beside
  the cut restart every round from the cut until SETTLE_ROUNDS rounds after the heal.

``--asymmetric N``: for N rounds after the heal the second half still averages out the first half's statistics while
the first half uses the second's (one half a few rounds ahead of the other, as on real peers). With
``--algorithm paper`` (no correction, silent neighbours averaged out: ``cut``) for reference. Printed per variant:
the peers' mean test error at some rounds, and Σ_v (d_v + 1)(s_v - ψ_v) relative to Σ_v (d_v + 1) s_v at the end
(zero when exact diffusion's correction is intact).

    python results/network/partition_study.py [--rounds 480] [--asymmetric 0] [--settle 8] [--algorithm accelerated]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.sparse as sp

from crc.bench.network import FAULT_ROUND, NETWORK_ROUNDS, halves
from crc.core.acceleration import SETTLE_ROUNDS
from crc.core.engine import CRCEngine, LocalData
from crc.nodes.settings import PeerSettings
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import ess_for, load_for, prepare_repeat
from crc.topologies.schedule import Schedule

NODES = 16
HEAL_ROUND = 400
"""The rounds the real peers had reached when the 30 s partition healed (``rounds_at_heal``: 397 to 402)."""
SHOWN = (FAULT_ROUND, 100, 200, HEAL_ROUND - 1, HEAL_ROUND + 5, HEAL_ROUND + 20, HEAL_ROUND + 40)


def mixing_of(adjacency: np.ndarray, degrees: np.ndarray, *, kept: bool) -> sp.csr_array:
    """Closed-neighbourhood averaging over ``adjacency`` (n, n): each row averages what arrived (``kept``: weights
    1 / (d + 1) of the static ``degrees`` (n,), the missing shares on the diagonal)."""
    n = len(adjacency)
    if kept:
        weights = adjacency / (degrees[:, None] + 1)
        weights[np.diag_indices(n)] = 1 - weights.sum(axis=1)
    else:
        weights = (adjacency + np.eye(n)) / (adjacency.sum(axis=1, keepdims=True) + 1)
    return sp.csr_array(weights)


def run(variant: str, rounds: int, algorithm: str, asymmetric: int, settle: int) -> tuple[dict[int, float], float]:
    """(mean test error at the rounds of SHOWN and the last, the correction's relative residue) of one variant."""
    config = SimulationConfig.from_settings(data="twonorm", nodes=NODES, rounds=rounds, topology="regular:4",
                                            algorithm=algorithm)
    rep = prepare_repeat(load_for(config), config, 0)
    graph = Schedule(config.topology, NODES, seed=rep.graph_seed).graph(1)
    first, second = halves(graph)
    full = np.zeros((NODES, NODES))
    for u, v in graph.edges:
        full[u, v] = full[v, u] = 1.0
    side = np.isin(np.arange(NODES), second)
    cut = full * (side[:, None] == side[None, :])
    degrees = full.sum(axis=1)
    K, start = PeerSettings.down_after, FAULT_ROUND + 1
    whole, silent = mixing_of(full, degrees, kept=False), mixing_of(cut, degrees, kept=False)
    down = mixing_of(cut, degrees, kept=variant == "kept")
    one_way = full * ~(side[:, None] & ~side[None, :])  # the second half's rows without the first half's columns
    heal = mixing_of(one_way, degrees, kept=False)

    def mixing(round_: int) -> sp.csr_array:
        if variant == "clean" or round_ < start:
            return whole
        if round_ >= HEAL_ROUND:
            return heal if round_ < HEAL_ROUND + asymmetric else whole
        return silent if round_ < start + K else down

    def restarts(round_: int) -> sp.csr_array:  # a changed matrix restarts the peers whose row changed
        if variant == "restart" and start + K <= round_ <= HEAL_ROUND:
            return silent
        if variant == "settled" and start <= round_ < HEAL_ROUND + asymmetric + settle:
            return silent if round_ % 2 else whole  # a change every round: a restart every round
        return whole

    split = rep.split
    engine = CRCEngine(split.model, LocalData.from_parts(split.phi_train, split.y_train, split.parts), mixing,
                       ess=ess_for(config), iterations=config.iters, acceleration=config.acceleration, graph=restarts)
    errors = {}

    def record(round_: int, stats: np.ndarray) -> None:
        if round_ in SHOWN or round_ == rounds:
            errors[round_] = float(rep.errors(stats[rep.eval_nodes])[1].mean())

    engine.run(rounds, record)
    if engine.memory is None:
        return errors, float("nan")
    weighted = (degrees + 1)[:, None]
    residue = (weighted * (engine.stats - engine.memory.previous)).sum(axis=0)
    return errors, float(np.linalg.norm(residue) / np.linalg.norm((weighted * engine.stats).sum(axis=0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=NETWORK_ROUNDS)
    parser.add_argument("--asymmetric", type=int, default=0)
    parser.add_argument("--settle", type=int, default=SETTLE_ROUNDS)
    parser.add_argument("--algorithm", default="accelerated", choices=["accelerated", "paper"])
    args = parser.parse_args()
    variants = {name: name for name in ("clean", "restart", "kept", "settled")} if args.algorithm == "accelerated" else \
        {"clean": "clean", "cut": "restart"}  # the paper's algorithm has no correction to restart
    results = {name: run(variant, args.rounds, args.algorithm, args.asymmetric, args.settle)
               for name, variant in variants.items()}
    shown = sorted(results["clean"][0])
    print("| variant | " + " | ".join(f"round {r}" for r in shown) + " | last - clean | residue |")
    print("|---|" + "---|" * (len(shown) + 2))
    clean_last = results["clean"][0][args.rounds]
    for variant, (errors, residue) in results.items():
        print(f"| {variant} | " + " | ".join(f"{errors[r]:.4f}" for r in shown)
              + f" | {errors[args.rounds] - clean_last:+.4f} | {residue:.1e} |")


if __name__ == "__main__":
    main()
