"""Seeded message loss: which of a peer's incoming messages of a round are dropped.

The draw depends only on (the receiver's loss seed, the round, the order of its neighbours), so
the simulator and a real peer told the same seed drop the same messages.
"""

from __future__ import annotations

import numpy as np


def loss_seed(seed: int, repeat: int, node: int) -> int:
    """The loss seed of ``node`` in repeat ``repeat`` of a run seeded ``seed`` (a non-negative int below 2**64)."""
    state = np.random.SeedSequence(seed, spawn_key=(repeat, 3, node)).generate_state(2, np.uint32)
    return int(state[0]) | int(state[1]) << 32


def dropped(node_seed: int, round_: int, neighbours: int, p: float) -> np.ndarray:
    """Which of the ``neighbours`` messages (bool, in the order of the neighbours' indices) a peer loses
    at round ``round_`` (1, 2, ...), each independently with probability ``p``."""
    if p <= 0.0:
        return np.zeros(neighbours, dtype=bool)
    return np.random.default_rng([node_seed, round_]).random(neighbours) < p
