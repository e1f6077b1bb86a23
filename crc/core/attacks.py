"""Poisoned statistics a Byzantine peer sends, for studying robust aggregation (``--byzantine``, ``--attack``).

Every attack keeps the equivalent sample size (the class-count total m0) and
finite values, so the statistics pass a peer's checks on receipt; only the
aggregation rule can limit their harm:

* ``scale``   -- every statistic but the class counts multiplied by ``SCALE_FACTOR`` (means and moments blown up);
* ``permute`` -- the class rows rotated by one class (class y's statistics claimed for class y+1): a confident,
  plausible-looking model with every label wrong;
* ``noise``   -- each value v plus ``NOISE_SCALE`` x |v| x N(0, 1), the class counts' noise centred so that their
  total is kept;
* ``extreme`` -- the most extreme statistics a receiver accepts (``crc.core.plausibility``): the class counts at
  the edge of the negative-count bound (row 0: (1 + NEGATIVE_COUNT_MASS) m0, row 1: -NEGATIVE_COUNT_MASS m0, the
  rest 0; the issue's attacker sent +-0.99e4 m0, now refused) and every other statistic +-``EXTREME_FRACTION`` x
  MAX_RELATIVE_MAGNITUDE x m0, alternating in sign (5e29 m0, as the issue's attacker sent);
* ``dissensus`` -- ClippedGossip's attack (He, Karimireddy & Jaggi 2022, arXiv:2202.01545, section 5): Byzantine
  neighbour b sends honest peer i ``s_i - DISSENSUS_EPSILON x sum_{k honest} w_ik (s_k - s_i) / sum_{b' Byzantine}
  w_ib'``, so that under the mean i moves away from its honest neighbours by (EPSILON - 1) times their pull; close
  to s_i, it passes any distance-based test. It is omniscient (it reads the receiver's honest neighbours) and sends
  each neighbour something else, so it exists in the simulator only (``PEER_ATTACKS`` are those a real peer sends).

Every attack keeps the ESS exactly, and ``extreme`` is plausible by construction; a simulated receiver still applies
the wire's plausibility check (``crc.core.plausibility``) and drops what fails it, as a real peer does.
"""

from __future__ import annotations

import numpy as np

from crc.core.models.base import GenerativeModel
from crc.core.plausibility import MAX_RELATIVE_MAGNITUDE, NEGATIVE_COUNT_MASS

ATTACKS = ("scale", "permute", "noise", "extreme", "dissensus")
PEER_ATTACKS = ("scale", "permute", "noise", "extreme")
"""The attacks a real peer can send (``crc node --attack``): ``dissensus`` needs the receivers' neighbours."""
ATTACK_HELP = ("scale: all statistics but the class counts x 10; permute: each class's statistics claimed for the next "
               "class; noise: each value plus |value| x N(0, 1), class-count total kept; extreme: the most extreme "
               "statistics the receivers' checks accept (counts at their bound, other values +-5e29 x the ESS); "
               "dissensus (simulator only): ClippedGossip's attack, pushing each honest neighbour away from its others")
SCALE_FACTOR = 10.0
NOISE_SCALE = 1.0
EXTREME_FRACTION = 0.5
"""``extreme``: the values other than the counts, as a fraction of the largest magnitude accepted."""
EXTREME_COUNT_MARGIN = 1.0 - 1e-6
"""``extreme``: the negative count, as a fraction of its bound (a hair inside, against rounding)."""
DISSENSUS_EPSILON = 1.5
"""``dissensus``: epsilon of the attack (1 cancels the honest neighbours' pull; above 1 reverses it)."""


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
    elif attack == "extreme":
        ess = table[..., count].sum(axis=(-1, -2))[..., None, None]
        signs = np.where(np.arange(table.shape[-1]) % 2 == 0, 1.0, -1.0)
        table = np.broadcast_to(EXTREME_FRACTION * MAX_RELATIVE_MAGNITUDE * signs * ess, table.shape).copy()
        counts = np.zeros(table.shape[-2])
        counts[0], counts[1] = 1.0 + (EXTREME_COUNT_MARGIN * NEGATIVE_COUNT_MASS), -(EXTREME_COUNT_MARGIN * NEGATIVE_COUNT_MASS)
        table[..., count] = counts[:, None] * ess
    elif attack == "dissensus":
        raise ValueError("dissensus depends on the receiver: see byzantine_messages")
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


def byzantine_messages(model: GenerativeModel, nodes: np.ndarray, attack: str, rng: np.random.Generator):
    """``messages(stats, rows, cols, weights) -> (E, size)``: what each edge carries, for ``CRCEngine``'s
    ``messages`` hook. Edge e brings node ``rows[e]`` the statistics of ``cols[e]`` with weight ``weights[e]``;
    those of ``nodes`` are poisoned (the same for every receiver, except ``dissensus``)."""
    import scipy.sparse as sp  # on use: importing this module (crc --help does) loads no scipy

    nodes = np.asarray(nodes, dtype=np.int64)

    def messages(stats: np.ndarray, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray) -> np.ndarray:
        out = stats[cols]
        bad = np.isin(cols, nodes)
        if attack != "dissensus":
            out[bad] = poison(model, stats[nodes], attack, rng)[np.searchsorted(nodes, cols[bad])]
            return out
        n, honest = len(stats), ~bad
        pull = (sp.csr_array((weights[honest], (rows[honest], cols[honest])), shape=(n, n)) @ stats
                - np.bincount(rows[honest], weights=weights[honest], minlength=n)[:, None] * stats)
        bad_weight = np.bincount(rows[bad], weights=weights[bad], minlength=n)
        receivers = rows[bad]
        out[bad] = stats[receivers] - DISSENSUS_EPSILON * pull[receivers] / bad_weight[receivers][:, None]
        return out

    return messages
