"""A lost message replaced by the last statistics heard from its sender (``acceleration.keeps_last_heard``).

The closed-neighbourhood averaging keeps its loss-free weights; an edge whose message was lost this round carries
what arrived on it last (the receiver's own statistics if nothing has yet), as a real peer does
(``nodes/peer.py``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


class LastHeard:
    """What every directed edge (receiver, sender) of the network last carried."""

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=np.int64)  # receiver * n + sender, sorted
        self._stats = None  # (E, size), in the order of _keys

    def edges(self, graph, delivered, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The round's off-diagonal edges of the loss-free ``graph`` (n, n) as ``(rows, cols, weights, messages
        (E, size))`` for ``crc.core.aggregation.neighbourhood_average``: ``stats`` (n, size) where ``delivered``
        (the lossy mixing, n x n) has the edge, else the edge's last message. Remembers the round's messages."""
        matrix = sp.coo_array(graph)
        off = matrix.row != matrix.col
        rows, cols, weights = matrix.row[off], matrix.col[off], matrix.data[off]
        keys = rows.astype(np.int64) * len(stats) + cols
        messages = stats[rows].copy()
        if len(self._keys):
            at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
            known = self._keys[at] == keys
            messages[known] = self._stats[at[known]]
        arrived = np.asarray(sp.csr_array(delivered)[rows, cols]).ravel() != 0
        messages[arrived] = stats[cols[arrived]]
        order = np.argsort(keys)
        self._keys, self._stats = keys[order], messages[order]
        return rows, cols, weights, messages
