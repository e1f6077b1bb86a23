"""A straightforward CRC: a Python loop over nodes, each calling the model on its own data.

Kept beside the benchmark as the baseline the vectorized engine is measured
against (and checked equal to); it is not part of the library.
"""

from __future__ import annotations

import numpy as np

from crc.core.models.base import GenerativeModel, one_hot


def per_node_crc(model: GenerativeModel, local_phi: list, local_y: list, neighbours: list, *, ess: float, rounds: int, iterations: int = 1) -> np.ndarray:
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
    targets = [model.statistics(phi, one_hot(y, model.n_classes)) if not model.latent else None
               for phi, y in zip(local_phi, local_y)]
    stats = [model.uniform(ess) for _ in range(n)]
    for _ in range(rounds):
        aggregated = [sum(stats[u] for u in [v] + list(neighbours[v])) / (1 + len(neighbours[v])) for v in range(n)]
        updated = []
        for v in range(n):
            s = aggregated[v]
            for _ in range(iterations):
                theta = model.theta(s)
                target = targets[v] if targets[v] is not None else \
                    model.labelled(theta, local_phi[v], one_hot(local_y[v], model.n_classes))
                s = s + target - model.expected_statistics(theta, local_phi[v])
            updated.append(s)
        stats = updated
    return np.array(stats)
