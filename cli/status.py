"""``crc status``: one line per running peer, read from its Prometheus metrics endpoint (``crc node --metrics-port``).

Nothing a peer's endpoint answers is trusted: each scrape has a deadline and a size limit, follows no redirect and
no proxy, and its text is parsed by prometheus_client's parser; an answer that is not a peer's metrics is reported
like an unreachable peer.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import click

from crc.cli.finite import FiniteFloatRange

MAX_RESPONSE_BYTES = 1 << 20
"""Largest answer read from an endpoint: a peer's metrics take a few kilobytes (more with many neighbours)."""
DEFAULT_TIMEOUT_S = 2.0
MAX_PARALLEL = 16
_CHUNK = 64 * 1024


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx answer is then an HTTPError: reported, not followed


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


class Unreachable(Exception):
    """An endpoint that gave no peer's metrics; the message says why."""


@dataclass(frozen=True)
class PeerStatus:
    """What ``crc status`` shows of one peer."""

    bind: str
    round: int
    rounds: int
    up: int
    down: int
    sent: int
    received: int
    rejected: dict[str, int]
    last_round_s: float | None
    epsilon: float | None
    epsilon_spent: float | None
    unmasked_nothing: int = 0
    """Secure aggregation: rounds whose sum could not be unmasked (a network sum's that released nothing)."""

    def line(self) -> str:
        rejected = sum(self.rejected.values())
        causes = ", ".join(f"{cause} {count}" for cause, count in sorted(self.rejected.items()) if count)
        parts = [self.bind, f"round {self.round}/{self.rounds}", f"neighbours {self.up} up, {self.down} down",
                 f"messages {self.sent} sent, {self.received} received, {rejected} rejected" + (f" ({causes})" if causes else ""),
                 "last round " + ("-" if self.last_round_s is None else f"{self.last_round_s:.3f} s")]
        if self.unmasked_nothing:
            parts.append(f"{self.unmasked_nothing} round(s) without a sum")
        if self.epsilon is not None:
            parts.append(f"privacy ε {self.epsilon_spent:.3g} of {self.epsilon:.3g} spent")
        return "  ".join(parts)


TARGETS = "HOST:PORT|URL..."
"""The name the command's arguments go by in its usage line and errors."""


def metrics_url(target: str) -> str:
    """``HOST:PORT`` as ``http://HOST:PORT/metrics``; an http(s) URL as it is (``/metrics`` if it has no path)."""
    if "://" in target:
        parts = urllib.parse.urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise click.BadParameter(f"{target!r}: give HOST:PORT or an http:// or https:// URL", param_hint=repr(TARGETS))
        return target if parts.path not in ("", "/") else urllib.parse.urlunsplit(parts._replace(path="/metrics"))
    host, colon, port = target.rpartition(":")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise click.BadParameter(f"{target!r}: give HOST:PORT (a port from 1 to 65535) or a URL", param_hint=repr(TARGETS))
    return f"http://{host}:{port}/metrics"


def fetch(url: str, *, timeout_s: float, max_bytes: int = MAX_RESPONSE_BYTES) -> str:
    """The text ``url`` answers within ``timeout_s`` (give or take one socket timeout) and ``max_bytes``.

    It is read in a daemon thread given up at ``2 * timeout_s``, which the process's exit ends: headers that arrive a
    byte at a time, each within the socket timeout, are read by ``urllib`` before any deadline of ours is looked at
    (a status line and 200 header bytes at 0.05 s each held ``crc status --timeout 0.5`` 11 s)."""
    answer: list = []

    def read() -> None:
        try:
            answer.append(_read(url, timeout_s=timeout_s, max_bytes=max_bytes))
        except BaseException as exc:  # raised again in the caller's thread
            answer.append(exc)

    reader = threading.Thread(target=read, name=f"crc-status {url}", daemon=True)
    reader.start()
    reader.join(2 * timeout_s)
    if not answer:
        raise Unreachable(f"no complete answer within {timeout_s:g} s")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]


def _read(url: str, *, timeout_s: float, max_bytes: int) -> str:
    """``fetch``'s reading, in the reader's thread."""
    deadline = time.monotonic() + timeout_s
    try:
        with _OPENER.open(url, timeout=timeout_s) as answer:
            body = bytearray()
            while len(body) <= max_bytes:
                if time.monotonic() > deadline:
                    raise Unreachable(f"no complete answer within {timeout_s:g} s")
                chunk = answer.read1(_CHUNK)  # what has arrived: one wait of at most the socket timeout
                if not chunk:
                    break
                body += chunk
    except urllib.error.HTTPError as exc:
        raise Unreachable(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise Unreachable(getattr(reason, "strerror", None) or str(reason)) from None
    except TimeoutError:
        raise Unreachable(f"no answer within {timeout_s:g} s") from None
    except OSError as exc:  # the connection reset or broken mid-answer
        raise Unreachable(exc.strerror or str(exc)) from None
    if len(body) > max_bytes:
        raise Unreachable(f"answer larger than {max_bytes} bytes")
    try:
        return bytes(body).decode("utf-8")
    except UnicodeDecodeError:
        raise Unreachable("answer not UTF-8 text") from None


def parse_status(text: str) -> PeerStatus:
    """A peer's status from its metrics in the Prometheus text format."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(sample)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise Unreachable(f"not Prometheus text ({exc})") from None
    if "crc_peer_round" not in samples:
        raise Unreachable("no crc_peer_round metric: not a crc peer's endpoint")

    def value(name: str, default: float | None = None, **labels) -> float | None:
        for sample in samples.get(name, []):
            if all(sample.labels.get(k) == v for k, v in labels.items()) and math.isfinite(sample.value):
                return sample.value
        return default

    def count(name: str, **labels) -> int:
        return int(value(name, 0, **labels))

    info = samples.get("crc_peer_info", [])
    epsilon = value("crc_peer_privacy_epsilon")
    return PeerStatus(
        bind=info[0].labels.get("bind", "?") if info else "?", round=count("crc_peer_round"),
        rounds=count("crc_peer_run_rounds"), up=count("crc_peer_neighbours", state="up"),
        down=count("crc_peer_neighbours", state="down"), sent=count("crc_peer_messages_sent_total"),
        received=count("crc_peer_messages_received_total"),
        rejected={s.labels.get("cause", "?"): int(s.value) for s in samples.get("crc_peer_messages_rejected_total", [])
                  if math.isfinite(s.value)},
        last_round_s=value("crc_peer_last_round_duration_seconds"), epsilon=epsilon,
        epsilon_spent=value("crc_peer_privacy_epsilon_spent", 0.0) if epsilon is not None else None,
        unmasked_nothing=count("crc_peer_unmask_fallbacks_total"))


def _status_line(target: str, url: str, timeout_s: float) -> tuple[str, bool]:
    """(the line of ``target``, whether its peer answered)."""
    try:
        return f"{target}  {parse_status(fetch(url, timeout_s=timeout_s)).line()}", True
    except Unreachable as exc:
        return f"{target}  unreachable: {exc}", False


@click.command(short_help="Show running peers' round, neighbours and messages.")
@click.argument("targets", nargs=-1, required=True, metavar=TARGETS)
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True, max=60), default=DEFAULT_TIMEOUT_S,
              show_default=True, help="Seconds each peer's endpoint has to answer.")
def status(targets, timeout_s):
    """Read the metrics endpoint of each peer (`crc node --metrics-port PORT`,
    given as HOST:PORT or a URL) and print one line per peer: its round, its
    neighbours up and down, its messages sent, received and rejected (by
    cause), its last round's time, and the privacy spent in a private run.

    A peer whose endpoint does not answer (or not with a peer's metrics) is
    shown as unreachable, and the exit status is then 1.
    """
    urls = [metrics_url(target) for target in targets]
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(urls))) as pool:
        lines = list(pool.map(lambda pair: _status_line(*pair, timeout_s), zip(targets, urls)))
    for line, _ in lines:
        click.echo(line)
    failed = sum(not answered for _, answered in lines)
    if failed:
        raise click.ClickException(f"{failed} of {len(lines)} peer(s) unreachable")
