import math

import msgpack
import numpy as np
import pytest

from crc.nodes.wire import ENVELOPE_BYTES, Expectation, Rejected, decode, encode

SIZE = 12
EXPECT = Expectation(run="r1", schema_id="ab" * 32, ess=400.0, size=SIZE, neighbours=frozenset({"tcp://127.0.0.1:7001"}))


def frame(**changes):
    fields = dict(run="r1", sender="tcp://127.0.0.1:7001", round_=3, schema_id="ab" * 32, ess=400.0,
                  stats=np.linspace(-2.0, 5.0, SIZE))
    fields.update(changes)
    return encode(**fields)


def raw_frame(**changes):
    obj = msgpack.unpackb(frame(), raw=False)
    obj.update(changes)
    return msgpack.packb(obj, use_bin_type=True)


def test_round_trip_keeps_negative_statistics_bit_for_bit():
    stats = np.array([-1e300, -0.0, 1e-320, 3.5, -7.25, 1e300] * 2)
    message = decode(frame(stats=stats), EXPECT)
    assert message.sender == "tcp://127.0.0.1:7001" and message.round == 3
    assert message.stats.tobytes() == stats.astype("<f8").tobytes()


def test_envelope_overhead_is_small():
    assert len(frame()) - 8 * SIZE <= 256 and len(frame()) <= EXPECT.max_frame_bytes


@pytest.mark.parametrize("data, cause", [
    (b"\x00\x01random bytes", "malformed"),
    (frame()[:-7], "malformed"),
    (b"\xc6\xff\xff\xff\xf0" + b"x" * 10, "malformed"),          # bin 32 claiming ~4 GB
    (b"\xdf\xff\xff\xff\xff", "malformed"),                      # map 32 claiming 4e9 entries
    (msgpack.packb([1, 2, 3]), "malformed"),
    (b"\x00" * (8 * SIZE + ENVELOPE_BYTES + 1), "oversized"),
    (frame(schema_id="cd" * 32), "schema"),
    (frame(ess=401.0), "ess"),
    (frame(stats=np.full(SIZE, np.nan)), "non-finite"),
    (frame(stats=np.r_[np.ones(SIZE - 1), np.inf]), "non-finite"),
    (frame(stats=np.ones(SIZE - 1)), "length"),
    (frame(stats=np.ones(SIZE + 3)), "length"),
    (frame(sender="tcp://10.0.0.9:7001"), "sender"),
    (frame(run="other"), "run"),
    (raw_frame(v=2), "version"),
    (raw_frame(type="hello"), "type"),
    (raw_frame(round=-1), "malformed"),
    (raw_frame(ess=float("inf")), "malformed"),
    (raw_frame(ess=400), "malformed"),
    (raw_frame(extra=1), "malformed"),
    (raw_frame(dtype=">f8"), "length"),
    (raw_frame(n=SIZE + 1), "length"),
])
def test_hostile_frames_are_rejected_by_cause(data, cause):
    with pytest.raises(Rejected) as info:
        decode(data, EXPECT)
    assert info.value.cause == cause


def test_ess_mismatch_names_both_values():
    with pytest.raises(Rejected, match=r"ESS 401.0, this peer uses 400.0: give every peer the same --ess"):
        decode(frame(ess=401.0), EXPECT)
    assert math.isclose(decode(frame(ess=400.0 * (1 + 1e-12)), EXPECT).stats[0], -2.0)
