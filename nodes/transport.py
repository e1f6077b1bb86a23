"""ZeroMQ sockets of one peer: a PULL socket it binds, a PUSH socket per neighbour.

PUSH/PULL because a round's message is fire-and-forget: nobody waits for a
reply, a slow or dead neighbour must not block the sender, and ZeroMQ queues
messages for a neighbour that has not started yet (connect before bind works),
so peers may start in any order. Every send is non-blocking; a message that
cannot be queued (the neighbour's queue is full) is dropped and counted.
Every receive is a poll with a deadline. Sockets close with a bounded linger.
"""

from __future__ import annotations

import time

import zmq

from crc.core.errors import CRCError

QUEUE_MESSAGES = 256
"""High-water mark per neighbour: rounds of statistics ZeroMQ may hold for it."""
POLL_SLICE_S = 0.1
"""Longest single poll, so that a stop request is seen within this time."""


class Transport:
    """The peer's inbox (bound at ``bind``) and one outbox per neighbour address."""

    def __init__(self, bind: str, neighbours: list[str], *, max_frame_bytes: int):
        self.context = zmq.Context()
        self.inbox = self.context.socket(zmq.PULL)
        # ZeroMQ itself drops frames far above the expected size before they use memory;
        # moderately oversized ones reach the decoder and are counted there.
        self.inbox.setsockopt(zmq.MAXMSGSIZE, 4 * max_frame_bytes + 65536)
        self.inbox.setsockopt(zmq.RCVHWM, QUEUE_MESSAGES * max(1, len(neighbours)))
        self.inbox.setsockopt(zmq.LINGER, 0)
        try:
            self.inbox.bind(bind)
        except zmq.ZMQError as exc:
            self.context.destroy(linger=0)
            raise CRCError(f"cannot bind {bind}: {exc}") from None
        self.outboxes = {}
        for address in neighbours:
            socket = self.context.socket(zmq.PUSH)
            socket.setsockopt(zmq.SNDHWM, QUEUE_MESSAGES)
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

        Waits at most POLL_SLICE_S per call so that the caller can check for a stop request.
        """
        frames = []
        remaining = deadline - time.monotonic()
        if remaining > 0 and dict(self.poller.poll(timeout=min(remaining, POLL_SLICE_S) * 1000)):
            while True:
                try:
                    frames.append(self.inbox.recv(flags=zmq.NOBLOCK, copy=True))
                except zmq.Again:
                    break
        return frames

    def close(self, linger_ms: int = 0) -> None:
        """Close every socket, waiting at most ``linger_ms`` for queued messages to leave."""
        for socket in self.outboxes.values():
            socket.setsockopt(zmq.LINGER, linger_ms)
        self.context.destroy(linger=linger_ms)
