"""What a peer reports about its run: counts kept as it goes, checkpointed with its statistics, written into its
model file, and served to Prometheus while it runs.

The endpoint (``MetricsEndpoint``, ``--metrics-port``) reads the peer at each scrape (``Reading``), so the round
driver does nothing for it; ``families`` turns a reading into Prometheus metrics named by Prometheus' rules
(``crc_peer_`` prefix, ``_total`` counters, ``_seconds`` and ``_bytes`` units, ``peer`` and ``cause`` labels).
prometheus_client is imported only by a peer that serves its metrics.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from crc.core.errors import CRCError
from crc.nodes.wire import CAUSES

ROUND_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds (seconds) of the round-time histogram: a round computes in milliseconds and waits up to its timeout
(10 s by default; the first round up to 60 s)."""
STOP_WAIT_S = 2.0
"""Longest wait for the endpoint's thread when the peer stops."""


@dataclass
class Metrics:
    """What a peer reports about its run (all counts cumulative)."""

    rounds_done: int = 0
    soft_loss: list = field(default_factory=list)
    round_ms: list = field(default_factory=list)
    messages_sent: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    send_dropped: int = 0
    rejected: dict = field(default_factory=lambda: {cause: 0 for cause in CAUSES})
    refused: dict = field(default_factory=dict)
    """Connections the transport refused, by cause (an unknown key, a plaintext client ...)."""
    missing: dict = field(default_factory=dict)
    """Per neighbour: rounds its statistics did not arrive."""
    down_rounds: dict = field(default_factory=dict)
    """Per neighbour: rounds it was marked down (not waited for)."""
    downtime_s: dict = field(default_factory=dict)
    """Per neighbour: seconds from being marked down to sending again (or to the end of the run)."""
    absent_from_sums: dict = field(default_factory=dict)
    """Network sum: per peer of the roster, rounds whose sum failed without its words, as the total from the parent
    (or this root's own) names them; a relay's absence leaves out its whole subtree."""
    unmask_fallbacks: int = 0
    """Secure aggregation: rounds whose neighbours' masked statistics could not be unmasked (fewer arrived than a
    request must name, ``fewest_survivors``, or a mask could not be removed), so that the peer kept its own statistics."""
    reveals_refused: int = 0
    """Secure aggregation: unmasking requests this peer refused (they would have revealed more than a sum)."""
    deviations: int = 0
    """Secure aggregation: of those, the confirmations that proved a neighbour deviated (it showed the members of its
    neighbourhood different request sets or memberships, or withheld a member's vouch)."""
    checkpoint_failures: int = 0
    """Checkpoint writes that failed (the previous checkpoint was kept)."""
    aggregate_fallbacks: int = 0
    """Rounds whose neighbourhood average gave statistics the neighbours would reject, so that the round started
    from the peer's own statistics (``Peer._calibrate``)."""
    rounds_kept: int = 0
    """Of those, rounds whose local step from the peer's own statistics failed too, so that it kept its last ones."""
    rounds_skipped: int = 0
    """Rounds the peer skipped to catch up with neighbours that were ahead (no local step was run for them)."""
    notices_sent: int = 0
    """Waiting notices sent: frames telling the neighbours that this peer still waits (``crc.nodes.liveness``)."""
    notices_received: int = 0
    """Waiting notices received from the neighbours."""
    frames_resent: int = 0
    """Frames sent again to neighbours that resumed from their checkpoints (``crc.nodes.resend``)."""

    @classmethod
    def for_neighbours(cls, peers) -> Metrics:
        """Fresh metrics with a zero count for every neighbour in ``peers``."""
        return cls(missing={peer: 0 for peer in peers}, down_rounds={peer: 0 for peer in peers},
                   downtime_s={peer: 0.0 for peer in peers})

    def count_rejected(self, cause: str) -> None:
        self.rejected[cause] = self.rejected.get(cause, 0) + 1

    def count_sent(self, frames: int, frame_bytes: int) -> None:
        """``frames`` copies of a frame of ``frame_bytes`` bytes were queued for neighbours."""
        self.messages_sent += frames
        self.bytes_sent += frames * frame_bytes

    def count_refused(self, before: dict, now: dict) -> None:
        """The refused connections: those of earlier runs (``before``, a resumed checkpoint's) plus the transport's
        (``now``), by cause."""
        self.refused = {cause: before.get(cause, 0) + now.get(cause, 0) for cause in sorted({*before, *now})}

    def to_json(self) -> dict:
        return dict(self.__dict__)

    def copy(self) -> Metrics:
        """A copy with copies of the lists and maps (each copy is made at once, so a scrape may take it while the
        round driver counts on)."""
        return Metrics(**{key: copy.copy(value) for key, value in self.__dict__.items()})

    @classmethod
    def from_json(cls, obj: dict) -> Metrics:
        """Metrics from a checkpoint; a known field of another type than its default's, or a list of more entries than
        the rounds done and one (a peer adds one a round at most, a vertical group's peer one for its start too), is a
        CRCError."""
        metrics = cls()
        for key, value in obj.items():
            if hasattr(metrics, key):
                if not _same_kind(getattr(metrics, key), value, seconds=key == "downtime_s"):
                    raise CRCError(f"metric {key!r} is not what a peer writes there")
                setattr(metrics, key, value)
        for key, value in metrics.__dict__.items():
            if isinstance(value, list) and len(value) > metrics.rounds_done + 1:
                raise CRCError(f"metric {key!r} holds {len(value)} entries, more than the {metrics.rounds_done} rounds "
                               "done and the start")
        return metrics


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_kind(default, value, *, seconds: bool) -> bool:
    """Whether ``value`` is a metric of the kind of ``default``: a count; a list of numbers; a map of names to
    counts (to numbers of seconds if ``seconds``)."""
    if isinstance(default, list):
        return isinstance(value, list) and all(map(_number, value))
    if isinstance(default, dict):
        valid = (lambda v: _number(v) and v >= 0) if seconds else _count
        return isinstance(value, dict) and all(isinstance(k, str) and valid(v) for k, v in value.items())
    return _count(value)


@dataclass(frozen=True)
class Reading:
    """A peer as one scrape sees it."""

    metrics: Metrics
    """A copy of the peer's metrics (``Metrics.copy``)."""
    bind: str
    run: str
    rounds: int
    """Rounds of the run."""
    neighbours: tuple[str, ...]
    down: frozenset[str]
    """The neighbours marked down (not waited for) now."""
    epsilon: float | None = None
    """Differential privacy: the ε of the whole run (None: no privacy)."""
    epsilon_spent: float | None = None
    """Differential privacy: the ε the releases so far have spent."""


def families(reading: Reading) -> list:
    """The Prometheus metric families of ``reading``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily
    from prometheus_client.utils import floatToGoString

    m = reading.metrics
    out = [InfoMetricFamily("crc_peer", "The peer: its bind address and run id.", value={"bind": reading.bind, "run": reading.run}),
           GaugeMetricFamily("crc_peer_round", "Rounds this peer has completed.", value=m.rounds_done),
           GaugeMetricFamily("crc_peer_run_rounds", "Rounds of the run.", value=reading.rounds)]
    states = GaugeMetricFamily("crc_peer_neighbours", "Neighbours up (waited for) and down (missed too many rounds).",
                               labels=["state"])
    down = len(reading.down & set(reading.neighbours))
    states.add_metric(["up"], len(reading.neighbours) - down)
    states.add_metric(["down"], down)
    up = GaugeMetricFamily("crc_peer_neighbour_up", "1 if the neighbour is waited for, 0 if marked down.", labels=["peer"])
    missed = CounterMetricFamily("crc_peer_neighbour_missed_rounds", "Rounds whose statistics from the neighbour did "
                                 "not arrive.", labels=["peer"])
    for neighbour in reading.neighbours:
        up.add_metric([neighbour], 0 if neighbour in reading.down else 1)
        missed.add_metric([neighbour], m.missing.get(neighbour, 0))
    out += [states, up, missed,
            CounterMetricFamily("crc_peer_messages_sent", "Statistics messages queued for neighbours.", value=m.messages_sent),
            CounterMetricFamily("crc_peer_sent_bytes", "Bytes of the messages sent.", value=m.bytes_sent),
            CounterMetricFamily("crc_peer_messages_received", "Statistics messages accepted from neighbours.",
                                value=m.messages_received),
            CounterMetricFamily("crc_peer_received_bytes", "Bytes of the messages accepted.", value=m.bytes_received),
            CounterMetricFamily("crc_peer_messages_send_dropped", "Messages not sent: a neighbour's queue was full.",
                                value=m.send_dropped),
            _by_cause(CounterMetricFamily("crc_peer_messages_rejected", "Frames rejected, by cause.", labels=["cause"]),
                      {**{cause: 0 for cause in CAUSES}, **m.rejected}),
            _by_cause(CounterMetricFamily("crc_peer_connections_refused", "Connections the transport refused, by cause.",
                                          labels=["cause"]), m.refused),
            CounterMetricFamily("crc_peer_checkpoint_failures", "Checkpoint writes that failed.", value=m.checkpoint_failures),
            CounterMetricFamily("crc_peer_secure_aggregation_deviations", "Secure aggregation: confirmations that proved a "
                                "neighbour showed its members different request sets.", value=m.deviations),
            CounterMetricFamily("crc_peer_unmask_fallbacks", "Secure aggregation: rounds whose sum could not be unmasked "
                                "(a network sum: released nothing), the peer keeping its own statistics.",
                                value=m.unmask_fallbacks)]
    seconds = np.sort(np.asarray(m.round_ms, dtype=float)) / 1000
    counts = np.searchsorted(seconds, ROUND_SECONDS_BUCKETS, side="right")
    buckets = [(floatToGoString(bound), int(count)) for bound, count in zip(ROUND_SECONDS_BUCKETS, counts)]
    out.append(HistogramMetricFamily("crc_peer_round_duration_seconds", "Wall time of each round: waiting for the "
                                     "neighbours, the local step, sending, the checkpoint.",
                                     buckets=[*buckets, ("+Inf", len(seconds))], sum_value=float(seconds.sum())))
    if m.round_ms:
        out.append(GaugeMetricFamily("crc_peer_last_round_duration_seconds", "Wall time of the last round.",
                                     value=m.round_ms[-1] / 1000))
    if m.soft_loss:
        out.append(GaugeMetricFamily("crc_peer_local_soft_loss", "Soft 0-1 loss on the local data after the last round.",
                                     value=m.soft_loss[-1]))
    if reading.epsilon is not None:
        out += [GaugeMetricFamily("crc_peer_privacy_epsilon", "Differential privacy: the run's budget ε.", value=reading.epsilon),
                GaugeMetricFamily("crc_peer_privacy_epsilon_spent", "Differential privacy: ε spent by the releases so far.",
                                  value=reading.epsilon_spent)]
    return out


def _by_cause(family, counts: dict):
    for cause, count in sorted(counts.items()):
        family.add_metric([cause], count)
    return family


class PeerCollector:
    """A prometheus_client collector that reads the peer (``read``) at every scrape."""

    def __init__(self, read: Callable[[], Reading]):
        self.read = read

    def collect(self) -> Iterable:
        return families(self.read())


class MetricsEndpoint:
    """The peer's metrics over HTTP at ``http://host:port/metrics`` (any path), from a registry of their own, served
    by a daemon thread until ``close``. Binding fails with an OSError (the port taken, an address not this machine's)."""

    def __init__(self, read: Callable[[], Reading], *, host: str, port: int):
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(PeerCollector(read))
        self.server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.url = f"http://{host}:{self.server.server_port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()  # returns once the serving loop has seen it (within half a second)
        self.server.server_close()
        self._thread.join(STOP_WAIT_S)
