"""The simulator's network sum (``--sum-over network``): every peer averages the whole network each round.

Real peers (``crc.nodes.network_sum``) compute one secure sum of all peers' statistics a round, masked pairwise between
every two peers, relayed up a breadth-first spanning tree of the communication graph (each peer adds its children's
masked partial sums to its own masked statistics and sends that to its parent) and the total sent back down: every
peer ends the round with the same mean of all n peers, which is the complete graph's closed-neighbourhood averaging
whatever the graph. The simulator averages with that matrix and keeps the graph for what it decides: whether the sum
can be relayed at all (a connected graph) and what a round costs (2 (n - 1) frames, 2 x the tree's height hops).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

from crc.core.errors import CRCError
from crc.protocol.neighbourhoods import neighbour_counts, secure_aggregation_summary


def whole_network_mixing(n: int) -> sp.csr_array:
    """The (n, n) averaging matrix of a network sum: every entry 1 / n."""
    return sp.csr_array(np.full((n, n), 1.0 / n))


def check_relayable(mixing) -> None:
    """A CRCError unless the graph of a closed-neighbourhood averaging matrix (n, n) is connected: a graph in parts
    cannot relay a sum of all peers."""
    parts, _ = connected_components(sp.csr_array(mixing), directed=False)
    if parts > 1:
        raise CRCError(f"--sum-over network needs a connected graph, along which the sum is relayed; this one has {parts} "
                       "separate parts: use another --topology")


def tree_height(mixing) -> int:
    """The height (edges) of the network sum's spanning tree on the graph of a closed-neighbourhood averaging matrix
    (n, n), which must be connected (``check_relayable``): real peers root it at a centre of the graph
    (``crc.nodes.roster.tree_root``), so it is the graph's radius, the hops a partial sum takes up from the farthest
    peer, and the total back down."""
    check_relayable(mixing)
    return int(shortest_path(sp.csr_array(mixing), unweighted=True).max(axis=1).min())


def network_sum_summary(mixing, colluders: int = 0) -> dict:
    """What a network sum costs on the graph of a closed-neighbourhood averaging matrix (n, n): every frame is a masked
    partial sum (``protected_fraction`` 1), 2 (n - 1) frames a round along the spanning tree (each peer but the root
    sends its partial sum up, each but the root receives the total down) against the graph's plain neighbourhood
    messages, the height of the tree (``tree_height``; a round takes twice as many hops), and ``colluders`` t
    (``--colluders``: the shares of the n - 1 - t others carry the full noise)."""
    degrees = neighbour_counts(mixing)
    return {"sum_over": "network", "protected_fraction": 1.0, "messages_per_round": 2 * (len(degrees) - 1),
            "plain_messages_per_round": int(degrees.sum()), "tree_height": tree_height(mixing),
            "colluders": colluders}


def masking_summary(sum_over: str, mixing, colluders: int = 0) -> dict:
    """The results' ``secure_aggregation`` of a graph's closed-neighbourhood averaging matrix (n, n): the network sum's
    (``network_sum_summary``) or the neighbourhood sums' (``secure_aggregation_summary``)."""
    if sum_over == "network":
        return network_sum_summary(mixing, colluders)
    return secure_aggregation_summary(mixing, colluders)
