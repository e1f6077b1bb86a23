"""Bytes a peer's frames take on the TCP connection, with and without CURVE, counted by a relay on 127.0.0.1.

The sender's outbox connects to the relay, which forwards every byte to the
receiver's inbox and counts both directions; the transports are the peers'
own (``crc.nodes.transport.Transport``), so the figures include ZeroMQ's
framing and, with keys, CURVE's handshake and per-message box.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time

from crc.nodes.keys import PeerKeys, new_key_pair
from crc.nodes.launcher import free_ports
from crc.nodes.transport import Transport

WAIT_S = 30.0
CHUNK = 1 << 16


class _Relay:
    """Accepts one TCP connection on 127.0.0.1 and forwards it to ``target`` (host, port), counting bytes:
    ``up`` from the connecting side, ``down`` back to it."""

    def __init__(self, target: tuple[str, int]):
        self.target, self.up, self.down = target, 0, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.listener.settimeout(WAIT_S)
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        server = socket.create_connection(self.target, timeout=WAIT_S)
        with client, server, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, (server, "up"))
            selector.register(server, selectors.EVENT_READ, (client, "down"))
            while not self.stop.is_set():
                for key, _ in selector.select(timeout=0.05):
                    data = key.fileobj.recv(CHUNK)
                    if not data:
                        return
                    other, direction = key.data
                    setattr(self, direction, getattr(self, direction) + len(data))  # counted before it can arrive
                    other.sendall(data)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        self.listener.close()


def wire_bytes(frame: bytes, *, encrypted: bool, messages: int = 200) -> dict:
    """Bytes on the wire for ``frame`` sent ``messages`` times from one transport to another, after one frame that
    opens the connection: ``bytes_per_message`` (sender to receiver), ``overhead_bytes_per_message`` (beyond the
    frame) and ``connection_bytes`` (both directions, up to the first frame's arrival, less that frame)."""
    sender_port, receiver_port = free_ports(2)
    sender_address, receiver_address = f"tcp://127.0.0.1:{sender_port}", f"tcp://127.0.0.1:{receiver_port}"
    relay = _Relay(("127.0.0.1", receiver_port))
    sender_keys, receiver_keys = new_key_pair(), new_key_pair()
    options = dict(max_frame_bytes=len(frame), queue_messages=messages + 1, poll_slice_s=0.05)
    receiver = Transport(receiver_address, [sender_address], **options, max_frames=messages + 1,
                         keys=PeerKeys(receiver_keys, {sender_address: sender_keys.public}) if encrypted else None)
    sender = Transport(sender_address, [relay.address], **options,
                       keys=PeerKeys(sender_keys, {relay.address: receiver_keys.public}) if encrypted else None)
    try:
        deadline = time.monotonic() + WAIT_S

        def arrive(count: int) -> None:
            got = 0
            while got < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {got} of {count} frames arrived through the relay in {WAIT_S} s")
                got += len(receiver.receive(deadline))

        sender.send(frame)
        arrive(1)
        first_up, first_down = relay.up, relay.down
        for _ in range(messages):
            sender.send(frame)
        arrive(messages)
        per_message = (relay.up - first_up) / messages
    finally:
        sender.close(0)
        receiver.close(0)
        relay.close()
    return {"frame_bytes": len(frame), "bytes_per_message": per_message,
            "overhead_bytes_per_message": per_message - len(frame),
            "connection_bytes": first_up + first_down - per_message}
