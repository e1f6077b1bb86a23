"""One ``crc node`` process as a library: its options, checked and turned into a ready peer, run until its model
file is written.

``NodeOptions`` holds what a process is told as plain values (addresses, file paths, names, numbers), from the
command line or any other source; ``prepare`` checks them (addresses first, then keys, then the rules between
options, then the files), loads the local data and reads the checkpoint, all before any network activity;
``Node.run`` opens the transport, runs the peer and writes the model file.
"""

from __future__ import annotations

import datetime
import functools
import logging
import math
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from crc.core.acceleration import Acceleration, acceleration_of, describe, resolve
from crc.core.calibration import DEFAULT_LR
from crc.core.distributed_noise import sum_key
from crc.core.errors import CRCError, MalformedOption, OptionConflict, named_errors
from crc.core.model_file import TrainedModel
from crc.core.models import ModelTooLarge, make_model, model_options
from crc.core.privacy import DEFAULT_CLIP, DEFAULT_DELTA, Privacy, check_settings, release_count
from crc.core.schema import Schema
from crc.nodes.keys import PeerKeys, load_key_pair, load_known_peers, load_neighbourhoods
from crc.nodes.local_data import load_local
from crc.nodes.metrics import Metrics, MetricsEndpoint, Reading
from crc.nodes.peer import Peer
from crc.nodes.roster import Roster, load_roster
from crc.nodes.settings import PeerSettings, SecureAggregationKeys, check_masking_run
from crc.nodes.transport import Transport
from crc.protocol.neighbourhoods import droppable
from crc.protocol.rules import SUM_SCOPES, check_release_every, check_secure_aggregation, check_sum_over

SCHEME = "tcp://"
MAX_START_DELAY_S = 7 * 24 * 3600
"""A start time further ahead than this is refused: most likely a typo, and the peer would sit idle."""


@dataclass(frozen=True)
class NodeOptions:
    """Everything a ``crc node`` process is told, named as ``crc node``'s options; None leaves a setting to its
    default (the acceleration settings: to ``algorithm``'s, ``crc.core.acceleration.resolve``). Paths are of files read
    (``data``, ``schema``, ``secret_key``, ``known_peers``, ``neighbourhoods``, ``roster``) or written (``out``, ``checkpoint``)."""

    bind: str
    data: str
    schema: str
    out: str
    peers: tuple[str, ...] = ()
    via: tuple[str, ...] = ()
    """``NAME=ADDRESS`` entries: reach the neighbour NAME (one of ``peers``) at ADDRESS instead (``--via``)."""
    label: str | None = None
    model: str = "nb"
    model_options: Mapping[str, object] = field(default_factory=dict)
    """Structure options by name; those of other model kinds are ignored."""
    rounds: int = PeerSettings.rounds
    iters: int | None = None
    momentum: float | None = None
    start: str | None = None
    safeguard: bool | None = None
    classifier: str | None = None
    exact_diffusion: bool | None = None
    algorithm: str | None = None
    loss: float = PeerSettings.loss
    loss_seed: int = PeerSettings.loss_seed
    dp_epsilon: float | None = None
    dp_delta: float = DEFAULT_DELTA
    clip: float = DEFAULT_CLIP
    dp_noise: str = "local"
    dp_colluders: int = 0
    dp_dropouts: int = 0
    release_every: int = PeerSettings.release_every
    dp_sums_per_round: int | None = None
    """Distributed noise: the most distinct closed-neighbourhood sums any peer is in each round, the same on every
    peer (``crc launch`` computes it from the graph); None: this peer's own count."""
    lr: float = DEFAULT_LR
    """Only used for the default ESS (local size / lr)."""
    ess: float | None = None
    timeout_s: float = PeerSettings.timeout_s
    first_round_timeout_s: float = PeerSettings.first_round_timeout_s
    start_at: str | None = None
    """ISO 8601 with a time zone, or seconds since the epoch; None: at once."""
    checkpoint: str | None = None
    run: str = PeerSettings.run
    aggregate: str = PeerSettings.aggregate
    down_after: int = PeerSettings.down_after
    attack: str | None = None
    secret_key: str | None = None
    known_peers: str | None = None
    plaintext: bool = False
    """No encrypted transport: no keys, statistics in plaintext (``--insecure``)."""
    secure_aggregation: bool = False
    neighbourhoods: str | None = None
    sum_over: str = SUM_SCOPES[0]
    """``--sum-over``: ``neighbourhood`` (the paper's CRC) or ``network`` (one secure sum of every peer of the
    ``roster`` a round, ``crc.nodes.roster``)."""
    roster: str | None = None
    metrics_port: int | None = None
    """Port of the Prometheus metrics endpoint (None: not served)."""
    metrics_host: str = "127.0.0.1"
    """Address the metrics endpoint binds: this machine only unless another is given."""
    partition: str | None = None
    """``vertical:K`` or ``hybrid:GxK``: a peer of a group holding one block of features (``crc.nodes.vertical_node``);
    None: a horizontal peer."""
    block_peers: tuple[str, ...] = ()
    """A hybrid partition's peers holding the same block in the neighbouring groups."""
    blocks: str | None = None
    """A vertical group's blocks file (every block's feature names)."""
    block: int | None = None
    """The block this peer of a vertical group holds."""
    id_column: str = "id"
    """A vertical group's column of instance ids."""
    label_holder: str | None = None
    """A vertical group's member holding the labels, as the other members know it (None: the first to ask)."""


@dataclass(frozen=True)
class NodeOutcome:
    """How a run ended: ``finished`` all its rounds (the model file is then written), and whether the peer heard
    from none of its neighbours in the whole run, or under a network sum had none of its sums released (``alone``,
    then ``network`` says which)."""

    finished: bool
    alone: bool
    rounds_done: int
    neighbours: int
    rejected: int
    group_stopped: str | None = None
    """A vertical group that stopped because a peer was silent: why (one line)."""
    network: bool = False
    """Whether the peer averaged over a network sum (``--sum-over network``)."""
    absent: tuple[str, ...] = ()
    """Under a network sum, the peers most often missing from its failed sums, each as 'address (N rounds)'
    (``most_absent``)."""


def most_absent(metrics: Metrics, shown: int = 3) -> tuple[str, ...]:
    """The ``shown`` peers most often missing from a network sum's failed totals ('address (N rounds)', most first);
    when no failed total came (the parent silent), the neighbours that sent nothing most often."""
    counts = metrics.absent_from_sums or {peer: rounds for peer, rounds in metrics.missing.items() if rounds}
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:shown]
    return tuple(f"{peer} ({rounds} round{'s' if rounds != 1 else ''})" for peer, rounds in ranked)


class Node:
    """A peer process ready to run: options checked, data loaded, checkpoint read; nothing on the network yet.
    ``stop`` (a threading.Event) ends a run within a poll slice, after its checkpoint is written."""

    def __init__(self, options: NodeOptions, schema: Schema, structure: dict, peer: Peer, keys: PeerKeys | None,
                 privacy: Privacy | None):
        self.options, self.schema, self.structure, self.peer, self.keys, self.privacy = (
            options, schema, structure, peer, keys, privacy)

    @property
    def stop(self) -> threading.Event:
        return self.peer.stop

    def run(self) -> NodeOutcome:
        """Run the peer's remaining rounds over ZeroMQ, serving its metrics meanwhile if it has a metrics port; write
        the model file to ``options.out`` if it finished. A metrics port that cannot be bound is a CRCError."""
        peer, settings = self.peer, self.peer.settings
        endpoint = self._serve_metrics()
        try:
            transport = Transport(settings.bind, list(settings.peers), max_frame_bytes=peer.expect.max_frame_bytes,
                                  queue_messages=settings.queue_messages, poll_slice_s=settings.poll_slice_s, keys=self.keys,
                                  routes=routes(self.options.via, settings.peers))
            finished = peer.run(transport)  # closes the transport
        finally:
            if endpoint is not None:
                endpoint.close()
        rejected = sum(peer.metrics.rejected.values())
        outcome = NodeOutcome(finished=finished, alone=bool(settings.peers) and peer.trained_alone,
                              rounds_done=peer.round, neighbours=len(settings.peers), rejected=rejected,
                              network=peer.network is not None,
                              absent=most_absent(peer.metrics) if peer.network is not None else ())
        if finished:
            self._write_model()
            unsummed = peer.metrics.unmask_fallbacks  # rounds whose sum nobody could unmask: this peer kept its own
            peer.log.log(logging.WARNING if unsummed else logging.INFO,
                         "done: %d rounds%s, %d missing neighbour messages, %d rejected; model written to %s", peer.round,
                         (f" ({unsummed} without a sum; missing most: {', '.join(outcome.absent)})"
                          if unsummed and outcome.absent else
                          f" ({unsummed} without a sum)" if unsummed else ""),
                         sum(peer.metrics.missing.values()), rejected,
                         self.options.out)
        return outcome

    def reading(self) -> Reading:
        """The peer as a scrape of its metrics sees it now (called from the endpoint's thread)."""
        peer, settings, privacy = self.peer, self.peer.settings, self.privacy
        metrics = peer.metrics.copy()
        return Reading(metrics, bind=settings.bind, run=settings.run, rounds=settings.rounds, neighbours=settings.peers,
                       down=frozenset(peer.liveness.down), epsilon=None if privacy is None else privacy.epsilon,
                       epsilon_spent=None if privacy is None else privacy_spent(privacy, metrics.rounds_done))

    def _serve_metrics(self) -> MetricsEndpoint | None:
        if self.options.metrics_port is None:
            return None
        host, port = self.options.metrics_host, self.options.metrics_port
        try:
            endpoint = MetricsEndpoint(self.reading, host=host, port=port)
        except OSError as exc:
            raise CRCError(f"--metrics-port {port}: cannot serve metrics on {host}:{port} ({exc.strerror or exc})") from None
        self.peer.log.info("metrics at %s", endpoint.url)
        return endpoint

    def _write_model(self) -> None:
        peer, settings = self.peer, self.peer.settings
        metrics = {**peer.metrics.to_json(), "bind": settings.bind, "peers": list(settings.peers),
                   "instances": int(len(peer.y)), "ess": peer.ess, "aggregate": settings.aggregate,
                   "attack": settings.attack, "secure_aggregation": settings.secure_aggregation is not None}
        if self.privacy is not None:
            metrics["privacy"] = self.privacy.to_json()
        TrainedModel(self.schema, self.options.model, peer.classifier_stats, metrics, **self.structure).save(self.options.out)


def prepare(options: NodeOptions, log: logging.Logger) -> Node:
    """Check ``options`` and build the peer they describe (a ``VerticalNode`` with ``partition``), logging to ``log``;
    a CRCError (an OptionConflict for options that cannot go together) names the first problem. Nothing touches the
    network."""
    check_address(options.bind, "--bind")
    neighbours = tuple(check_address(address, "--peers") for address in options.peers)
    if len(set(neighbours)) != len(neighbours):
        raise CRCError("--peers lists a neighbour twice")
    _check_metrics_endpoint(options)
    routes(options.via, neighbours)
    block_peers = tuple(check_address(address, "--block-peers") for address in options.block_peers)
    keys = _transport_keys(options, neighbours + block_peers)
    if options.partition is not None:  # a peer of a vertical or hybrid group: a driver of its own
        check_release_every(release_every=options.release_every, rounds=options.rounds, vertical=True)
        if options.sum_over != SUM_SCOPES[0] or options.roster is not None:
            raise OptionConflict("--sum-over network and --roster are for a horizontal peer, not one of a vertical or "
                                 "hybrid group")
        from crc.nodes.vertical_node import prepare_vertical

        return prepare_vertical(options, keys, log)
    if options.blocks is not None or options.block is not None or block_peers or options.label_holder is not None:
        raise OptionConflict("--blocks, --block, --block-peers and --label-holder are for a peer of a group holding one "
                             "block of features: give --partition vertical:K or hybrid:GxK")
    masking = _secure_aggregation_keys(options, keys, neighbours)
    network = _network_roster(options, keys, neighbours) if options.sum_over == "network" else None
    shared = Schema.load(options.schema)
    if options.label is not None and options.label != shared.label:
        raise CRCError(f"--label {options.label!r} differs from the schema's label {shared.label!r}")
    structure = model_options(options.model, options.model_options)
    with named_errors(options.schema, ModelTooLarge):  # the schema file made it too large
        generative = make_model(options.model, shared, **structure)
    chosen = resolve({"algorithm": options.algorithm, "momentum": options.momentum, "start": options.start,
                      "safeguard": options.safeguard, "classifier": options.classifier,
                      "exact_diffusion": options.exact_diffusion, "iters": options.iters, "dp_epsilon": options.dp_epsilon,
                      "release_every": options.release_every, "aggregate": options.aggregate, "model": options.model,
                      "structure": structure.get("structure")})
    iters, speedup = chosen["iters"], acceleration_of(chosen)
    check_release_every(release_every=options.release_every, rounds=options.rounds, exact_diffusion=speedup.exact_diffusion,
                        dp_noise=options.dp_noise, averaged=speedup.keeps_average)
    privacy = _privacy(generative, options, iters, speedup, masking, network)
    phi, y = load_local(options.data, shared, generative, clip=None if privacy is None else privacy.clip)
    if privacy is not None:
        shares = ("" if privacy.noise == "local" else
                  f", distributed: every member's share adds up to it in {'the network sum' if network else 'each sum'} "
                  f"(--colluders {privacy.colluders}, --dp-dropouts {privacy.dropouts})")
        log.info("differential privacy: (%g, %g)-DP over %d releases, clip %g, sensitivity %.4g, noise sigma %.4g%s",
                 privacy.epsilon_spent, privacy.delta, privacy.releases, privacy.clip, privacy.sensitivity, privacy.sigma,
                 shares)
    log.info("algorithm %s", describe(chosen))
    if options.attack:
        log.warning("Byzantine peer (--attack %s): sending poisoned statistics every round", options.attack)
    if not neighbours:
        log.warning("no --peers: this peer has no neighbours and trains alone, on its own data only")
    start = start_time(options.start_at)
    try:
        settings = PeerSettings(bind=options.bind, peers=neighbours, rounds=options.rounds, iters=iters,
                                timeout_s=options.timeout_s, first_round_timeout_s=options.first_round_timeout_s,
                                start_at=start, run=options.run, checkpoint_dir=options.checkpoint,
                                aggregate=options.aggregate, down_after=options.down_after, attack=options.attack,
                                known_keys=keys.known if keys else None, acceleration=speedup, loss=options.loss,
                                loss_seed=options.loss_seed, privacy=privacy, secure_aggregation=masking,
                                network=network, colluders=options.dp_colluders, release_every=options.release_every)
        peer = Peer(generative, phi, y, ess=options.ess or len(y) / options.lr, settings=settings, log=log)
    except ValueError as exc:  # a CRCError too: one line either way
        raise CRCError(str(exc)) from None
    if keys is None:
        log.warning("insecure: no keys, so statistics travel in plaintext and any process that reaches %s can send "
                    "them in a neighbour's name", options.bind)
    if network is not None:
        place = network.position(options.bind)
        log.info("network sum: each round one secure sum of the %d peers of roster %s, relayed along a spanning tree "
                 "of height %d (this peer at depth %d, %d children)", len(network.members), network.digest[:12],
                 place.tree_height, place.depth, len(place.children))
    elif peer.session is not None:
        protected = set(peer.session.neighbourhoods.protected)
        alone = [u for u in neighbours if u not in protected]
        log.info("secure aggregation: %d of %d neighbours get this peer's statistics only within a sum",
                 len(neighbours) - len(alone), len(neighbours))
        if alone:
            log.warning("secure aggregation: this peer's statistics go as they are to %s, whose only neighbour it is "
                        "(the sum of one term is the term)", ", ".join(alone))
        own = peer.session.neighbourhoods.own
        if privacy is not None and privacy.dropouts and own is not None:
            usable = droppable(len(own.contributors), options.dp_colluders)
            if privacy.dropouts > usable:
                log.warning("--dp-dropouts %d: a request for this peer's sum names %d of its %d neighbours, so the sum "
                            "can go without %d at most; the shares sized for %d only add noise here (crc simulate and "
                            "crc launch refuse such a graph)", privacy.dropouts, own.fewest, len(own.contributors),
                            usable, privacy.dropouts)
    return Node(options, shared, structure, peer, keys, privacy)


def routes(via: tuple[str, ...], neighbours: tuple[str, ...]) -> dict[str, str]:
    """``--via``'s ``NAME=ADDRESS`` entries as {neighbour's name: address its outbox connects to}; a MalformedOption
    for an entry that is not two addresses or names no neighbour, a CRCError for a neighbour given twice."""
    found = {}
    for entry in via:
        name, equals, address = entry.partition("=")
        if not equals:
            raise MalformedOption(f"Invalid value for '--via': {entry!r}: give NAME=ADDRESS, e.g. "
                                  "tcp://10.0.0.6:7000=tcp://127.0.0.1:7100")
        name, address = check_address(name.strip(), "--via"), check_address(address.strip(), "--via")
        if name not in neighbours:
            raise MalformedOption(f"Invalid value for '--via': {entry!r}: {name} is not one of --peers")
        if name in found:
            raise CRCError(f"--via gives {name} twice")
        found[name] = address
    return found


def check_address(address: str, what: str) -> str:
    """``address`` if it is ``tcp://HOST:PORT`` with a resolvable host and a port in 1..65535. A malformed address is
    a MalformedOption naming option ``what`` (a usage error, exit status 2), a host that does not resolve a
    CRCError. A peer is named by its bind address, so a wildcard host is malformed (its neighbours could not name
    it)."""
    def malformed(problem: str) -> MalformedOption:
        return MalformedOption(f"Invalid value for '{what}': {address!r}: {problem}")

    if not address.startswith(SCHEME):
        scheme = address.split("://")[0] + "://" if "://" in address else "no scheme"
        raise malformed(f"must start with {SCHEME} (got {scheme}), e.g. tcp://10.0.0.5:7000")
    host, colon, port = address[len(SCHEME):].rpartition(":")
    if not colon or not host:
        raise malformed("give a host and a port, as in tcp://10.0.0.5:7000")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise malformed(f"the port must be a number from 1 to 65535, got {port!r}")
    if host.startswith("[") or ":" in host:
        raise malformed("IPv6 addresses are not supported; use an IPv4 address or a host name")
    if host == "*" or host == "0.0.0.0":
        raise malformed("a peer is named by its bind address, which its neighbours list in --peers; bind the address "
                        "they connect to, not a wildcard")
    try:
        socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CRCError(f"{what} {address!r}: cannot resolve host {host!r} ({getattr(exc, 'strerror', None) or exc})") from None
    return address


def _check_metrics_endpoint(options: NodeOptions) -> None:
    """The metrics endpoint's host resolves (a CRCError otherwise) and its port is not the peer's own (an
    OptionConflict)."""
    if options.metrics_port is None:
        return
    if options.bind.rpartition(":")[2] == str(options.metrics_port):
        raise OptionConflict(f"--metrics-port {options.metrics_port} is the port of --bind {options.bind}: give another")
    try:
        socket.getaddrinfo(options.metrics_host, options.metrics_port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CRCError(f"--metrics-host {options.metrics_host!r}: cannot resolve ({getattr(exc, 'strerror', None) or exc})") from None


def start_time(text: str | None) -> float | None:
    """``--start-at`` (ISO 8601 with a time zone, or seconds since the epoch) as seconds since the epoch (None: at
    once); more than ``MAX_START_DELAY_S`` ahead is a CRCError."""
    if text is None:
        return None
    when = _epoch_seconds(text)
    if not math.isfinite(when) or when - time.time() > MAX_START_DELAY_S:
        raise CRCError(f"--start-at {text!r} is more than 7 days ahead (or not a number)")
    return when


def _epoch_seconds(text: str) -> float:
    """Seconds since the epoch, or an ISO 8601 time with a time zone, as seconds since the epoch."""
    try:
        return float(text)
    except ValueError:
        pass
    stripped = text.strip()
    if stripped[-1:] in ("Z", "z"):  # UTC; Python 3.10's fromisoformat reads only +00:00
        stripped = stripped[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(stripped)
    except ValueError:
        raise MalformedOption(f"--start-at {text!r} is neither an ISO 8601 time nor seconds since the epoch") from None
    if moment.tzinfo is None:
        raise MalformedOption(f"--start-at {text!r} has no time zone: add one, e.g. Z for UTC or +01:00")
    return moment.timestamp()


def _transport_keys(options: NodeOptions, neighbours: tuple[str, ...]) -> PeerKeys | None:
    """The encrypted transport's keys from ``secret_key`` and ``known_peers`` (only the neighbours' kept); None for
    a plaintext peer."""
    if options.plaintext:
        if options.secret_key or options.known_peers:
            raise OptionConflict("--insecure runs without keys: drop --secret-key and --known-peers, or --insecure")
        return None
    if not options.secret_key and not options.known_peers:
        raise CRCError("refusing to run without keys: give --secret-key and --known-peers (write keys with `crc keys`), "
                       "or --insecure to run in plaintext on a trusted network")
    if not options.secret_key or not options.known_peers:
        raise OptionConflict("--secret-key and --known-peers go together")
    own = load_key_pair(options.secret_key)
    known = load_known_peers(options.known_peers, required=neighbours)
    if own.public in [known[address] for address in neighbours]:
        raise CRCError(f"{options.known_peers}: a neighbour has this peer's own key ({options.secret_key})")
    return PeerKeys(own=own, known={address: known[address] for address in neighbours})


def _secure_aggregation_keys(options: NodeOptions, keys: PeerKeys | None,
                             neighbours: tuple[str, ...]) -> SecureAggregationKeys | None:
    """Secure aggregation's keys from ``neighbourhoods``, checked against the transport's keys and the other
    options; None without secure aggregation."""
    check_secure_aggregation(secure_aggregation=options.secure_aggregation, aggregate=options.aggregate,
                             encrypted_transport=keys is not None, dp_noise=options.dp_noise)
    check_sum_over(options.sum_over, secure_aggregation=options.secure_aggregation, dp_dropouts=options.dp_dropouts,
                   loss=options.loss)
    if options.roster and options.sum_over != "network":
        raise OptionConflict("--roster is for --sum-over network")
    if not options.secure_aggregation:
        if options.neighbourhoods:
            raise OptionConflict("--neighbourhoods is for --secure-aggregation")
        return None
    if options.sum_over == "network":
        if options.neighbourhoods:
            raise OptionConflict("--neighbourhoods is for --sum-over neighbourhood: a network sum takes its members and "
                                 "their keys from --roster")
        if not options.roster:
            raise OptionConflict("--sum-over network needs --roster FILE: every peer's address and public key and the "
                                 "graph's edges (`crc launch` and `crc split --keys-for ... --sum-over network` write "
                                 "roster.json)")
        check_masking_run(options.run, options.checkpoint)
        return SecureAggregationKeys(keys.own.secret, {})  # the network sum reads the members' keys from the roster
    if not options.neighbourhoods:
        raise OptionConflict("--secure-aggregation needs --neighbourhoods FILE: for each neighbour, the address and "
                             "public key of every member of its neighbourhood (`crc launch` and `crc split --keys-for "
                             "... --secure-aggregation` write one per peer)")
    check_masking_run(options.run, options.checkpoint)
    hoods = load_neighbourhoods(options.neighbourhoods, options.bind, neighbours)
    return SecureAggregationKeys(keys.own.secret, vouched_neighbourhoods(hoods, options.bind, keys.own.public,
                                                                         load_known_peers(options.known_peers), neighbours,
                                                                         source=options.neighbourhoods))


def vouched_neighbourhoods(hoods: dict, own: str, own_key: str, known: dict, neighbours: tuple[str, ...], *,
                           source: str = "the neighbourhoods file") -> dict[str, dict[str, str]]:
    """Each neighbour's neighbourhood (address -> key), refused unless every member's key is the one this peer knows
    out of band (``check_vouched``). A recipient that lists identities it controls (keys nobody vouched for) as
    members of its neighbourhood, to subtract their values from the sum, is refused here."""
    for u in neighbours:
        check_vouched(hoods[u], own, own_key, known, source=source, where=f"in the neighbourhood of {u}")
    return {u: dict(hoods[u]) for u in hoods}


def check_vouched(members: Mapping[str, str], own: str, own_key: str, known: Mapping[str, str], *, source: str,
                  where: str) -> None:
    """A CRCError naming ``source`` and ``where`` (e.g. "in the neighbourhood of U") unless every key of ``members``
    (address -> key, this peer ``own`` among them) is the one this peer knows out of band: its own (``own_key``) for
    itself, the known-peers file's (``known``, every entry, not only the neighbours') for the others."""
    if members[own] != own_key:
        raise CRCError(f"{source}: the key it gives this peer {where} is not this peer's")
    for w, key in members.items():
        if w == own:
            continue
        if w not in known:
            raise CRCError(f"{source}: {w} {where} is not in the known-peers file: secure aggregation takes only "
                           "members whose keys this peer knows out of band (add its key to the known-peers file once "
                           "you have checked it with its owner)")
        if known[w] != key:
            raise CRCError(f"{source}: the key of {w} {where} differs from the known-peers file's")


def _network_roster(options: NodeOptions, keys: PeerKeys, neighbours: tuple[str, ...]) -> Roster:
    """The roster of ``--sum-over network`` (``load_roster``), refused unless it lists this peer (``--bind``) with
    its own public key, gives it exactly ``neighbours`` (``--peers``) in its edges, and every other member the key
    of the known-peers file (keys known out of band: the masks are agreed with every member)."""
    roster = load_roster(options.roster)
    if options.bind not in roster.keys:
        raise CRCError(f"{options.roster}: this peer ({options.bind}) is not in the roster")
    linked = roster.neighbours(options.bind)
    if linked != set(neighbours):
        stray = sorted(linked.symmetric_difference(neighbours))[0]
        whose = "the roster's" if stray in linked else "--peers'"
        raise CRCError(f"{options.roster}: the roster's edges give this peer other neighbours than --peers ({stray} is "
                       f"only among {whose}): the sum is relayed along the roster's graph")
    check_vouched(roster.keys, options.bind, keys.own.public, load_known_peers(options.known_peers),
                  source=options.roster, where="in the roster")
    return roster


def _privacy(model, options: NodeOptions, iters: int, speedup: Acceleration, masking: SecureAggregationKeys | None,
             network: Roster | None) -> Privacy | None:
    """The peer's privacy plan (noise for (epsilon, delta) over its ``rounds`` releases), None without ``dp_epsilon``:
    local noise is the exact discrete Gaussian (``plan_exact``, accounted by ``zcdp``, where the simulator's
    floating-point noise uses ``pld``); distributed noise is planned as the simulator plans it (``plan_distributed``),
    from what this peer knows: the closed neighbourhoods it is a member of, and ``dp_sums_per_round``; or, for a
    ``network`` sum, one sum of the roster's peers a round."""
    check_settings(epsilon=options.dp_epsilon, delta=options.dp_delta, clip=options.clip, iterations=iters,
                   acceleration=speedup, noise=options.dp_noise, colluders=options.dp_colluders,
                   dropouts=options.dp_dropouts, aggregate=options.aggregate)
    if options.dp_sums_per_round is not None and options.dp_noise != "distributed":
        raise OptionConflict("--dp-sums-per-round is for --dp-noise distributed")
    if options.dp_sums_per_round is not None and network is not None:
        raise OptionConflict("--dp-sums-per-round is for --sum-over neighbourhood: a network sum is one sum a round")
    if options.dp_epsilon is None:
        return None
    from crc.protocol.accountant import plan_exact, plan_shares

    if options.dp_noise == "local":
        return plan_exact(model, epsilon=options.dp_epsilon, delta=options.dp_delta, clip=options.clip,
                          rounds=options.rounds, release_every=options.release_every)
    if network is not None:
        return plan_shares(model, epsilon=options.dp_epsilon, delta=options.dp_delta, clip=options.clip,
                           rounds=options.rounds, sums_per_round=1, sizes=[len(network.members)],
                           colluders=options.dp_colluders, dropouts=options.dp_dropouts)
    by_recipient = masking.closed_neighbourhoods(options.bind, options.peers)
    hoods = set(by_recipient.values())
    sums = len({sum_key(u, hood, options.dp_dropouts) for u, hood in by_recipient.items()})
    per_round = options.dp_sums_per_round or sums
    if per_round < sums:
        raise CRCError(f"--dp-sums-per-round {per_round}: this peer is in {sums} neighbourhood sums of independent shares "
                       "each round, so its guarantee needs at least that many")
    return plan_shares(model, epsilon=options.dp_epsilon, delta=options.dp_delta, clip=options.clip, rounds=options.rounds,
                       sums_per_round=per_round, sizes=[len(hood) for hood in hoods], colluders=options.dp_colluders,
                       dropouts=options.dp_dropouts)


@functools.lru_cache(maxsize=4)
def privacy_spent(privacy: Privacy, rounds: int) -> float:
    """ε that the first ``rounds`` rounds of the plan's releases (``sums_per_round`` each, one round in
    ``release_every``) have spent (0 before the first)."""
    from crc.protocol.accountant import epsilon_spent

    releases = release_count(rounds, privacy.release_every) * privacy.sums_per_round
    if releases >= privacy.releases:
        return privacy.epsilon_spent
    return 0.0 if releases == 0 else epsilon_spent(privacy.noise_multiplier, releases, privacy.delta, privacy.accountant)
