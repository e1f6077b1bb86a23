"""What secure aggregation protects on a graph, and what it costs in messages (``crc.nodes.secure_aggregation``)."""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError


def fewest_survivors(contributors: int, dropouts: int | None = None, colluders: int = 0) -> int:
    """The fewest of a recipient's ``contributors`` neighbours an unmasking request may name for them to answer: more
    than (contributors + t) / 2 and at least t + 2, t = ``colluders`` (``--colluders``, members that may collude with
    the recipient and vouch for any set). Two answered sets then share t + 1 members, at least one of them honest,
    which commits to one set (with t = 0: a strict majority; a recipient that shows {a, b} to a and b and {c, d} to c
    and d would unmask two sums), and every unmasked sum holds two honest members (a colluder x among three would
    otherwise get {x, a} answered: a's statistics alone).

    With distributed noise (``dropouts`` given, ``--dp-dropouts`` d): besides, all but d of them. The shares are
    sized so that those of all members but t colluders and d dropouts add up to σ² (``share_variance``); the
    recipient may be the one that claims members dropped, so the d it leaves out are counted apart from the t
    colluders its set may hold. A set that left out more (with d = 0, anyone) would carry less noise than the
    accountant counts: with one colluder among three and no dropout allowed for, a set {x, a} unmasked a's
    statistics under σ²/2, and two such sets sharing the colluder two members' (measured to be answered once
    dropouts were taken from the colluders' allowance)."""
    majority = max(2, (contributors + colluders) // 2 + 1, colluders + 2)
    return majority if dropouts is None else max(majority, contributors - dropouts)


def droppable(contributors: int, colluders: int = 0) -> int:
    """How many of a recipient's ``contributors`` its sum may go without: those a request need not name
    (``fewest_survivors``), the most ``--dp-dropouts`` can use there."""
    return contributors - fewest_survivors(contributors, colluders=colluders)


def neighbour_counts(mixing) -> np.ndarray:
    """Each peer's number of neighbours (n,) in a closed-neighbourhood averaging matrix (n, n)."""
    import scipy.sparse as sp  # on use: importing this module (crc --help does) loads no scipy

    return np.diff(sp.csr_array(mixing).indptr) - 1


def threshold_for(contributors: int, colluders: int = 0) -> int:
    """Shares needed to rebuild a member's secret (its self-mask seed, a pairwise seed): a majority of the other
    ``contributors - 1``, and more than the ``colluders`` t, who hold one share each of every other member's secrets
    (with t at the threshold they would rebuild an honest member's pairwise seeds and strip its words to its own
    statistics: with distributed noise, those carry only its share of the noise)."""
    return max((contributors - 1) // 2 + 1, colluders + 1)


def check_protectable(contributors: int, colluders: int) -> None:
    """A CRCError unless a neighbourhood of ``contributors`` (>= 2) can be unmasked with ``colluders`` t: it needs
    t + 2 of them (two honest members in every sum, a threshold of t + 1 among the others)."""
    if contributors < colluders + 2:
        raise CRCError(f"--colluders {colluders}: a peer with {contributors} neighbours can never have their sum "
                       f"unmasked, which needs at least {colluders + 2} (two honest members in every sum); use a "
                       "denser --topology or fewer --colluders")


def usable_dropouts(degrees: np.ndarray, colluders: int = 0) -> int:
    """The largest ``--dp-dropouts`` d a graph takes, by its peers' numbers of neighbours ``degrees`` (n,): the most
    members some sum may go without (``droppable``, among the recipients with two or more neighbours), and no more
    than every closed neighbourhood, a single neighbour's included, can spare while it still holds the recipient,
    t = ``colluders``, d dropouts and one honest member (``share_variance``); 0 with none."""
    most = max([0, *(droppable(k, colluders) for k in set(degrees[degrees >= 2].tolist()))])
    return max(0, min(most, int(degrees.min()) - 1 - colluders))


def check_graph_protectable(mixing, colluders: int, dropouts: int = 0) -> None:
    """``check_protectable`` for every recipient of a closed-neighbourhood averaging matrix (n, n) with two or more
    neighbours; with ``dropouts`` d (``--dp-dropouts``), a CRCError unless d is at most ``usable_dropouts``: some
    recipient's sum may go without d members (a request names ``fewest_survivors`` of them; else the shares, sized for
    d, would only add noise) and every closed neighbourhood has the members ``share_variance`` needs for d."""
    degrees = neighbour_counts(mixing)
    protected = degrees[degrees >= 2]
    if colluders and protected.size:
        check_protectable(int(protected.min()), colluders)
    usable = usable_dropouts(degrees, colluders)
    if dropouts > usable:
        fewer = f"--dp-dropouts {usable} or fewer" if usable else "no --dp-dropouts"
        raise CRCError(f"--dp-dropouts {dropouts}: no sum on this graph may go without more than {usable} member(s) "
                       f"(a request names more than (neighbours + --colluders) / 2 of a peer's neighbours, and at "
                       f"least {colluders + 2}; every closed neighbourhood, the smallest here of "
                       f"{int(degrees.min()) + 1} peers, must keep the recipient, the colluders and an honest "
                       f"member besides the dropouts); use a denser --topology or {fewer}")


def secure_aggregation_summary(mixing, colluders: int = 0) -> dict:
    """From a closed-neighbourhood averaging matrix (n, n): the fraction of messages that reach their recipient
    masked (those to recipients with at least two neighbours), how many recipients have a single neighbour (whose
    messages to them cannot be hidden), and the messages of a round with and without secure aggregation (a
    protected recipient's neighbours each send masked statistics, receive its unmasking request, agree to its set,
    receive the others' vouches and reveal). Against ``colluders`` t (``--colluders``): how many recipients have two
    to t + 1 neighbours, too few to be unmasked (``check_protectable``: a run refuses such a graph), and the most
    members a sum may go without (``usable_dropouts``, the largest ``--dp-dropouts`` the graph takes)."""
    degrees = neighbour_counts(mixing)
    protected = degrees >= 2
    messages = int(degrees.sum())
    return {"protected_fraction": float(degrees[protected].sum() / messages) if messages else 1.0,
            "single_neighbour_peers": int(np.sum(degrees == 1)),
            "messages_per_round": int(5 * degrees[protected].sum() + degrees[~protected].sum()),
            "plain_messages_per_round": messages,
            "colluders": colluders,
            "too_few_for_colluders": int(np.sum(protected & (degrees < colluders + 2))),
            "usable_dropouts": usable_dropouts(degrees, colluders)}
