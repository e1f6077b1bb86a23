"""Rules between options that ``crc simulate``, ``crc launch`` and ``crc node`` all obey, each stated once here.

"Secure" means two things in this project, kept apart by name: the *encrypted transport* (ZeroMQ CURVE: every
connection authenticated and encrypted; ``--insecure`` turns it off) and *secure aggregation*
(``--secure-aggregation``: a peer learns only the sum of its neighbours' statistics).
"""

from __future__ import annotations

from crc.core.errors import OptionConflict

MAX_ROUNDS = 100_000
"""Most communication rounds a run may take. A peer's metrics keep a figure or two per round, which its checkpoint
writes every round (1.6 MB at this many, within ``crc.nodes.checkpoint.MAX_SERIES_VALUES``), and a round number
beyond 19 digits would make a checkpoint header that the bounded JSON reader refuses, so that the peer could not
resume from its own checkpoint."""


def check_secure_aggregation(*, secure_aggregation: bool, aggregate: str, encrypted_transport: bool = True,
                             dp_noise: str = "local") -> None:
    """Raise OptionConflict if secure aggregation is combined with what it cannot work with: an aggregation other
    than the mean (the peer sees only a sum), or a transport without keys (the masks derive from the CURVE keys);
    or if distributed noise (``dp_noise``) comes without it (its shares add up only in the sums it unmasks).
    A simulation has no transport: ``encrypted_transport`` is then left at True."""
    if not secure_aggregation:
        if dp_noise == "distributed":
            raise OptionConflict("--dp-noise distributed needs --secure-aggregation: each peer adds only a share of the "
                                 "noise, which adds up to the full noise only in the sum a recipient unmasks")
        return
    if aggregate != "mean":
        raise OptionConflict("--secure-aggregation needs --aggregate mean: a peer then sees only the sum of its "
                             "neighbours' statistics")
    if not encrypted_transport:
        raise OptionConflict("--secure-aggregation derives its masks from the peers' CURVE keys, so it needs the "
                             "encrypted transport: drop --insecure")


SUM_SCOPES = ("neighbourhood", "network")
"""``--sum-over``: what a peer averages each round, its closed neighbourhood (the paper's CRC) or the whole network,
one secure sum of every peer relayed along a spanning tree of the graph (``crc.nodes.network_sum``)."""


def check_sum_over(sum_over: str, *, secure_aggregation: bool, dp_dropouts: int = 0, dynamic: bool = False,
                   loss: float = 0.0) -> None:
    """Raise OptionConflict if ``--sum-over network`` comes without what it needs or with what it cannot take: secure
    aggregation (the relays see only masked partial sums), a static graph (the roster and its tree are fixed), no
    tolerated dropouts (a round's sum is all or nothing) and no injected message loss."""
    if sum_over == "neighbourhood":
        return
    if sum_over not in SUM_SCOPES:
        raise OptionConflict(f"--sum-over must be one of {', '.join(SUM_SCOPES)}, got {sum_over!r}")
    if not secure_aggregation:
        raise OptionConflict("--sum-over network needs --secure-aggregation: the peers that relay the sum see only "
                             "masked partial sums")
    if dp_dropouts:
        raise OptionConflict("--sum-over network takes no --dp-dropouts: a round's network sum is all or nothing (a "
                             "peer missing, the round releases nothing), so no share is sized for dropouts")
    if dynamic:
        raise OptionConflict("--sum-over network needs a static --topology: the sum is relayed along a spanning tree "
                             "fixed for the run")
    if loss:
        raise OptionConflict("--sum-over network takes no --loss: a lost partial sum would void the round for every peer")


def check_release_every(*, release_every: int, rounds: int, exact_diffusion: bool = False, dp_noise: str = "local",
                        averaged: bool = False, vertical: bool = False) -> None:
    """Raise OptionConflict if ``--release-every`` is above the run's ``rounds`` (any K >= rounds is one release, in
    the first round; a huge K would go into the checkpoint's header, which then cannot be read back) or above 1 and
    combined with what its averaging-only rounds break:
    a ``vertical`` or hybrid group (whose peers run a driver of their own), exact diffusion (its correction resends
    the previous round's local step), distributed noise (whose shares are sized for a release every round) or the
    ``averaged`` classifier (its running average weighs rounds that take a local step)."""
    if release_every == 1:
        return
    if release_every > rounds:
        raise OptionConflict(f"--release-every {release_every} is more than --rounds {rounds}: a peer releases once, in "
                             f"the first round, with any K >= {rounds}; use --release-every {rounds}")
    if vertical:
        raise OptionConflict("--release-every is not available to a peer of a vertical or hybrid group")
    if exact_diffusion:
        raise OptionConflict("--release-every needs --no-exact-diffusion (or --algorithm paper): exact diffusion's "
                             "correction resends the previous round's local step, which a round that only averages "
                             "does not take")
    if dp_noise == "distributed":
        raise OptionConflict("--release-every is for --dp-noise local: distributed noise's shares are sized for a "
                             "release every round")
    if averaged:
        raise OptionConflict("--release-every needs --classifier local or aggregate: the averaged classifier's running "
                             "average weighs every round as one that takes a local step")
