"""Fewer releases in the same rounds, on the paper's random tree: a peer releases (one local step from its public
aggregate, then noise) only every k-th round, and in the k - 1 rounds between it only averages what is already public
(post-processing, no privacy cost), so the accountant composes ceil(rounds / k) releases and σ falls by about √k.
``steps`` j > 1 carries j steps' worth of data in a release: ``a + j (LRC(a) - a)``, the data term at the same
public θ(a) (a second sequential step has no sensitivity bound, ``crc.core.privacy``), of sensitivity jΔ.

The grid of ``levers.py`` (magic, naive Bayes, 50 peers x 50 instances, 64 rounds, δ = 1e-5, 1,000 test instances),
local noise, each run scored on its last iterate and on the average of its last 16 rounds' classifier statistics
(``averaging.py``). Writes releases.json next to this file, one entry per finished cell (rerun to resume):

    python results/privacy/releases.py [--repeats R] [--k K ...] [--steps J] [--epsilons E ...]
"""

import argparse
import json
import math
from pathlib import Path

import numpy as np
from levers import SETTING

from crc.core.engine import CRCEngine
from crc.core.privacy import release
from crc.protocol import SimulationConfig
from crc.protocol.accountant import plan
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import PRIVACY_STREAM, make_engine
from crc.topologies import network_factory

HERE = Path(__file__).parent
WINDOW = 16
"""Rounds whose classifier statistics are averaged for the second score."""


class EveryKth(CRCEngine):
    """A CRC engine whose peers take a local step (``steps`` times the data term) and release only in rounds
    1, k + 1, 2k + 1, ...; in the other rounds a peer's statistics are its aggregate of its neighbours' public ones."""

    def configure(self, k: int, steps: int) -> None:
        self.k, self.steps = k, steps

    def _step(self, *, keep_aggregated: bool) -> np.ndarray:
        if self.round % self.k == 0:
            return super()._step(keep_aggregated=keep_aggregated)
        aggregated = self.aggregate()
        self.stats = self.aggregated = aggregated
        self.round += 1
        return aggregated

    def _lrc(self, aggregated, block, restart):
        stats, memory = super()._lrc(aggregated, block, restart)
        return aggregated + self.steps * (stats - aggregated), memory


def repeat_errors(config: SimulationConfig, dataset, index: int, k: int, steps: int) -> tuple[float, float]:
    """Mean test error over the evaluation peers of one repeat: last iterate, last WINDOW averaged."""
    rep = prepare_repeat(dataset, config, index)
    graph = network_factory(config.topology, math.inf)(config.nodes, rep.graph_seed)
    privacy = None
    if config.dp_epsilon is not None:
        privacy = plan(rep.split.model, epsilon=config.dp_epsilon, delta=config.dp_delta, clip=config.clip,
                       releases=-(-config.rounds // k))
    engine, _ = make_engine(rep, config, lambda n, seed: graph, privacy)
    engine.__class__ = EveryKth
    engine.configure(k, steps)
    if privacy is not None:
        sigma = steps * privacy.sigma
        rng = np.random.default_rng([config.seed, rep.index, PRIVACY_STREAM])
        engine._release = lambda stats: release(rep.split.model, stats, sigma, rng)
    history: list[np.ndarray] = []

    def keep(round_: int, classifiers: np.ndarray) -> None:
        if round_ > config.rounds - WINDOW:
            history.append(classifiers[rep.eval_nodes].copy())

    engine.run(config.rounds, keep)
    return (float(rep.errors(history[-1])[1].mean()), float(rep.errors(np.mean(history, axis=0))[1].mean()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[math.inf, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=64)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--topology", default="tree")
    args = parser.parse_args()
    out = HERE / "releases.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    settings = {**SETTING, "repeats": args.repeats, "rc_iterations": args.rounds}
    for k in args.k:
        for epsilon in args.epsilons:
            name = (f"k={k}/j={args.steps}/rounds={args.rounds}/momentum={args.momentum:g}/{args.topology}/eps={epsilon:g}/"
                    f"repeats={args.repeats}")
            if name in done:
                continue
            config = SimulationConfig.from_settings(**settings, topology=args.topology, rounds=args.rounds,
                                                    momentum=args.momentum, classifier="aggregate",
                                                    dp_epsilon=None if math.isinf(epsilon) else epsilon)
            dataset = load_for(config)
            errors = np.array([repeat_errors(config, dataset, i, k, args.steps) for i in range(config.repeats)])
            done[name] = {"last": float(errors[:, 0].mean()), f"last {WINDOW}": float(errors[:, 1].mean())}
            out.write_text(json.dumps(done, indent=1))
            print(name, done[name], flush=True)


if __name__ == "__main__":
    main()
