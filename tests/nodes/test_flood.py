"""A peer flooded with junk frames over real sockets: it keeps its rounds, its result and its 1 s stop."""

import signal
import time

import numpy as np

from crc.core.model_file import load_model
from crc.core.models import make_model
from crc.core.schema import Schema
from crc.nodes.wire import ENVELOPE_BYTES
from support.flood import Flood
from support.network import Network, scenario

SOCKETS = 20
FLOOD_S = 2.0
FLOODED = "rejected message (malformed)"


def max_frame_bytes(directory, config) -> int:
    return 8 * make_model(config.model, Schema.load(directory / "schema.json")).size + ENVELOPE_BYTES


def test_a_flooded_peer_finishes_like_the_simulator(tmp_path):
    config, graph, expected = scenario(tmp_path, nodes=3, rounds=30)
    victim = max(graph, key=graph.degree)  # the middle of the 3-node path
    with Network(tmp_path, graph, config, timeout=10.0, plaintext=True) as net:  # the flood reaches the decoder
        with Flood(net.addresses[victim], sockets=SOCKETS, frame_bytes=max_frame_bytes(tmp_path, config),
                   seconds=FLOOD_S) as flood:
            net.start_all()
            assert net.wait() == {i: 0 for i in range(3)}
            sent = flood.sent(timeout=FLOOD_S + 10)
        assert sent > 1000
        assert load_model(net.model_path(victim)).metrics["rejected"]["malformed"] > 0  # the flood reached the decoder
        np.testing.assert_allclose(net.stats(), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_sigterm_stops_a_flooded_peer_within_a_second(tmp_path):
    config, graph, _ = scenario(tmp_path, nodes=3, rounds=4)
    victim = max(graph, key=graph.degree)
    held_back = min(v for v in graph if v != victim)  # never started: the victim waits for it, flooded, all along
    with Network(tmp_path, graph, config, timeout=30.0, plaintext=True) as net, \
            Flood(net.addresses[victim], sockets=SOCKETS, frame_bytes=max_frame_bytes(tmp_path, config),
                  seconds=FLOOD_S + 5) as flood:
        net.start_all(order=[v for v in graph if v != held_back])
        net.wait_for_log(victim, FLOODED)  # the flood reaches its decoder (and goes on for FLOOD_S + 5 s)
        assert net.processes[victim].poll() is None
        started = time.monotonic()
        net.signal(victim, signal.SIGTERM)
        assert net.wait([victim], limit=5.0) == {victim: 128 + signal.SIGTERM}
        assert time.monotonic() - started < 1.0
        assert flood.process.poll() is None  # the flood was still on
    assert FLOODED in net.log_path(victim).read_text()
