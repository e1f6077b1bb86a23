"""How a peer combines its neighbours' statistics with its own: the plain mean, self-centred clipping, or a robust
vote of the closed neighbourhood.

``mean`` is Algorithm 2's closed-neighbourhood average. ``clipped`` is
self-centred clipping (ClippedGossip; He, Karimireddy & Jaggi 2022,
arXiv:2202.01545): peer i moves from its own statistics s_i towards each
neighbour j by w_ij * clip(s_j - s_i, tau_i), where clip scales a vector down
to norm tau_i if it is longer. A neighbour's influence per round is then at
most w_ij * tau_i, whatever it sends.

Radius rule (``CLIP_FACTOR`` = 2 x the lower median of the neighbours' distances
||s_j - s_i||): the paper's provable radius needs to know which neighbours are
honest, and its code's practical rule (the second-largest distance) clips the
farthest neighbour in every round, so that without any attack the result is
not the mean. A median is set by the honest neighbours whenever they are the
majority, and the lower median also when they are half (2 neighbours, 1 bad).
The factor 2 was chosen on penbased (50 peers on a tree, 4 Byzantine): honest
test error under `scale` 0.187 with factor 3, 0.114 with 2, 0.101 with 1.5
(0.438 with the mean), but 1.5 already changed the run without attack, which 2
does not (to 1e-4 there; small networks clip a few honest neighbours in early
rounds). With no
neighbour beyond the radius, ``clipped`` equals ``mean`` to rounding. A peer
with a single neighbour cannot tell it from an outlier: its radius is that
neighbour's distance, i.e. no clipping. Clipping bounds a neighbour's pull per
round, not over rounds: a neighbour that pulls the same way every round moves
the peer as far as it likes (issue 29: -25.9 points on a ring with extreme
statistics).

``screened`` leaves neighbours out instead, and the share 1 / (d + 1) of one left out stays with the peer's own
statistics (it is not renormalized over the rest): without anything left out it is the mean to
rounding, so it runs under exact diffusion (the default algorithm), whose correction needs the mean on the
honest peers' messages. A neighbour is left out when it is farther from the peer's statistics than
``SCREEN_FACTOR`` x the lower median distance (gross outliers: ``extreme``, ``scale``), or when the receiver's test
on its own data refuses it (``admit``: ``crc.core.screening.better_than_chance``, a classifier worse than chance:
``permute``, ``noise``). Exact diffusion integrates whatever a neighbour adds round after round, so what is let in
must be honest-looking for good, not only bounded per round: ``dissensus`` (close to the receiver by construction)
is let in and breaks it (results/robust/byzantine.md).

The votes (``median``, ``trimmed``, ``geomedian``) treat the k = d + 1 statistics vectors of a peer's closed
neighbourhood (its own and its d neighbours', equally, whatever the mixing weights) as votes:

* ``median``: the coordinate-wise median. With b Byzantine vectors and k - b > b honest ones, every coordinate
  of the result lies between the smallest and the largest honest value of that coordinate (at least k - b > k / 2
  values are honest, so the middle of the sorted values is bracketed by honest ones). Breakdown per peer:
  floor(d / 2) Byzantine neighbours, the most an honest majority of the closed neighbourhood allows.
* ``trimmed``: the coordinate-wise mean after dropping the ``TRIM`` largest and the ``TRIM`` smallest values of
  each coordinate (fewer where k <= 2 TRIM: then it is the median). Within the honest range when at most
  min(TRIM, floor(d / 2)) neighbours are Byzantine; closer to the mean than the median without attack.
* ``geomedian``: the geometric median (``GEOMEDIAN_ITERATIONS`` Weiszfeld steps from the coordinate-wise median,
  distances scaled per coordinate by the honest-dominated median absolute deviation, so that the class counts
  and the sums of squares weigh alike). Breakdown point 1/2 as well, but its guarantee is a norm bound (the
  result lies within a multiple of the honest vectors' spread of them), not a coordinate-wise one.

A coordinate-wise rule does not keep the class-count total (a median of counts need not sum to m0), so the votes
rescale their result to the peer's own ESS: ``theta`` is invariant under scaling all statistics (every
parameter is a ratio of statistics, the count floor is relative to the ESS), so the rescaling changes only how
far the next local step moves it, which the ESS sets. A result without a positive count total is replaced by
the peer's own statistics.

``robust`` is ``ROBUST_RULE``, ``screened``: the rule recommended where Byzantine peers are feared. Measured in
results/robust/byzantine.md (penbased, one Byzantine peer, the default algorithm): it is the mean without attack
and stays within 1.9 points of the mean's clean run under extreme, scale, permute and noise on the complete graph
of 5, the ring of 6 with a chord and 4-regular graphs of 10; not under ``dissensus`` (0.20 to 0.24), which the
geometric median with the paper's averaging limits (-2.3, -7.8, -1.4 points from its own clean run, which is 2.2 to
2.9 points below the default's). The votes run the paper's averaging (``crc.core.acceleration.paper_only``): under exact
diffusion even the geometric median fell from 0.920 to 0.80 without attack on the ring (a vote is not the mean on
honest inputs, and the correction integrates the difference); the coordinate-wise median and trimmed mean combine
coordinates of different peers, which ``extreme`` exploits (-22 points on the ring).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Admit = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``admit(rows (E,), messages (E, size)) -> (E,) bool``: the receivers' test of what their neighbours sent
(``screened``; ``crc.core.screening``): edge e brings node ``rows[e]`` the statistics ``messages[e]``."""

AGGREGATIONS = ("mean", "clipped", "screened", "median", "trimmed", "geomedian", "robust")
VOTES = ("median", "trimmed", "geomedian")
"""The rules that take the closed neighbourhood as equal votes (coordinate-wise or geometric)."""
ROBUST_RULE = "screened"
"""What ``robust`` stands for (chosen in results/robust/byzantine.md)."""
NEEDS_PAPER = VOTES
"""The rules that choose the paper's averaging when no algorithm is named (``crc.core.acceleration.paper_only``)."""
AGGREGATION_HELP = ("mean: the closed-neighbourhood average of the paper; clipped: self-centred clipping "
                    "(ClippedGossip) to 2 x the median neighbour distance; screened: neighbours beyond that radius left out; "
                    "median: coordinate-wise median of the "
                    "closed neighbourhood (own statistics included); trimmed: coordinate-wise mean without the "
                    "largest and smallest value; geomedian: geometric median; robust: the recommended rule against "
                    f"Byzantine neighbours ({ROBUST_RULE}: holds wherever a peer's closed neighbourhood has an honest majority). "
                    "The votes (median, trimmed, geomedian) run the paper's averaging unless --algorithm is given")
CLIP_FACTOR = 2.0
"""tau_i = CLIP_FACTOR x the lower median of peer i's distances to its neighbours."""
SCREEN_FACTOR = 8.0
"""``screened``: neighbours farther than SCREEN_FACTOR x the lower median of their distances are left out (gross
outliers only). Smaller radii left honest neighbours out on the ring of 6 with a chord under exact diffusion, which
the correction does not forgive (penbased, clean, 3 repeats, naive Bayes' two local steps a round then: 0.887 with 4
against the mean's 0.916; with 8 the mean's on every graph of results/robust/byzantine.md, then and now);
``permute`` and ``noise``, which a radius lets in at times, are the test on the receiver's data's to refuse. 4 held
``dissensus`` on regular:4 (0.911 against 0.177 with 8, two steps), not on the ring or the complete graph."""
TRIM = 1
"""``trimmed``: values dropped at each end of every coordinate."""
GEOMEDIAN_ITERATIONS = 32
"""``geomedian``: Weiszfeld steps."""
EDGE_BLOCK_BYTES = 32 * 2**20
"""Bound on the (edges, size) differences held at once, and on a block of nodes' padded votes."""


def rule_of(rule: str) -> str:
    """The rule that runs for ``rule`` (``robust`` is ``ROBUST_RULE``); ValueError for an unknown one."""
    if rule not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {rule!r}")
    return ROBUST_RULE if rule == "robust" else rule


def count_index(model) -> np.ndarray | None:
    """The flat indices of ``model``'s class counts (one per row of its statistics table); None for a layout without
    counts (a vertical group's block statistics, which only the mean aggregates)."""
    layout = model.layout
    if "count" not in dict(layout.blocks):
        return None
    return np.arange(layout.size).reshape(layout.n_classes, layout.n_columns)[:, layout.columns("count")].ravel()


def clip_radii(rows: np.ndarray, distances: np.ndarray, n_nodes: int, factor: float = CLIP_FACTOR) -> np.ndarray:
    """Each node's radius (n_nodes,), ``factor`` x the lower median of its edges' ``distances`` (E,) (``rows`` (E,):
    the node of each edge); 0 for a node without edges."""
    order = np.lexsort((distances, rows))
    degree = np.bincount(rows, minlength=n_nodes)
    start = np.concatenate(([0], np.cumsum(degree)[:-1]))
    radii = np.zeros(n_nodes)
    has = degree > 0
    radii[has] = factor * distances[order[start[has] + (degree[has] - 1) // 2]]
    return radii


def clipped_average(own: np.ndarray, sent: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                    weights: np.ndarray, *, screen: bool = False, admit: Admit | None = None) -> np.ndarray:
    """Self-centred clipping of every node at once.

    Parameters
    ----------
    own : ndarray of shape (n, size)
        Each node's own statistics s_i.
    sent : ndarray of shape (n_sent, size)
        The statistics its neighbours sent (a row per sender, or per edge).
    rows, cols, weights : ndarrays of shape (E,)
        Edge e gives node ``rows[e]`` the statistics ``sent[cols[e]]`` with weight ``weights[e]`` (self excluded;
        a node's own weight is 1 - the sum of its edges' weights).

    Returns
    -------
    ndarray of shape (n, size): s_i + sum_e w_e clip(sent_e - s_i, tau_i); with ``screen``, s_i + sum_e w_e
    (sent_e - s_i) over the edges within tau_i that ``admit`` (if given) lets in: the share of one left out stays with
    s_i.
    """
    import scipy.sparse as sp  # on use: importing this module (crc --help does) loads no scipy

    own, sent = np.asarray(own, dtype=np.float64), np.asarray(sent, dtype=np.float64)
    rows, cols, weights = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), np.asarray(weights, dtype=np.float64)
    n, size = own.shape
    block = max(1, EDGE_BLOCK_BYTES // (8 * max(size, 1)))
    distances = np.empty(len(rows))
    for start in range(0, len(rows), block):
        part = slice(start, start + block)
        distances[part] = np.linalg.norm(sent[cols[part]] - own[rows[part]], axis=1)
    radii = clip_radii(rows, distances, n, SCREEN_FACTOR if screen else CLIP_FACTOR)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(distances > radii[rows], 0.0 if screen else radii[rows] / distances, 1.0)
    if screen and admit is not None:
        near = np.flatnonzero(scale > 0)
        scale[near[~admit(rows[near], sent[cols[near]])]] = 0.0
    factors = weights * scale
    moved = sp.csr_array((factors, (rows, cols)), shape=(n, len(sent))) @ sent
    return own + (moved - np.bincount(rows, weights=factors, minlength=n)[:, None] * own)


def _reduce_votes(values: np.ndarray, k: np.ndarray, rule: str) -> np.ndarray:
    """The vote of each node of a block: ``values`` (B, K, size) holds node b's k[b] votes first, NaN after them."""
    if rule == "geomedian":
        return _geometric_median(values, k)
    ordered = np.sort(values, axis=1)  # NaN last
    if rule == "median":
        low = np.take_along_axis(ordered, ((k - 1) // 2)[:, None, None], axis=1)[:, 0]
        high = np.take_along_axis(ordered, (k // 2)[:, None, None], axis=1)[:, 0]
        return 0.5 * low + 0.5 * high
    trim = np.minimum(TRIM, (k - 1) // 2)
    slot = np.arange(values.shape[1])[None, :]
    kept = (slot >= trim[:, None]) & (slot < (k - trim)[:, None])  # a sum over the kept slots only: no cancellation
    return np.where(kept[:, :, None], ordered, 0.0).sum(axis=1) / (k - 2 * trim)[:, None]


def _geometric_median(values: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Weiszfeld's iteration per node from the coordinate-wise median, in coordinates scaled by their median absolute
    deviation from it (set by the honest votes where they are the majority)."""
    valid = np.arange(values.shape[1])[None, :] < k[:, None]
    filled = np.where(valid[:, :, None], values, 0.0)
    centre = _reduce_votes(values, k, "median")
    deviation = np.abs(values - centre[:, None, :])
    scale = _reduce_votes(deviation, k, "median")
    scale = scale + 1e-12 * (1.0 + np.abs(centre))
    for _ in range(GEOMEDIAN_ITERATIONS):
        distance = np.sqrt((np.square((filled - centre[:, None, :]) / scale[:, None, :])).sum(axis=2))
        weight = np.where(valid, 1.0 / np.maximum(distance, 1e-12), 0.0)
        weight /= weight.sum(axis=1, keepdims=True)
        centre = np.einsum("bk,bks->bs", weight, filled)
    return centre


def vote_average(own: np.ndarray, sent: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, rule: str,
                 counts: np.ndarray) -> np.ndarray:
    """A vote (``VOTES``) of every node's closed neighbourhood, (n, size): node i's own statistics ``own[i]`` and
    ``sent[cols[e]]`` for each edge e with ``rows[e] == i``; rescaled to node i's ESS (the total of its own
    ``counts``, flat indices of the class counts), or its own statistics where the vote's count total is not
    positive."""
    own, sent = np.asarray(own, dtype=np.float64), np.asarray(sent, dtype=np.float64)
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    n, size = own.shape
    order = np.argsort(rows, kind="stable")
    rows, cols = rows[order], cols[order]
    degree = np.bincount(rows, minlength=n)
    start = np.concatenate(([0], np.cumsum(degree)))
    slot = np.arange(len(rows)) - start[rows] + 1
    width = int(degree.max(initial=0)) + 1
    block = max(1, EDGE_BLOCK_BYTES // (8 * max(size, 1) * width * (3 if rule == "geomedian" else 2)))
    out = np.empty_like(own)
    for first in range(0, n, block):
        last = min(n, first + block)
        values = np.full((last - first, width, size), np.nan)
        values[:, 0] = own[first:last]
        edges = slice(start[first], start[last])
        values[rows[edges] - first, slot[edges]] = sent[cols[edges]]
        out[first:last] = _reduce_votes(values, degree[first:last] + 1, rule)
    total, ess = out[:, counts].sum(axis=1), own[:, counts].sum(axis=1)
    good = total > 0
    out[good] *= (ess[good] / total[good])[:, None]
    out[~good] = own[~good]
    return out


def neighbourhood_average(mixing, own: np.ndarray, sent: np.ndarray | None = None, *, rule: str = "mean",
                          counts: np.ndarray | None = None, edges: tuple | None = None,
                          admit: Admit | None = None) -> np.ndarray:
    """The aggregation of every node of a network (n, size).

    ``mixing`` is the row-stochastic (n, n) closed-neighbourhood matrix; ``own`` (n, size) the nodes' statistics and
    ``sent`` (n, size) what each node sends (default: its own; Byzantine nodes send something else). A node's own
    term always uses ``own``. ``mean`` with nothing poisoned is exactly ``mixing @ own``. ``edges`` = (rows, cols,
    weights, messages): the off-diagonal entries of ``mixing`` and what each edge carries, (E, size), in place of
    ``sent`` (an attacker that sends each neighbour something else). The votes need ``counts``
    (``count_index``); ``screened`` takes the receivers' test ``admit``.
    """
    import scipy.sparse as sp  # on use: importing this module (crc --help does) loads no scipy

    rule = rule_of(rule)
    if rule == "mean" and sent is None and edges is None:
        return np.asarray(mixing @ own)
    matrix = sp.coo_array(mixing)
    off = matrix.row != matrix.col
    if edges is None:
        sent = own if sent is None else sent
        rows, cols, weights = matrix.row[off], matrix.col[off], matrix.data[off]
    else:
        rows, _, weights, sent = edges
        cols = np.arange(len(rows))
    if rule == "mean":
        diagonal = np.zeros(len(own))
        np.add.at(diagonal, matrix.row[~off], matrix.data[~off])
        return np.asarray(sp.csr_array((weights, (rows, cols)), shape=(len(own), len(sent))) @ sent) + diagonal[:, None] * own
    if rule in ("clipped", "screened"):
        return clipped_average(own, sent, rows, cols, weights, screen=rule == "screened", admit=admit)
    if counts is None:
        raise ValueError(f"the {rule} aggregation needs the class counts' indices")
    return vote_average(own, sent, rows, cols, rule=rule, counts=counts)


def peer_average(own: np.ndarray, received: list[np.ndarray], *, rule: str = "mean",
                 counts: np.ndarray | None = None, admit: Admit | None = None) -> np.ndarray:
    """One peer's aggregation (size,) of its own statistics and the ``received`` ones, all weighted 1 / (1 + k) (the
    votes need ``counts``, ``count_index``; ``screened`` takes the peer's test ``admit``, its rows all 0)."""
    rule = rule_of(rule)
    k = len(received)
    if rule == "mean" or not received:
        return (own + sum(received, np.zeros_like(own))) / (1 + k)
    rows, cols = np.zeros(k, dtype=np.int64), np.arange(k)
    if rule in ("clipped", "screened"):
        return clipped_average(own[None, :], np.array(received), rows, cols, np.full(k, 1.0 / (1 + k)),
                               screen=rule == "screened", admit=admit)[0]
    if counts is None:
        raise ValueError(f"the {rule} aggregation needs the class counts' indices")
    return vote_average(own[None, :], np.array(received), rows, cols, rule=rule, counts=counts)[0]
