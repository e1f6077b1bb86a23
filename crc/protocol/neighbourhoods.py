"""What secure aggregation protects on a graph, and what it costs in messages (``crc.nodes.secure_aggregation``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def secure_aggregation_summary(mixing) -> dict:
    """From a closed-neighbourhood averaging matrix (n, n): the fraction of messages that reach their recipient
    masked (those to recipients with at least two neighbours), how many recipients have a single neighbour (whose
    messages to them cannot be hidden), and the messages of a round with and without secure aggregation (a
    protected recipient's neighbours each send masked statistics, receive its unmasking request, agree to its set,
    receive the others' vouches and reveal)."""
    degrees = np.diff(sp.csr_array(mixing).indptr) - 1
    protected = degrees >= 2
    messages = int(degrees.sum())
    return {"protected_fraction": float(degrees[protected].sum() / messages) if messages else 1.0,
            "single_neighbour_peers": int(np.sum(degrees == 1)),
            "messages_per_round": int(5 * degrees[protected].sum() + degrees[~protected].sum()),
            "plain_messages_per_round": messages}
