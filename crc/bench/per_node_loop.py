"""A straightforward CRC: a Python loop over nodes, each calling the model on its own data.

Kept beside the benchmark as the baseline the vectorized engine is measured
against (and checked equal to); the tests use it as the reference
implementation of Algorithm 2. It is not part of the library's API.
"""

from __future__ import annotations

import numpy as np

from crc.core.calibration import lrc
from crc.core.models.base import GenerativeModel, labelled_weights


def per_node_crc(model: GenerativeModel, local_phi: list, local_y: list, neighbours: list, *, ess: float, rounds: int,
                 iterations: int = 1) -> np.ndarray:
    """CRC with one model call per node and round.

    Parameters
    ----------
    local_phi, local_y : lists of length n of arrays (m_v, k) and (m_v,)
    neighbours : list of length n of lists of neighbour indices (not including the node)

    Returns
    -------
    ndarray of shape (n, size): the final statistics.
    """
    n = len(local_phi)
    weights = [labelled_weights(y, model.n_classes) for y in local_y]
    stats = [model.uniform(ess) for _ in range(n)]
    for _ in range(rounds):
        aggregated = [sum(stats[u] for u in [v, *neighbours[v]]) / (1 + len(neighbours[v])) for v in range(n)]
        stats = [lrc(model, aggregated[v], local_phi[v], weights[v], iterations=iterations) for v in range(n)]
    return np.array(stats)
