"""How a peer reaches its neighbours: the interface it needs, and its ZeroMQ implementation.

PUSH/PULL because a round's message is fire-and-forget: nobody waits for a
reply, a slow or dead neighbour must not block the sender, and ZeroMQ queues
messages for a neighbour that has not started yet (connect before bind works),
so peers may start in any order. Every send is non-blocking; a message that
cannot be queued (the neighbour's queue is full) is dropped and counted.
Every receive is a poll with a deadline. Sockets close with a bounded linger.
"""

from __future__ import annotations

import time
from typing import Protocol

import zmq

from crc.core.errors import CRCError


class PeerTransport(Protocol):
    """What a peer needs from its network. Deadlines are on the peer's clock (time.monotonic for real peers)."""

    def send(self, frame: bytes) -> list[str]:
        """Queue ``frame`` for every neighbour without blocking; returns the neighbours whose queue was full."""

    def receive(self, deadline: float) -> list[bytes]:
        """Frames that arrived, waiting at most one poll slice and never past ``deadline``; may be empty."""

    def close(self, linger_ms: int) -> None:
        """Release the connections, letting queued frames leave for at most ``linger_ms`` milliseconds."""


class Transport:
    """The ZeroMQ PeerTransport: an inbox (PULL) bound at ``bind`` and one outbox (PUSH) per neighbour address.

    ``queue_messages`` frames may wait for each neighbour (the inbox holds as
    many per neighbour); a receive waits at most ``poll_slice_s`` seconds.
    """

    def __init__(self, bind: str, neighbours: list[str], *, max_frame_bytes: int, queue_messages: int,
                 poll_slice_s: float):
        self.poll_slice_s = poll_slice_s
        self.context = zmq.Context()
        self.inbox = self.context.socket(zmq.PULL)
        # ZeroMQ itself drops frames far above the expected size before they use memory;
        # moderately oversized ones reach the decoder and are counted there.
        self.inbox.setsockopt(zmq.MAXMSGSIZE, 4 * max_frame_bytes + 65536)
        self.inbox.setsockopt(zmq.RCVHWM, queue_messages * max(1, len(neighbours)))
        self.inbox.setsockopt(zmq.LINGER, 0)
        try:
            self.inbox.bind(bind)
        except zmq.ZMQError as exc:
            self.context.destroy(linger=0)
            raise CRCError(f"cannot bind {bind}: {exc}") from None
        self.outboxes = {}
        for address in neighbours:
            socket = self.context.socket(zmq.PUSH)
            socket.setsockopt(zmq.SNDHWM, queue_messages)
            socket.setsockopt(zmq.LINGER, 0)
            try:
                socket.connect(address)
            except zmq.ZMQError as exc:
                self.context.destroy(linger=0)
                raise CRCError(f"cannot connect to neighbour {address}: {exc}") from None
            self.outboxes[address] = socket
        self.poller = zmq.Poller()
        self.poller.register(self.inbox, zmq.POLLIN)

    def send(self, frame: bytes) -> list[str]:
        """Queue ``frame`` for every neighbour; returns the neighbours whose queue was full."""
        dropped = []
        for address, socket in self.outboxes.items():
            try:
                socket.send(frame, flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                dropped.append(address)
        return dropped

    def receive(self, deadline: float) -> list[bytes]:
        """Frames that arrive before ``deadline`` (time.monotonic), returning early once some have arrived.

        Waits at most ``poll_slice_s`` per call so that the caller can check for a stop request.
        """
        frames = []
        remaining = deadline - time.monotonic()
        if remaining > 0 and dict(self.poller.poll(timeout=min(remaining, self.poll_slice_s) * 1000)):
            while True:
                try:
                    frames.append(self.inbox.recv(flags=zmq.NOBLOCK, copy=True))
                except zmq.Again:
                    break
        return frames

    def close(self, linger_ms: int) -> None:
        """Close every socket, waiting at most ``linger_ms`` for queued messages to leave."""
        for socket in self.outboxes.values():
            socket.setsockopt(zmq.LINGER, linger_ms)
        self.context.destroy(linger=linger_ms)
