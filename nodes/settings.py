"""What a peer is told: its settings (address, neighbours, rounds, timeouts, options) and its secure-aggregation keys.

Two kinds of "secure" meet in a peer and are kept apart by name: the *encrypted transport* (CURVE: ``known_keys``,
``crc.nodes.keys.PeerKeys``), which authenticates and encrypts every connection, and *secure aggregation*
(``secure_aggregation``, ``SecureAggregationKeys``), which masks a peer's statistics so that a neighbour learns
only a sum. The second derives its masks from the keys of the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crc.core.acceleration import PAPER, Acceleration
from crc.core.aggregation import AGGREGATIONS
from crc.core.attacks import PEER_ATTACKS
from crc.core.errors import OptionConflict
from crc.core.privacy import Privacy
from crc.nodes.roster import Roster
from crc.nodes.wire import DEFAULT_RUN


@dataclass(frozen=True)
class SecureAggregationKeys:
    """What a peer needs for secure aggregation: its z85 CURVE secret key and, for each neighbour u, the z85 public
    key of every member of u's neighbourhood N(u) (this peer included); none for a network sum
    (``PeerSettings.network``), whose members and keys are the roster's."""

    secret_key: str
    neighbourhoods: Mapping[str, Mapping[str, str]]

    def closed_neighbourhoods(self, bind: str, peers) -> dict[str, frozenset[str]]:
        """The closed neighbourhood (members' addresses) of every recipient of the statistics of the peer ``bind``
        with neighbours ``peers``: each neighbour's, and its own."""
        hoods = {u: frozenset(self.neighbourhoods[u]) | {u} for u in peers}
        return {**hoods, bind: frozenset(peers) | {bind}}


@dataclass(frozen=True)
class PeerSettings:
    """Everything a peer is told: who it is, whom it talks to, how long and how often it waits.

    Each default below is the only one: ``crc node``, ``crc launch`` and the launcher use these.
    """

    bind: str
    """Address the peer listens on; also its name on the wire."""
    peers: tuple[str, ...]
    """Bind addresses of the neighbours."""
    rounds: int = 64
    """Rounds of the run, the same on every peer."""
    iters: int = 1
    """Local RC iterations per round."""
    timeout_s: float = 10.0
    """Seconds a round waits for the neighbours' statistics (longer only for a neighbour that says it is still
    waiting itself, ``crc.nodes.liveness``)."""
    first_round_timeout_s: float = 60.0
    """Seconds the first round of a fresh run may wait, from the peer's start (or ``start_at``): the peers' start-up.
    It governs that round only; a neighbour whose own neighbour starts late says it is waiting, and later rounds
    wait for it (at most this long beyond their timeout). A peer resumed from a checkpoint joins running peers and
    uses ``timeout_s`` only."""
    start_at: float | None = None
    """Wall-clock time (seconds since the epoch) at which a fresh run sends its first statistics; until then the
    peer is listening and keeps what arrives. None, or a time already past: at once. Peers started one after
    another but told the same time begin their rounds together, so the start-up does not ripple through the
    first rounds. A resumed peer ignores it."""
    queue_messages: int = 256
    """Frames (rounds of statistics) ZeroMQ may queue for each neighbour (outgoing; the inbox keeps a few per connection)."""
    final_linger_ms: int = 1000
    """Milliseconds queued statistics may take to leave after the last round (a stop closes at once)."""
    poll_slice_s: float = 0.1
    """Longest single wait for frames, in seconds: a stop request is seen within this time."""
    run: str = DEFAULT_RUN
    """Run id: peers of other runs are ignored. Secure aggregation derives its pairwise masks from it
    (``check_masking_run``)."""
    checkpoint_dir: str | None = None
    """Directory of the per-round checkpoint (none: no checkpoint, no resume)."""
    aggregate: str = "mean"
    """How neighbours' statistics are combined with the peer's own (``crc.core.aggregation``)."""
    window_rounds: int = 8
    """Early frames are kept for their round up to this many rounds after the awaited one; of a neighbour's frames
    further ahead only the latest is kept, so that buffered state stays bounded (neighbours x (window + 2) frames).
    A peer that started late or was restarted catches up through the buffered rounds, and skips ahead to its
    neighbours' round where nothing more will come for the rounds between."""
    down_after: int = 3
    """Consecutive rounds without anything from a neighbour (no statistics of any round, no notice) before it is
    marked down and no longer waited for, whatever the round."""
    attack: str | None = None
    """Research only: send poisoned statistics of this kind (``crc.core.attacks``) instead of the peer's own."""
    known_keys: Mapping[str, str] | None = None
    """Encrypted transport: each neighbour's CURVE public key (address -> z85); a frame must come over a connection
    authenticated with the key of the neighbour it claims to be from. None: a plaintext peer, whose frames carry no
    key."""
    acceleration: Acceleration = PAPER
    """Memory, start, safeguard, classifier and exact diffusion (``crc.core.acceleration``); the memory is checkpointed with the
    statistics, so a resumed peer continues exactly."""
    loss: float = 0.0
    """Injected message loss: each neighbour's message of a round is dropped with this probability (``crc.core.loss``)."""
    loss_seed: int = 0
    """Seed of the injected loss (the simulator's ``loss_seed`` for this node, so that both drop the same messages)."""
    privacy: Privacy | None = None
    """Differential privacy (``crc.core.privacy``): every round's statistics are released with discrete Gaussian
    noise of this plan's sigma (``crc.nodes.release``), and the peer continues from the released values. None: no
    noise."""
    secure_aggregation: SecureAggregationKeys | None = None
    """Secure aggregation (``crc.nodes.secure_session``): this peer's secret key and every neighbour's
    neighbourhood with its members' public keys. None: statistics travel as they are."""
    network: Roster | None = None
    """``--sum-over network``: the roster of the run (every peer, its key, the graph), along whose spanning tree one
    secure sum of all peers is relayed each round (``crc.nodes.network_sum``). None: each peer averages its closed
    neighbourhood."""
    colluders: int = 0
    """Secure aggregation: members besides a recipient that may collude with it (``--colluders``), which sets the
    request sets a member answers and the shares' threshold (``crc.protocol.neighbourhoods``)."""
    release_every: int = 1
    """k: the local step and its release in rounds 1, k + 1, 2k + 1, ... only; in the others the peer's statistics
    are the average of its closed neighbourhood's public statistics (``crc.core.privacy``, "Fewer releases")."""

    def closed_neighbourhoods(self) -> dict[str, frozenset[str]] | None:
        """The closed neighbourhood (members' addresses) of every recipient of this peer's statistics, its own
        included, from the secure-aggregation keys; None without secure aggregation."""
        if self.secure_aggregation is None:
            return None
        if self.network is not None:  # one sum of every peer, released to all: this peer's share goes into it
            return {self.bind: frozenset(self.network.keys)}
        return self.secure_aggregation.closed_neighbourhoods(self.bind, self.peers)

    def __post_init__(self):
        if self.bind in self.peers:
            raise ValueError(f"{self.bind} lists itself among its peers")
        if min(self.timeout_s, self.first_round_timeout_s, self.poll_slice_s) <= 0:
            raise ValueError("timeouts and the poll slice must be positive")
        if min(self.rounds, self.iters, self.queue_messages, self.release_every) < 1 or self.final_linger_ms < 0:
            raise ValueError("rounds, iterations, the queue length and release_every must be at least 1, the linger "
                             "at least 0")
        if self.window_rounds < 0 or self.down_after < 1:
            raise ValueError("the window of early rounds must be at least 0, the rounds before a neighbour is down at least 1")
        if self.aggregate not in AGGREGATIONS or self.attack not in (None, *PEER_ATTACKS):
            raise ValueError(f"unknown aggregation {self.aggregate!r} or attack {self.attack!r}")
        if self.network is not None and (self.secure_aggregation is None or self.bind not in self.network.keys
                                         or self.network.neighbours(self.bind) != set(self.peers)):
            raise ValueError("a network sum needs secure aggregation, this peer in the roster and the roster's neighbours "
                             "as the peers")
        if self.known_keys is not None and not set(self.peers) <= set(self.known_keys):
            raise ValueError("every neighbour needs a known key")


def check_masking_run(run: str, checkpoint_dir: str | None) -> None:
    """Refuse a masking peer (secure aggregation, a vertical group's score masks) the default run id, or a run without
    a checkpoint directory: the pairwise masks derive from the run id, the round and the peers' long-term keys, so
    two runs of the same peers under one id mask alike, as does a peer that restarts without its checkpoint (at round
    0, masking rounds it sent before with other statistics), and a recipient that kept both learns the difference of
    a member's statistics."""
    if run == DEFAULT_RUN:
        raise OptionConflict(f"--secure-aggregation needs --run-id NAME, a name no earlier run of these peers used, the "
                             f"same on every peer (not the default {run!r}): the masks derive from it and the peers' keys, "
                             "so two runs under one name mask alike and a recipient that kept both learns the difference "
                             "of a member's statistics")
    if not checkpoint_dir:
        raise OptionConflict("--secure-aggregation needs --checkpoint DIR: a peer restarted without its checkpoint would "
                             "begin at round 0 and mask rounds it already sent with the same masks (a recipient that kept "
                             "both would learn the difference of its statistics); with it, a restarted peer resumes")
