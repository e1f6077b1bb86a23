"""The bench's fault-injecting relay (crc.bench.relay): latency and jitter measured through it, the bandwidth cap, a
blackhole that drops and then resets, resets that close, and real ZeroMQ transports (CURVE) through it with
``routes`` (``crc node --via``)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from crc.bench.relay import Relay
from crc.nodes.keys import PeerKeys, new_key_pair
from crc.nodes.launcher import free_ports
from crc.nodes.transport import Transport

WAIT_S = 5.0


class _Echo:
    """A TCP echo server on 127.0.0.1 (a thread per connection, all ended by ``close``)."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            thread = threading.Thread(target=self._echo, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _echo(self, conn):
        conn.settimeout(0.1)
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(WAIT_S)
        self.listener.close()


@pytest.fixture
def echo():
    server = _Echo()
    yield server
    server.close()


@pytest.fixture
def relay():
    with Relay(seed=1) as r:
        yield r


def _connect(link) -> socket.socket:
    port = int(link.address.rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _receive(s: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = s.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _round_trip(s: socket.socket, payload: bytes = b"ping") -> float:
    started = time.monotonic()
    s.sendall(payload)
    assert _receive(s, len(payload)) == payload
    return time.monotonic() - started


def test_latency_and_jitter_are_measured_through_the_relay(relay, echo):
    """50 ms +- 20 ms each way: a round trip takes two draws, from 60 to 140 ms, and the draws do vary."""
    link = relay.add(echo.port, latency_s=0.05, jitter_s=0.02)
    with _connect(link) as s:
        trips = [_round_trip(s) for _ in range(12)]
    assert min(trips) >= 0.06 - 0.002
    assert max(trips) <= 0.14 + 0.05  # scheduling on a shared machine
    assert max(trips) - min(trips) > 0.005
    assert 0.08 <= sorted(trips)[6] <= 0.13


def test_a_stream_stays_in_order_whatever_the_jitter(relay, echo):
    link = relay.add(echo.port, latency_s=0.01, jitter_s=0.01)
    payload = bytes(range(256)) * 64
    with _connect(link) as s:
        for k in range(0, len(payload), 512):
            s.sendall(payload[k:k + 512])
        assert _receive(s, len(payload)) == payload
    assert link.counts.forwarded_bytes == 2 * len(payload)


def test_the_bandwidth_cap_spreads_a_burst(relay, echo):
    """200 kB at 1 MB/s each way: at least 0.2 s there and the echo back is paced too."""
    link = relay.add(echo.port, bandwidth_bps=1_000_000)
    payload = b"x" * 200_000
    with _connect(link) as s:
        started = time.monotonic()
        s.sendall(payload)
        assert len(_receive(s, len(payload))) == len(payload)
        elapsed = time.monotonic() - started
    assert 0.2 <= elapsed <= 2.0


def test_a_blackhole_drops_both_ways_then_resets_the_connection(relay, echo):
    link = relay.add(echo.port, latency_s=0.0)
    with _connect(link) as s:
        assert _round_trip(s) < 1.0
        link.blackhole(True)
        s.sendall(b"lost")
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)
        assert link.counts.dropped_bytes >= 4
        link.blackhole(False)  # the stream has a gap: the connection that lost bytes is reset
        s.settimeout(WAIT_S)
        with pytest.raises(ConnectionResetError):
            s.recv(10)
    assert link.counts.resets == 1
    with _connect(link) as s:  # a new connection goes through again
        assert _round_trip(s) < 1.0


def test_a_blackhole_spares_nothing_new_and_a_quiet_connection_survives_it(relay, echo):
    link = relay.add(echo.port)
    with _connect(link) as quiet:
        assert _round_trip(quiet) < 1.0
        link.blackhole(True)
        with _connect(link) as fresh:
            fresh.sendall(b"nobody hears this")
            fresh.settimeout(0.3)
            with pytest.raises(TimeoutError):
                fresh.recv(10)
        link.blackhole(False)
        assert _round_trip(quiet) < 1.0  # it lost nothing: it carries on


def test_a_reset_closes_every_connection_of_the_link(relay, echo):
    link = relay.add(echo.port)
    other = relay.add(echo.port)
    with _connect(link) as a, _connect(link) as b, _connect(other) as c:
        for s in (a, b, c):
            assert _round_trip(s) < 1.0
        assert link.reset() == 2
        for s in (a, b):
            s.settimeout(WAIT_S)
            with pytest.raises(ConnectionResetError):
                s.recv(10)
        assert _round_trip(c) < 1.0  # another link is untouched


def test_a_target_that_does_not_listen_closes_the_connection(relay):
    (port,) = free_ports(1)
    link = relay.add(port)
    with contextlib.suppress(ConnectionResetError), _connect(link) as s:  # closed, or reset (even before connect returns)
        s.settimeout(WAIT_S)
        assert s.recv(10) == b""


@pytest.mark.parametrize("encrypted", [True, False])
def test_zeromq_peers_talk_through_the_relay_under_their_own_names(relay, encrypted):
    """A transport routed through a link (``routes``, ``crc node --via``): the frame arrives with the sender's
    CURVE key, the sender still names the receiver by its own address, and a reset is survived by reconnecting."""
    sender_port, receiver_port = free_ports(2)
    sender_address, receiver_address = f"tcp://127.0.0.1:{sender_port}", f"tcp://127.0.0.1:{receiver_port}"
    link = relay.add(receiver_port, latency_s=0.03)
    sender_keys, receiver_keys = new_key_pair(), new_key_pair()
    options = dict(max_frame_bytes=64, queue_messages=8, poll_slice_s=0.05)
    receiver = Transport(receiver_address, [sender_address], **options,
                         keys=PeerKeys(receiver_keys, {sender_address: sender_keys.public}) if encrypted else None)
    sender = Transport(sender_address, [receiver_address], **options, routes={receiver_address: link.address},
                       keys=PeerKeys(sender_keys, {receiver_address: receiver_keys.public}) if encrypted else None)
    try:
        def arrive() -> tuple[bytes, str | None]:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                got = receiver.receive(deadline)
                if got:
                    return got[0]
            raise AssertionError("nothing arrived through the relay")

        started = time.monotonic()
        assert sender.send_to(receiver_address, b"hello")
        frame, key = arrive()
        assert frame == b"hello" and key == (sender_keys.public if encrypted else None)
        assert time.monotonic() - started >= 0.03
        assert link.reset() >= 1
        time.sleep(0.3)  # ZeroMQ reconnects (100 ms) and shakes hands again through the link
        assert sender.send_to(receiver_address, b"again")
        assert arrive()[0] == b"again"
    finally:
        sender.close(0)
        receiver.close(0)


def test_a_connection_made_in_a_blackhole_never_reaches_the_target(relay, echo):
    link = relay.add(echo.port)
    link.blackhole(True)
    with _connect(link) as s:
        s.sendall(b"into the void")
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)
        link.blackhole(False)
        s.settimeout(WAIT_S)
        with pytest.raises(ConnectionResetError):
            s.recv(10)
    assert len(echo.threads) == 1  # the echo server accepted nothing
    assert link.counts.dropped_bytes == len(b"into the void")
