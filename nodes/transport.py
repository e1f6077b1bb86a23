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

INBOX_FRAMES_PER_CONNECTION = 2
"""ZeroMQ's receive queue per connection (RCVHWM): a neighbour's frames up to a few rounds ahead."""


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

    ``queue_messages`` frames may wait for each neighbour in its outbox; the
    inbox holds ``INBOX_FRAMES_PER_CONNECTION`` per connection (more wait in
    the sender's queue); a receive waits at most ``poll_slice_s`` seconds and
    returns at most ``max_frames`` frames.
    """

    def __init__(self, bind: str, neighbours: list[str], *, max_frame_bytes: int, queue_messages: int,
                 poll_slice_s: float, max_frames: int = 64):
        self.poll_slice_s, self.max_frames = poll_slice_s, max_frames
        self.context = zmq.Context()
        self.inbox = self.context.socket(zmq.PULL)
        # Memory of the inbox is bounded by connections x (RCVHWM + 1) x MAXMSGSIZE: RCVHWM is per connection,
        # so it is kept small (a neighbour's further frames wait in its own send queue until they are read),
        # and ZeroMQ drops a longer frame, and its connection, before it uses memory.
        self.inbox.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes)
        self.inbox.setsockopt(zmq.RCVHWM, min(queue_messages, INBOX_FRAMES_PER_CONNECTION))
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

        Waits at most ``poll_slice_s`` per call, and returns at most ``max_frames`` frames, so that the caller can
        check for a stop request; past the deadline it returns what is already there without waiting.
        """
        frames = []
        remaining = max(0.0, deadline - time.monotonic())
        if dict(self.poller.poll(timeout=min(remaining, self.poll_slice_s) * 1000)):
            while len(frames) < self.max_frames:
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
