"""What secure aggregation protects on a graph, and what it costs in messages (``crc.nodes.secure_aggregation``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def fewest_survivors(contributors: int, dropouts: int | None = None) -> int:
    """The fewest of a recipient's ``contributors`` neighbours an unmasking request may name for them to answer: a
    strict majority (at least two), so that no two disjoint request sets are both answered (a recipient that shows
    {a, b} to a and b and {c, d} to c and d would unmask two sums, and with a colluder in each pair two peers'
    statistics; two majorities share a member, which commits to one set).

    With distributed noise (``dropouts`` given, ``--dp-dropouts`` d): besides, all but d of them. The shares are
    sized so that those of all members but t colluders and d dropouts add up to σ² (``share_variance``); the
    recipient may be the one that claims members dropped, so the d it leaves out are counted apart from the t
    colluders its set may hold. A set that left out more (with d = 0, anyone) would carry less noise than the
    accountant counts: with one colluder among three and no dropout allowed for, a set {x, a} unmasked a's
    statistics under σ²/2, and two such sets sharing the colluder two members' (measured to be answered once
    dropouts were taken from the colluders' allowance)."""
    majority = max(2, contributors // 2 + 1)
    return majority if dropouts is None else max(majority, contributors - dropouts)


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
