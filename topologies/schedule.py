"""Communication networks over rounds: static, or redrawn every ``period`` rounds."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from crc.topologies.diagnostics import density
from crc.topologies.errors import TopologyError
from crc.topologies.mixing import averaging_matrix
from crc.topologies.spec import build, parse


class Schedule:
    """The graph of every round (1, 2, ...): a fresh seeded draw of ``spec`` every ``period`` rounds.

    ``period = math.inf`` keeps one graph. Calling the schedule with a round
    returns that round's averaging matrix, so it serves as the CRC engine's mixing.
    """

    def __init__(self, spec: str, n: int, *, period: float = math.inf, seed=None):
        parse(spec)
        if not (period == math.inf or (float(period).is_integer() and period >= 1)):
            raise TopologyError(f"period must be a whole number of rounds >= 1 or infinite, got {period}")
        self.spec, self.n, self.period = spec, n, period
        self._seed = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self._cache: tuple[int, nx.Graph, object] | None = None

    def epoch(self, round_: int) -> int:
        """Index of the graph in force at ``round_`` (0 for a static network)."""
        if round_ < 1:
            raise TopologyError(f"rounds start at 1, got {round_}")
        return 0 if self.period == math.inf else (round_ - 1) // int(self.period)

    def _epoch_entry(self, epoch: int):
        if self._cache is None or self._cache[0] != epoch:
            seed = np.random.SeedSequence(self._seed.entropy, spawn_key=self._seed.spawn_key + (epoch,))
            graph = build(self.spec, self.n, seed=np.random.default_rng(seed))
            self._cache = (epoch, graph, averaging_matrix(graph))
        return self._cache

    def graph(self, round_: int) -> nx.Graph:
        return self._epoch_entry(self.epoch(round_))[1]

    def __call__(self, round_: int):
        return self._epoch_entry(self.epoch(round_))[2]

    def density(self, rounds: int = 1) -> float:
        """Mean density (edges / possible edges) of the graphs in force during rounds 1..``rounds``."""
        epochs = sorted({self.epoch(t) for t in range(1, rounds + 1)})
        first_rounds = [1 + epoch * (0 if self.period == math.inf else int(self.period)) for epoch in epochs]
        return float(np.mean([density(self.graph(t)) for t in first_rounds]))
