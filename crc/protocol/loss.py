"""Message loss in the simulator: each round, each message is lost independently with probability p.

A peer then averages its own statistics with those that arrived, exactly as a real peer does once its
round timeout is over; the draws are ``crc.core.loss``'s, so a real peer told its loss seed
(``crc node --loss``) loses the same messages. Under exact diffusion from a start that is not uniform the peers
average on the loss-free weights instead, a lost message replaced by the last heard (``crc.core.last_heard``);
this mixing then only says which messages arrived.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from crc.core.loss import dropped, loss_seed
from crc.protocol.neighbourhoods import fewest_survivors

__all__ = ["loss_seed", "lossy_mixing"]


def lossy_mixing(mixing, p: float, seeds: list[int], *, secure_aggregation: bool = False,
                 colluders: int = 0) -> Callable[[int], sp.csr_array]:
    """The mixing of every round (1, 2, ...) after losses: row ``v`` averages ``v`` and the neighbours whose
    message reached it, with equal weights. ``mixing`` is the loss-free closed-neighbourhood averaging (a
    matrix or a function of the round); ``seeds[v]`` is node ``v``'s loss seed. With
    ``secure_aggregation``, a node with two or more neighbours of which fewer messages arrived than a request may
    name (a majority and at least two, more with ``colluders``: ``fewest_survivors``) unmasks nothing and keeps its
    own statistics, as a real peer does (``crc.nodes.secure_aggregation``)."""

    def at(round_: int) -> sp.csr_array:
        base = sp.csr_array(mixing(round_) if callable(mixing) else mixing)
        base.sort_indices()
        rows, cols, vals = [], [], []
        for v in range(base.shape[0]):
            neighbours = base.indices[base.indptr[v]:base.indptr[v + 1]]
            neighbours = neighbours[neighbours != v]
            kept = np.append(neighbours[~dropped(seeds[v], round_, len(neighbours), p)], v)
            if (secure_aggregation and len(neighbours) >= 2
                    and len(kept) - 1 < fewest_survivors(len(neighbours), colluders=colluders)):
                kept = np.array([v])
            rows.append(np.full(len(kept), v))
            cols.append(kept)
            vals.append(np.full(len(kept), 1.0 / len(kept)))
        return sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=base.shape)

    return at
