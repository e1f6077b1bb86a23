"""What secure aggregation protects on a graph, and what it costs in messages (``crc.nodes.secure_aggregation``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def fewest_survivors(contributors: int, colluders: int | None = None) -> int:
    """The fewest of a recipient's ``contributors`` neighbours an unmasking request may name for them to answer: a
    strict majority (at least two), so that no two disjoint request sets are both answered (a recipient that shows
    {a, b} to a and b and {c, d} to c and d would unmask two sums, and with a colluder in each pair two peers'
    statistics; two majorities share a member, which commits to one set).

    With distributed noise (``colluders`` given, ``--dp-colluders`` t): every one of them. The shares are sized so
    that those of all members but t add up to σ², the t being members that collude with the recipient (their shares
    known to it). A set that left anyone out would hold t colluders and fewer honest shares than that: a recipient
    that claims an honest member dropped, with one colluder among three, would unmask a member's statistics under
    σ²/2, and two such sets sharing the colluder two members' (measured to be answered before)."""
    if colluders is not None:
        return contributors
    return max(2, contributors // 2 + 1)


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
