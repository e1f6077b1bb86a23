"""Collaborative risk-based calibration (Algorithm 2), all nodes at once.

The engine keeps every node's statistics in one array of shape (n, size). A
round is one sparse product with the closed-neighbourhood averaging matrix
followed by a batched LRC step (``crc.core.calibration.lrc``) over the nodes'
padded local data; there is no Python loop over nodes. Large networks run the
LRC step over blocks of nodes, so that its temporaries stay within
``BLOCK_BYTES`` whatever the number of nodes, and networks of at least
``MIN_THREAD_NODES`` nodes per thread cut it into a block per thread
(``crc.core.threads``; each node's step is its own, so the statistics do not
depend on the blocks).

Thread pools: every product of a round is per node and small (r x k by k x m),
so a round runs with BLAS limited to one thread (``crc.core.threads``); the
limit is taken once per round (once per run without a callback) rather than
around each product, since taking it costs about 10 us, and it is released for
the callback, whose evaluation products are large and gain from threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from crc.core import acceleration as accel
from crc.core.aggregation import count_index, neighbourhood_average
from crc.core.calibration import DEFAULT_LR
from crc.core.errors import CRCError
from crc.core.last_heard import LastHeard
from crc.core.models.base import GenerativeModel
from crc.core.privacy import is_release
from crc.core.screening import better_than_chance
from crc.core.threads import ordered_map, single_threaded_blas, threads

BLOCK_BYTES = 32 * 2**20
"""Bound on the LRC step's temporaries per block of nodes (a network whose step fits runs as one block)."""
MIN_THREAD_NODES = 64
"""Fewest nodes in a block cut for a thread: smaller blocks cost more in per-call overhead than a thread gives."""

Mixing = sp.spmatrix | sp.sparray | np.ndarray | Callable[[int], object]
"""A row-stochastic (n, n) averaging matrix, or a function of the round (1, 2, ...) returning one."""


@dataclass(frozen=True)
class LocalData:
    """Every node's local data, padded to a common size.

    Attributes
    ----------
    phi : ndarray of shape (n, m_max, k)
    y : ndarray of shape (n, m_max)
    mask : ndarray of shape (n, m_max)
        1.0 for a real instance, 0.0 for padding.
    """

    phi: np.ndarray
    y: np.ndarray
    mask: np.ndarray

    @classmethod
    def from_parts(cls, phi: np.ndarray, y: np.ndarray, parts: list[np.ndarray]) -> LocalData:
        """Gather rows of phi (m, k) and y (m,) for each node's index array."""
        if any(len(p) == 0 for p in parts):
            raise CRCError("every node needs at least one local instance")
        sizes = np.array([len(p) for p in parts])
        m_max = int(sizes.max())
        real = np.arange(m_max)[None, :] < sizes[:, None]
        index = np.zeros((len(parts), m_max), dtype=np.int64)
        index[real] = np.concatenate(parts)
        local_phi = np.asarray(phi, dtype=np.float64)[index]
        if not real.all():
            local_phi[~real] = 0.0
        return cls(phi=local_phi, y=y[index], mask=real.astype(np.float64))

    @property
    def sizes(self) -> np.ndarray:
        return self.mask.sum(axis=1)


def class_major_weights(y: np.ndarray, n_classes: int, mask: np.ndarray) -> np.ndarray:
    """``labelled_weights(y, n_classes, mask)`` (n, m, r) as a view of a class-major (r, n, m) array, the layout
    ``LinearFamilyModel.residual`` subtracts the posteriors from."""
    major = np.empty((n_classes,) + y.shape)
    for c in range(n_classes):
        np.multiply(y == c, mask, out=major[c])
    return np.moveaxis(major, 0, -1)


def default_ess(total_instances: int, n_nodes: int, lr: float = DEFAULT_LR) -> float:
    """Eq. 5 of the paper: ``m0 = m / (lr * n)``."""
    return total_instances / (lr * n_nodes)


def changed_neighbourhoods(before, now) -> np.ndarray | None:
    """The nodes (n,) whose closed neighbourhood in mixing ``now`` differs from that in ``before`` (both (n, n)
    matrices); None when nothing can have changed (no ``before``, or the same matrix)."""
    if before is None or before is now:
        return None
    return np.asarray(((sp.csr_array(now) != 0) != (sp.csr_array(before) != 0)).sum(axis=1)).ravel() > 0


class CRCEngine:
    """Runs CRC over a network.

    Parameters
    ----------
    model : GenerativeModel
    local : LocalData
    mixing : Mixing
        Closed-neighbourhood averaging (each node's row averages itself and its neighbours).
    ess : float
        Equivalent sample size ``m0`` of every node's statistics.
    iterations : int
        LRC steps per round.
    aggregation : str
        One of ``crc.core.aggregation.AGGREGATIONS``.
    sent : callable, optional
        ``sent(stats) -> (n, size)``: what the nodes send their neighbours (default: their statistics; an attack
        study poisons some rows, ``crc.core.attacks.byzantine_sender``).
    messages : callable, optional
        In place of ``sent``: ``messages(stats, rows, cols, weights) -> (E, size)``, what each edge of the round's
        mixing carries (``crc.core.attacks.byzantine_messages``: an attacker may send each neighbour something else).
    accept : callable, optional
        With ``messages``: ``accept(messages (k, size)) -> bool (k,)``, the receivers' check of the messages that
        differ from their senders' statistics (``crc.core.plausibility.plausible``); a refused message is left out
        and its receiver's remaining weights are rescaled to sum to 1 (on the closed-neighbourhood average, equal shares of
        what arrived, as a real peer averages).
    acceleration : Acceleration
        Memory, start and safeguard (``crc.core.acceleration``); the default, ``PAPER``, is the paper's algorithm.
    release : callable, optional
        ``release(stats) -> stats``, both (n, size): what every node releases and continues from after its local
        step (differential privacy adds noise here, ``crc.core.privacy``); default: the statistics themselves.
    noise : callable, optional
        ``noise() -> (n, size)``: added to every node's aggregate each round (distributed privacy noise,
        ``crc.core.distributed_noise``).
    graph : Mixing, optional
        The loss-free mixing, when ``mixing`` drops messages: exact diffusion restarts a node whose neighbourhood
        in it changed since the previous round (a new graph), not one that lost a message. Default: ``mixing``.
    last_heard : bool
        With ``graph``: average on ``graph``'s weights, a lost message replaced by the last statistics heard on its
        edge (``crc.core.last_heard``; ``crc.core.acceleration.keeps_last_heard`` says when), not with equal shares of
        what arrived (``mixing``, which then says only which messages arrived). Not with ``messages``.
    release_every : int
        k: the local step and ``release`` in rounds 1, k + 1, 2k + 1, ... only; in the others a node's statistics are
        its aggregate of the public statistics (``crc.core.privacy``, "Fewer releases"), its memory unchanged.
    """

    def __init__(self, model: GenerativeModel, local: LocalData, mixing: Mixing, *, ess: float, iterations: int = 1,
                 aggregation: str = "mean", sent: Callable[[np.ndarray], np.ndarray] | None = None,
                 messages: Callable[..., np.ndarray] | None = None, accept: Callable[[np.ndarray], np.ndarray] | None = None,
                 acceleration: accel.Acceleration = accel.PAPER,
                 release: Callable[[np.ndarray], np.ndarray] | None = None,
                 noise: Callable[[], np.ndarray] | None = None, graph: Mixing | None = None, last_heard: bool = False,
                 release_every: int = 1):
        if not ess > 0:
            raise CRCError(f"equivalent sample size must be positive, got {ess}")
        if iterations < 1 or release_every < 1:
            raise CRCError(f"local iterations and release_every must be at least 1, got {iterations}, {release_every}")
        if release_every > 1 and (acceleration.exact_diffusion or noise is not None or acceleration.keeps_average):
            raise CRCError("averaging-only rounds are not taken with exact diffusion, distributed noise or the averaged "
                           "classifier")
        self.model, self.local, self.iterations, self.ess = model, local, iterations, float(ess)
        self.release_every = release_every
        self._mixing = mixing
        self._graph = mixing if graph is None else graph
        self._last_graph = None  # the graph of the last round, when exact diffusion watches it for changes
        self._round_graph = None  # (round, graph): a schedule's graph of a round is asked for once
        if last_heard and messages is not None:
            raise CRCError("the last heard statistics replace lost messages of honest senders only")
        self._last_heard = LastHeard() if last_heard and graph is not None else None
        self.aggregation, self._sent, self._release, self._noise = aggregation, sent, release, noise
        self._messages, self._accept, self._counts = messages, accept, count_index(model)
        self.refused = 0  # messages the receivers' check left out, over all rounds
        self.n_nodes = local.phi.shape[0]
        self.weights = class_major_weights(local.y, model.n_classes, local.mask)
        # Posteriors need masking only where padding has non-zero features: a zero
        # feature row adds nothing to s(X, W - P) whatever P is (from_parts zeroes them).
        padded = local.mask == 0
        self._padding = local.mask if padded.any() and np.any(local.phi[padded]) else None
        self.acceleration, self.memory = acceleration, None
        self.stats = accel.start_statistics(model, acceleration, self.ess, local.phi, local.y, local.mask)
        self.aggregated = None  # the last round's aggregate, when kept (``Acceleration.keeps_aggregate``)
        self.average = None  # the running average of the statistics, when kept (``Acceleration.keeps_average``)
        self.round = 0
        per_node = 8 * (6 * model.size + 4 * model.n_classes * local.phi.shape[1])  # theta, eta, scores, residual
        self._block = max(1, min(self.n_nodes, BLOCK_BYTES // per_node))

    def mixing(self, round_: int):
        matrix = self._mixing(round_) if callable(self._mixing) else self._mixing
        if matrix.shape != (self.n_nodes, self.n_nodes):
            raise CRCError(f"mixing matrix has shape {matrix.shape}, expected {(self.n_nodes, self.n_nodes)}")
        return matrix

    def aggregate(self) -> np.ndarray:
        """Closed-neighbourhood averages of the current statistics for the next round, (n, size)."""
        mixing = self.mixing(self.round + 1)
        if self._last_heard is not None:
            graph = self._graph_at(self.round + 1)
            return neighbourhood_average(graph, self.stats, rule=self.aggregation, counts=self._counts,
                                         edges=self._last_heard.edges(graph, mixing, self.stats), admit=self._admit)
        if self._messages is None:
            sent = None if self._sent is None else self._sent(self.stats)
            return neighbourhood_average(mixing, self.stats, sent, rule=self.aggregation, counts=self._counts,
                                         admit=self._admit)
        matrix = sp.coo_array(mixing)
        off = matrix.row != matrix.col
        rows, cols, weights = matrix.row[off], matrix.col[off], matrix.data[off]
        messages = self._messages(self.stats, rows, cols, weights)
        if self._accept is not None:
            changed = np.flatnonzero(np.any(messages != self.stats[cols], axis=1))
            refused = changed[~self._accept(messages[changed])]
            if len(refused):
                self.refused += len(refused)
                keep = np.ones(len(rows), dtype=bool)
                keep[refused] = False
                rows, cols, weights, messages = rows[keep], cols[keep], weights[keep], messages[keep]
                diagonal = np.zeros(self.n_nodes)
                np.add.at(diagonal, matrix.row[~off], matrix.data[~off])
                total = diagonal + np.bincount(rows, weights=weights, minlength=self.n_nodes)
                weights = weights / total[rows]
                mixing = sp.coo_array((np.concatenate([diagonal / total, weights]),
                                       (np.concatenate([np.arange(self.n_nodes), rows]),
                                        np.concatenate([np.arange(self.n_nodes), cols]))), shape=matrix.shape)
        return neighbourhood_average(mixing, self.stats, rule=self.aggregation, counts=self._counts,
                                     edges=(rows, cols, weights, messages), admit=self._admit)

    def _admit(self, rows: np.ndarray, messages: np.ndarray) -> np.ndarray:
        """``screened``'s test of each received message (E, size) on its receiver's (``rows`` (E,)) local data, in
        blocks of edges whose copies of the receivers' data stay within BLOCK_BYTES."""
        per_edge = 8 * (self.local.phi[0].size + 2 * self.weights[0].size)
        block = max(1, BLOCK_BYTES // per_edge)
        admitted = np.zeros(len(rows), dtype=bool)
        for start in range(0, len(rows), block):
            part = slice(start, start + block)
            admitted[part] = better_than_chance(self.model, messages[part], self.local.phi[rows[part]], self.weights[rows[part]])
        return admitted

    def _restarts(self) -> np.ndarray | None:
        """Exact diffusion: the nodes (n,) whose closed neighbourhood in the coming round differs from the last
        round's (None: none can). Each round's graph is asked for once, so a schedule's cached graph is not redrawn."""
        if not self.acceleration.exact_diffusion or not callable(self._graph):
            return None
        graph = self._graph_at(self.round + 1)
        before, self._last_graph = self._last_graph, graph
        return changed_neighbourhoods(before, graph)

    def _graph_at(self, round_: int):
        """The loss-free graph of round ``round_``, asked of ``graph`` once per round."""
        if not callable(self._graph):
            return self._graph
        if self._round_graph is None or self._round_graph[0] != round_:
            self._round_graph = (round_, self._graph(round_))
        return self._round_graph[1]

    @property
    def classifiers(self) -> np.ndarray:
        """Every node's classifier statistics (n, size): its statistics, its last aggregate, or its statistics with
        the category counts of their running average (``crc.core.acceleration.classifier_statistics``)."""
        return accel.classifier_statistics(self.model, self.acceleration, self.stats, self.aggregated, self.average)

    def step(self) -> np.ndarray:
        """One round: aggregate, then LRC. Returns the aggregated statistics of the round."""
        with single_threaded_blas():
            return self._step(keep_aggregated=True)

    def _step(self, *, keep_aggregated: bool) -> np.ndarray:
        # The memory and the aggregate classifier hold the aggregate itself (accel.step does not copy it).
        keep_aggregated = keep_aggregated or self.acceleration.keeps_aggregate
        aggregated = self.aggregate()
        if is_release(self.round, self.release_every):
            aggregated = self._calibrate(aggregated, keep_aggregated)
        else:  # a round that only averages public statistics: no local step, the memory as it is
            self.stats = aggregated
        if self.acceleration.keeps_aggregate:
            self.aggregated = aggregated
        self.round += 1
        if self.acceleration.keeps_average:
            self.average = accel.running_average(self.average, self.stats, self.round)
        return aggregated

    def _calibrate(self, aggregated: np.ndarray, keep_aggregated: bool) -> np.ndarray:
        """The local steps of every node from the round's ``aggregated`` statistics (n, size), then its release: sets
        ``stats`` and ``memory``; returns the aggregate as the step saw it (with distributed noise, the noisy one)."""
        keeps_memory, exact = self.acceleration.keeps_memory, self.acceleration.exact_diffusion
        if self._noise is not None:
            aggregated = aggregated + self._noise()
        restart = self._restarts()
        blocks = self._blocks()
        if len(blocks) == 1:
            self.stats, self.memory = self._lrc(aggregated, slice(None), restart)
        else:
            # A block's LRC reads only its own aggregated rows, so without a caller
            # for them its results may go back into those rows: no second (n, size)
            # array to fault in every round. Blocks write disjoint rows, so they may
            # run on threads.
            stats = np.empty_like(aggregated) if keep_aggregated else aggregated
            reset = np.zeros(self.n_nodes, dtype=bool) if keeps_memory else None
            previous = np.empty_like(aggregated) if exact else aggregated  # momentum's memory is the aggregate

            def calibrate(block: slice) -> None:
                stats[block], block_memory = self._lrc(aggregated[block], block, restart)
                if block_memory is not None:
                    reset[block] = block_memory.reset
                    if exact:
                        previous[block] = block_memory.previous

            ordered_map(calibrate, blocks)
            self.stats, self.memory = stats, None if reset is None else accel.Memory(previous, reset)
        if self._release is not None:
            self.stats = self._release(self.stats)
        return aggregated

    def _blocks(self) -> list[slice]:
        """The blocks of nodes a round's LRC step runs over: within BLOCK_BYTES, and one per thread
        (``crc.core.threads``) when that leaves each at least MIN_THREAD_NODES nodes."""
        size, count = self._block, threads()
        if self.n_nodes // count >= MIN_THREAD_NODES:
            size = min(size, -(-self.n_nodes // count))
        return [slice(start, start + size) for start in range(0, self.n_nodes, size)]

    def _lrc(self, aggregated: np.ndarray, block: slice, restart: np.ndarray | None) -> tuple[np.ndarray, accel.Memory | None]:
        mask = None if self._padding is None else self._padding[block]
        memory = None if self.memory is None else accel.Memory(self.memory.previous[block], self.memory.reset[block])
        return accel.step(self.model, self.acceleration, aggregated, memory, self.local.phi[block], self.weights[block],
                          mask, iterations=self.iterations, own=self.stats[block],
                          restart=None if restart is None else restart[block])

    def run(self, rounds: int, callback: Callable[[int, np.ndarray], None] | None = None) -> np.ndarray:
        """Run ``rounds`` rounds; ``callback(round, classifiers)`` after each. Returns the final (n, size)
        ``classifiers``.

        BLAS is limited to one thread during the rounds, not during the callbacks.
        Every round's statistics are a new array (a callback may keep them).
        """
        if callback is None:
            with single_threaded_blas():
                for _ in range(rounds):
                    self._step(keep_aggregated=False)
            return self.classifiers
        for _ in range(rounds):
            with single_threaded_blas():
                self._step(keep_aggregated=False)
            callback(self.round, self.classifiers)
        return self.classifiers
