"""How a peer reaches its neighbours: the interface it needs, and its ZeroMQ implementation.

PUSH/PULL because a round's message is fire-and-forget: nobody waits for a
reply, a slow or dead neighbour must not block the sender, and ZeroMQ queues
messages for a neighbour that has not started yet (connect before bind works),
so peers may start in any order. Every send is non-blocking; a message that
cannot be queued (the neighbour's queue is full) is dropped and counted.
Every receive is a poll with a deadline. Sockets close with a bounded linger.

With keys (``PeerKeys``) every connection is CURVE: the inbox is a CURVE server
whose ZAP handler (pyzmq's thread authenticator) admits only the neighbours'
public keys, each outbox a CURVE client that checks its neighbour's key. A
frame carries the key its connection authenticated with (ZeroMQ's ``User-Id``),
so the peer can check it against the frame's claimed sender. Refused
connections (an unknown key, a plaintext client, a broken handshake) never
deliver a frame; a monitor of the inbox counts them by cause.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Protocol

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import parse_monitor_message

from crc.core.errors import CRCError
from crc.nodes.keys import PeerKeys

ZAP_DOMAIN = "crc"
REFUSAL_CAUSES = ("unknown-key", "plaintext", "handshake")
"""Why a connection to the inbox can be refused, the keys of ``Transport.refused()``: a CURVE key that is not a
neighbour's; a client without CURVE, seen by the inbox; any other failed handshake (garbage, a client that expects
another server key, or a plaintext client that hung up before the inbox saw its mechanism: the two greetings race)."""
HANDSHAKE_MS = 5000
"""A connection must finish its handshake within this time (ZeroMQ's default is 30 s), with CURVE or in plaintext:
half-open connections of a flood are dropped sooner."""
HEARTBEAT_MS = 5000
HEARTBEAT_TIMEOUT_MS = 15_000
"""The inbox pings every connection every HEARTBEAT_MS and closes one silent for HEARTBEAT_TIMEOUT_MS (ZeroMQ's
sockets answer pings by themselves): a connection that finished its handshake and then holds its file descriptor
without answering (a plaintext stranger's, a dead host's half-open one) does not stay for ever."""
MONITOR_QUEUE_EVENTS = 10_000
"""Handshake failures the inbox's monitor may hold between two receives (about 100 bytes each)."""
_REFUSAL_EVENTS = zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL

CURVE_BOX_BYTES = 1024
"""Room above the largest frame for CURVE: ZeroMQ applies MAXMSGSIZE to the encrypted message (33 more bytes) and to
the handshake's commands (INITIATE: a few hundred bytes with its metadata)."""
INBOX_FRAMES_PER_CONNECTION = 2
"""ZeroMQ's receive queue per connection (RCVHWM): a neighbour's frames up to a few rounds ahead."""


class PeerTransport(Protocol):
    """What a peer needs from its network. Deadlines are on the peer's clock (time.monotonic for real peers)."""

    def send(self, frame: bytes) -> list[str]:
        """Queue ``frame`` for every neighbour without blocking; returns the neighbours whose queue was full."""

    def send_to(self, address: str, frame: bytes) -> bool:
        """Queue ``frame`` for one neighbour without blocking; False if its queue was full."""

    def receive(self, deadline: float) -> list[tuple[bytes, str | None]]:
        """Frames that arrived, each with the z85 public key its connection authenticated with (None without keys),
        waiting at most one poll slice and never past ``deadline``; may be empty."""

    def refused(self) -> dict[str, int]:
        """Connections to the inbox refused so far, by cause (cumulative)."""

    def close(self, linger_ms: int) -> None:
        """Release the connections, letting queued frames leave for at most ``linger_ms`` milliseconds."""


class _KnownKeys:
    """The ZAP credentials provider: admits exactly the given public keys (z85), keeps no other state."""

    def __init__(self, keys):
        self.keys = frozenset(key.encode("ascii") for key in keys)

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.keys


def _refusal_cause(event: dict) -> str:
    if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return "unknown-key"
    if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and event["value"] == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return "plaintext"
    return "handshake"


def raise_descriptor_limit() -> None:
    """Raise this process's soft limit of open files to its hard limit (POSIX; elsewhere nothing).

    Every connection to the inbox holds a file descriptor, a stranger's too until its handshake times out
    (HANDSHAKE_MS): under the common soft limit of 1,024, about a thousand idle connections left a peer unable to
    write its checkpoint. The hard limit is what the administrator allows; nothing beyond it is asked for.
    """
    try:
        import resource
    except ImportError:  # not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if resource.RLIM_INFINITY not in (soft, hard) and soft < hard:
        with contextlib.suppress(ValueError, OSError):  # some systems cap it below the hard limit (macOS: OPEN_MAX)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Transport:
    """The ZeroMQ PeerTransport: an inbox (PULL) bound at ``bind`` and one outbox (PUSH) per neighbour address.

    ``queue_messages`` frames may wait for each neighbour in its outbox; the
    inbox holds ``INBOX_FRAMES_PER_CONNECTION`` per connection (more wait in
    the sender's queue); a receive waits at most ``poll_slice_s`` seconds and
    returns at most ``max_frames`` frames. With ``keys`` every socket is CURVE
    and only ``keys.known``'s keys of the ``neighbours`` may connect; without,
    everything is plaintext and unauthenticated. ``routes`` maps a neighbour's
    address (its name) to the address its outbox connects to instead (a relay,
    a tunnel, a forwarded port: ``crc node --via``); the neighbour keeps its
    name, and its key is checked all the same.
    """

    def __init__(self, bind: str, neighbours: list[str], *, max_frame_bytes: int, queue_messages: int,
                 poll_slice_s: float, keys: PeerKeys | None = None, max_frames: int = 64,
                 routes: Mapping[str, str] | None = None):
        self.poll_slice_s, self.max_frames, self.keys = poll_slice_s, max_frames, keys
        raise_descriptor_limit()
        self.context = zmq.Context()
        self.inbox = self.authenticator = self.monitor = None
        self._refused = dict.fromkeys(REFUSAL_CAUSES, 0)
        try:
            self.inbox = self.context.socket(zmq.PULL)
            # Memory of the inbox is bounded by connections x (RCVHWM + 1) x MAXMSGSIZE: RCVHWM is per connection,
            # so it is kept small (a neighbour's further frames wait in its own send queue until they are read),
            # and ZeroMQ drops a longer frame, and its connection, before it uses memory.
            self.inbox.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes + CURVE_BOX_BYTES)
            self.inbox.setsockopt(zmq.RCVHWM, min(queue_messages, INBOX_FRAMES_PER_CONNECTION))
            self.inbox.setsockopt(zmq.LINGER, 0)
            self.inbox.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
            self.inbox.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
            self.inbox.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            if keys is not None:
                self._secure_inbox(keys, neighbours)
            try:
                self.inbox.bind(bind)
            except zmq.ZMQError as exc:
                raise CRCError(f"cannot bind {bind}: {exc}") from None
            self.outboxes = {}
            for address in neighbours:
                socket = self.context.socket(zmq.PUSH)
                socket.setsockopt(zmq.SNDHWM, queue_messages)
                socket.setsockopt(zmq.LINGER, 0)
                if keys is not None:
                    socket.curve_publickey, socket.curve_secretkey = keys.own.public.encode(), keys.own.secret.encode()
                    socket.curve_serverkey = keys.known[address].encode()
                try:
                    socket.connect((routes or {}).get(address, address))
                except zmq.ZMQError as exc:
                    raise CRCError(f"cannot connect to neighbour {address}: {exc}") from None
                self.outboxes[address] = socket
        except BaseException:
            self._destroy(0)
            raise
        self.poller = zmq.Poller()
        self.poller.register(self.inbox, zmq.POLLIN)

    def _secure_inbox(self, keys: PeerKeys, neighbours: list[str]) -> None:
        """Make the inbox a CURVE server that only the neighbours' keys pass, its refusals counted by a monitor.

        The authenticator starts before the inbox binds, and the inbox insists on it (ZAP_ENFORCE_DOMAIN):
        without a ZAP handler ZeroMQ would let any CURVE key in.
        """
        self.authenticator = ThreadAuthenticator(self.context)
        self.authenticator.start()
        self.authenticator.configure_curve_callback(ZAP_DOMAIN, _KnownKeys(keys.known[a] for a in neighbours))
        self.inbox.curve_publickey, self.inbox.curve_secretkey = keys.own.public.encode(), keys.own.secret.encode()
        self.inbox.curve_server = True
        self.inbox.zap_domain = ZAP_DOMAIN.encode()
        self.inbox.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        endpoint = f"inproc://crc-monitor-{id(self)}"
        self.inbox.monitor(endpoint, _REFUSAL_EVENTS)
        self.monitor = self.context.socket(zmq.PAIR)
        self.monitor.setsockopt(zmq.RCVHWM, MONITOR_QUEUE_EVENTS)
        self.monitor.setsockopt(zmq.LINGER, 0)
        self.monitor.connect(endpoint)

    def send(self, frame: bytes) -> list[str]:
        """Queue ``frame`` for every neighbour; returns the neighbours whose queue was full."""
        dropped = []
        for address, socket in self.outboxes.items():
            try:
                socket.send(frame, flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                dropped.append(address)
        return dropped

    def send_to(self, address: str, frame: bytes) -> bool:
        """Queue ``frame`` for the neighbour at ``address``; False if its queue was full."""
        try:
            self.outboxes[address].send(frame, flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return False
        return True

    def receive(self, deadline: float) -> list[tuple[bytes, str | None]]:
        """At most ``max_frames`` frames that arrive before ``deadline`` (time.monotonic), with their senders' keys,
        returning early once some have arrived.

        Waits at most ``poll_slice_s`` per call, and returns at most ``max_frames`` frames, so that the caller can
        check for a stop request; past the deadline it returns what is already there without waiting.
        """
        self._count_refusals()
        frames = []
        remaining = max(0.0, deadline - time.monotonic())
        if dict(self.poller.poll(timeout=min(remaining, self.poll_slice_s) * 1000)):
            while len(frames) < self.max_frames:
                try:
                    frame = self.inbox.recv(flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                frames.append((frame.bytes, frame.get("User-Id") if self.keys is not None else None))
        return frames

    def _count_refusals(self) -> None:
        while self.monitor is not None:
            try:
                event = parse_monitor_message(self.monitor.recv_multipart(flags=zmq.NOBLOCK))
            except zmq.Again:
                return
            cause = _refusal_cause(event)
            self._refused[cause] += 1

    def refused(self) -> dict[str, int]:
        """Connections to the inbox refused so far, by cause (``REFUSAL_CAUSES``; all zero without keys)."""
        self._count_refusals()
        return dict(self._refused)

    def close(self, linger_ms: int) -> None:
        """Close every socket, waiting at most ``linger_ms`` for queued messages to leave."""
        for socket in self.outboxes.values():
            socket.setsockopt(zmq.LINGER, linger_ms)
        self._destroy(linger_ms)

    def _destroy(self, linger_ms: int) -> None:
        """Close the inbox and its monitor, then stop the authenticator (the inbox never runs without it), then the
        rest."""
        if self.inbox is not None:
            if self.monitor is not None:
                self.inbox.disable_monitor()
                self.monitor.close(linger=0)
            self.inbox.close(linger=0)
        if self.authenticator is not None:
            self.authenticator.stop()
        self.context.destroy(linger=linger_ms)
