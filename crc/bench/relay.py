"""A fault-injecting TCP relay on 127.0.0.1 for the test and bench harness: wide-area links without netem.

One ``Relay`` runs an asyncio loop in a thread of its own and holds any number of ``Link``\\ s. A link listens on a
free port of 127.0.0.1 and forwards every connection made to it to one target port, byte for byte in both
directions (ZeroMQ's ZMTP passes unchanged, CURVE included), applying the link's faults to each direction:

* **latency and jitter**: every chunk read is delivered ``latency_s`` plus a uniform draw from
  ``[-jitter_s, +jitter_s]`` after it was read, never before the chunk read before it (a TCP stream stays in
  order, so a chunk that drew less delay waits for the one ahead of it);
* **a bandwidth cap**: chunks leave at most ``bandwidth_bps`` bytes per second, one after another, the delay
  counted from the end of each chunk's transmission;
* **a blackhole** (a partition): while it is on, every byte read on the link's connections is dropped, both
  ways, and new connections are accepted but never reach the target (their bytes are dropped too). A stream
  with a gap cannot go on, so when the blackhole is lifted every connection that lost bytes is reset, as a
  connection that died in the partition would be; the peers' ZeroMQ sockets then reconnect through the link;
* **connection resets**: ``reset()`` closes every current connection of the link at once with a TCP RST.

The peers never know the relay is there: ``crc node --via NAME=ADDRESS`` makes a peer's outbox to the neighbour
NAME connect to the link's address, while the neighbour keeps its name on the wire (and its CURVE key). A link
per directed edge (sender to receiver) lets each direction of each edge fail on its own.

Every wait is bounded (``WAIT_S``); every connection and the loop's thread end with ``close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from dataclasses import dataclass, field

WAIT_S = 10.0
"""Longest a call from another thread waits for the relay's loop."""
CHUNK = 1 << 16
QUEUED_CHUNKS = 256
"""Chunks a direction of a connection may hold in flight before it stops reading (the sender's TCP then backs off)."""


@dataclass
class LinkCounts:
    """What went through a link: bytes forwarded and dropped (both directions), connections, resets."""

    forwarded_bytes: int = 0
    dropped_bytes: int = 0
    connections: int = 0
    resets: int = 0


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    gapped: bool = False
    """It lost bytes in a blackhole: it is reset when the blackhole lifts."""
    tasks: list = field(default_factory=list)


def _abort(writer: asyncio.StreamWriter | None) -> None:
    """Close ``writer``'s connection at once with an RST (SO_LINGER 0), dropping what it still holds."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Link:
    """One relayed link: connections to ``address`` are forwarded to 127.0.0.1:``target_port`` with its faults.

    Change the faults from any thread: ``set`` (latency, jitter, bandwidth), ``blackhole``, ``reset``."""

    def __init__(self, relay: Relay, name: str, target_port: int, *, latency_s: float, jitter_s: float,
                 bandwidth_bps: float | None, seed: int):
        if latency_s < 0 or jitter_s < 0 or jitter_s > latency_s or (bandwidth_bps is not None and bandwidth_bps <= 0):
            raise ValueError("latency at least 0, jitter from 0 to the latency, bandwidth positive (or None)")
        self.relay, self.name, self.target_port = relay, name, target_port
        self.latency_s, self.jitter_s, self.bandwidth_bps = latency_s, jitter_s, bandwidth_bps
        self.blackholed = False
        self.counts = LinkCounts()
        self.random = random.Random(seed)
        self.connections: set[_Connection] = set()
        self.server: asyncio.Server | None = None
        self.address = ""

    def set(self, *, latency_s: float | None = None, jitter_s: float | None = None,
            bandwidth_bps: float | None = None) -> None:
        """New latency, jitter or bandwidth for the chunks read from now on (None keeps the current value)."""
        self.latency_s = self.latency_s if latency_s is None else latency_s
        self.jitter_s = self.jitter_s if jitter_s is None else jitter_s
        self.bandwidth_bps = self.bandwidth_bps if bandwidth_bps is None else bandwidth_bps

    def blackhole(self, on: bool) -> None:
        """Drop everything on the link (``on``), or lift the blackhole and reset the connections that lost bytes."""
        self.relay.call(self._blackhole, on)

    def reset(self) -> int:
        """Close every current connection of the link with an RST; returns how many were closed."""
        return self.relay.call(self._reset, lambda c: True)

    def _blackhole(self, on: bool) -> int:
        self.blackholed = on
        return 0 if on else self._reset(lambda c: c.gapped)

    def _reset(self, which) -> int:
        chosen = [c for c in self.connections if which(c)]
        for connection in chosen:
            self._close(connection)
            self.counts.resets += 1
        return len(chosen)

    def _close(self, connection: _Connection) -> None:
        self.connections.discard(connection)
        _abort(connection.client)
        _abort(connection.server)
        current = asyncio.current_task()
        for task in connection.tasks:
            if task is not current:
                task.cancel()

    def _delay(self, size: int, now: float, free_at: float) -> tuple[float, float]:
        """(delivery time, end of transmission) of a chunk of ``size`` bytes read at ``now``, the link's transmitter
        free from ``free_at``."""
        sent = now
        if self.bandwidth_bps is not None:
            sent = max(now, free_at) + size / self.bandwidth_bps
        jitter = self.random.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0
        return sent + self.latency_s + jitter, sent

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(client=writer)
        self.connections.add(connection)
        self.counts.connections += 1
        _no_delay(writer)
        if self.blackholed:  # as if its SYN were lost beyond the relay: the target never hears of it
            connection.gapped = True
            connection.tasks = [asyncio.current_task()]
            try:
                while data := await reader.read(CHUNK):
                    self.counts.dropped_bytes += len(data)
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                if connection in self.connections:
                    self._close(connection)
            return
        try:
            server_reader, connection.server = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.target_port), WAIT_S)
        except (OSError, asyncio.TimeoutError):  # the target is not listening: as a refused connection would
            self._close(connection)
            return
        _no_delay(connection.server)
        if connection not in self.connections:  # reset meanwhile
            _abort(connection.server)
            return
        connection.tasks = [asyncio.current_task()]
        pipes = [asyncio.ensure_future(self._pipe(connection, reader, connection.server)),
                 asyncio.ensure_future(self._pipe(connection, server_reader, writer))]
        connection.tasks.extend(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # reset, or the relay is closing: nothing to report
            pass
        finally:
            if connection in self.connections:
                self._close(connection)

    async def _pipe(self, connection: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One direction of a connection: read, delay, deliver in order; ends when either side closes."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue(QUEUED_CHUNKS)

        async def deliver() -> None:
            try:
                while True:
                    due, data = await queue.get()
                    if data is None:
                        return
                    pause = due - loop.time()
                    if pause > 0:
                        await asyncio.sleep(pause)
                    self.counts.forwarded_bytes += len(data)  # counted before it can arrive
                    writer.write(data)
                    await writer.drain()
            except OSError:  # the receiving side is gone: so is the connection
                if connection in self.connections:
                    self._close(connection)

        sender = asyncio.ensure_future(deliver())
        connection.tasks.append(sender)
        last_due, free_at = 0.0, 0.0
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if self.blackholed or connection.gapped:
                    connection.gapped = True
                    self.counts.dropped_bytes += len(data)
                    continue
                due, free_at = self._delay(len(data), loop.time(), free_at)
                last_due = max(last_due, due)
                await queue.put((last_due, data))
            await queue.put((0.0, None))  # what was read still arrives, then the other side sees the end
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Relay:
    """Links on 127.0.0.1 served by one asyncio loop in a thread; use as a context manager (``close`` ends it all)."""

    def __init__(self, *, seed: int = 0):
        self.seed = seed
        self.links: list[Link] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="crc-relay", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, function, *args):
        """Run ``function(*args)`` in the relay's loop and return its result (at most WAIT_S)."""
        async def run():
            return function(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(WAIT_S)

    def add(self, target_port: int, *, port: int = 0, name: str = "", latency_s: float = 0.0, jitter_s: float = 0.0,
            bandwidth_bps: float | None = None) -> Link:
        """A new link listening on ``port`` of 127.0.0.1 (0: a free one; its ``address`` is tcp://127.0.0.1:PORT),
        forwarding to 127.0.0.1:``target_port``. ``bandwidth_bps``: bytes per second (None: no cap).

        Give ``port`` when the targets' ports are chosen but not bound yet (``free_ports`` for both together): a
        free port the system picks for the link could be one of theirs."""
        link = Link(self, name or f"link-{len(self.links)}", target_port, latency_s=latency_s, jitter_s=jitter_s,
                    bandwidth_bps=bandwidth_bps, seed=hash((self.seed, len(self.links))) & 0xFFFFFFFF)

        async def listen():
            link.server = await asyncio.start_server(link._accept, "127.0.0.1", port)
            return link.server.sockets[0].getsockname()[1]

        port = asyncio.run_coroutine_threadsafe(listen(), self.loop).result(WAIT_S)
        link.address = f"tcp://127.0.0.1:{port}"
        self.links.append(link)
        return link

    def close(self) -> None:
        """Stop listening, close every connection, end the loop and its thread (each step bounded)."""
        if not self.thread.is_alive():
            return

        async def stop():
            for link in self.links:
                if link.server is not None:
                    link.server.close()
                for connection in list(link.connections):
                    link._close(connection)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=WAIT_S)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(WAIT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        if not self.thread.is_alive():
            self.loop.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
