"""What CURVE costs on the wire (crc.bench.wire_bytes): a relay counts the bytes between two real transports."""

import pytest

from crc.bench.wire_bytes import wire_bytes


@pytest.mark.parametrize("encrypted, overhead", [
    (False, 9),        # ZMTP's frame header: flags and an 8-byte length
    (True, 9 + 33),    # a CURVE MESSAGE command: name (8), nonce (8), MAC (16), flags (1), in a ZMTP frame
])
def test_bytes_per_message_are_the_frame_plus_the_protocols_overhead(encrypted, overhead):
    figures = wire_bytes(b"\x00" * 10_358, encrypted=encrypted, messages=50)
    assert figures["overhead_bytes_per_message"] == overhead
    assert figures["bytes_per_message"] == 10_358 + overhead
    assert 0 < figures["connection_bytes"] < 4096  # greetings and handshake, sent once per connection


def test_the_curve_handshake_costs_more_than_the_plaintext_one():
    assert wire_bytes(b"x" * 100, encrypted=True)["connection_bytes"] > wire_bytes(b"x" * 100, encrypted=False)["connection_bytes"]
