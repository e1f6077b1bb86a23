"""Poisoned statistics a Byzantine peer sends, for studying robust aggregation (``--byzantine``, ``--attack``).

Every attack keeps the equivalent sample size (the class-count total m0) and
finite values, so the statistics pass a peer's checks on receipt; only the
aggregation rule can limit their harm:

* ``scale``   -- every statistic but the class counts multiplied by ``SCALE_FACTOR`` (means and moments blown up);
* ``permute`` -- the class rows rotated by one class (class y's statistics claimed for class y+1): a confident,
  plausible-looking model with every label wrong;
* ``noise``   -- each value v plus ``NOISE_SCALE`` x |v| x N(0, 1), the class counts' noise centred so that their
  total is kept.
"""

from __future__ import annotations

import numpy as np

from crc.core.models.base import GenerativeModel

ATTACKS = ("scale", "permute", "noise")
ATTACK_HELP = ("scale: all statistics but the class counts x 10; permute: each class's statistics claimed for the next "
               "class; noise: each value plus |value| x N(0, 1), class-count total kept")
SCALE_FACTOR = 10.0
NOISE_SCALE = 1.0


def poison(model: GenerativeModel, stats: np.ndarray, attack: str, rng: np.random.Generator) -> np.ndarray:
    """Poisoned copies of ``stats`` (..., size) with the same ESS; ``rng`` draws the noise."""
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}")
    table = model.table(np.array(stats, dtype=np.float64))
    count = model.layout.columns("count")
    if attack == "scale":
        counts = table[..., count].copy()
        table *= SCALE_FACTOR
        table[..., count] = counts
    elif attack == "permute":
        rows = table.shape[-2]
        per_class = rows // model.n_classes  # circuits: a row per (class, component), class-major
        by_class = table.reshape(table.shape[:-2] + (model.n_classes, per_class, table.shape[-1]))
        table = np.roll(by_class, 1, axis=-3).reshape(table.shape)
    else:
        table = table + NOISE_SCALE * np.abs(table) * rng.standard_normal(table.shape)
        noise = table[..., count] - model.table(stats)[..., count]
        table[..., count] -= noise.mean(axis=(-1, -2), keepdims=True)
    return table.reshape(np.shape(stats))


def byzantine_nodes(n_nodes: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` distinct nodes out of ``n_nodes``, sorted (a seeded draw)."""
    if not 0 <= k < n_nodes:
        raise ValueError(f"{k} Byzantine peers out of {n_nodes}: at least one must be honest")
    return np.sort(rng.choice(n_nodes, size=k, replace=False))


def byzantine_sender(model: GenerativeModel, nodes: np.ndarray, attack: str, rng: np.random.Generator):
    """``sent(stats) -> (n, size)``: the network's statistics (n, size) with the rows of ``nodes`` poisoned, for
    ``CRCEngine``'s ``sent`` hook (the Byzantine nodes themselves keep learning on their own statistics)."""

    def sent(stats: np.ndarray) -> np.ndarray:
        out = stats.copy()
        out[nodes] = poison(model, stats[nodes], attack, rng)
        return out

    return sent
