import json
import os
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crc.core.errors import CRCError
from crc.nodes import checkpoint
from support.blocking import fails_if_blocked

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
IDENTITY = {"bind": "tcp://127.0.0.1:7000", "peers": ["tcp://127.0.0.1:7001"], "rounds": 10, "iters": 1, "run": "crc",
            "schema_id": "ab" * 32, "ess": 123.25, "instances": 50}
STATS = np.linspace(-3.5, 40.0, 17)
METRICS = {"rounds_done": 4, "soft_loss": [0.5, 0.4, 0.3, 0.25], "round_ms": [3.0, 1.5, 1.25, 1.0], "messages_sent": 4,
           "rejected": {"malformed": 0, "stale": 1}, "missing": {"tcp://127.0.0.1:7001": 0}}


def written(directory, round_=4, **changes):
    fields = {"identity": IDENTITY, "round_": round_, "stats": STATS, "metrics": METRICS} | changes
    checkpoint.save(directory, **fields)
    return directory / checkpoint.file_name(round_)


def forged(header: dict, stats: np.ndarray = STATS, magic: bytes = checkpoint.MAGIC) -> bytes:
    """A well-formed file (right length and CRC) with any header: what only a deliberate edit produces; ``stats`` is
    everything after the header (the statistics, then the series)."""
    head = json.dumps(header).encode()
    body = head + np.asarray(stats, dtype="<f8").tobytes()
    return checkpoint.PREFIX.pack(magic, len(head), zlib.crc32(body)) + body


def header(**changes) -> dict:
    return {"identity": IDENTITY, "round": 4, "size": STATS.size, "metrics": METRICS} | changes


def test_a_checkpoint_round_trips_exactly_and_is_compact(tmp_path):
    path = written(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600  # the peer's state: its owner's only, whatever the umask
    round_, stats, metrics = checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)
    assert round_ == 4 and metrics == METRICS
    np.testing.assert_array_equal(stats, STATS)
    assert path.stat().st_size < 8 * STATS.size + 600
    assert checkpoint.completed_round(tmp_path) == 4


def test_the_per_round_series_go_raw_after_the_statistics_not_into_the_header(tmp_path):
    """A long run's checkpoint: its two figures a round as JSON in the header cost about 100 ms a round at 100,000
    rounds; raw, 8 bytes each."""
    rounds = 100_000
    series = {"soft_loss": list(np.linspace(0.9, 0.1, rounds)), "round_ms": list(np.linspace(1, 5, rounds))}
    metrics = {"rounds_done": 10, "messages_sent": 3} | series
    path = written(tmp_path, 10, metrics=metrics)
    raw = path.read_bytes()
    head = struct.unpack_from("<I", raw, 8)[0]
    header_ = json.loads(raw[16:16 + head])
    assert header_["series"] == {"soft_loss": rounds, "round_ms": rounds} and "soft_loss" not in header_["metrics"]
    assert len(raw) == 16 + head + 8 * (STATS.size + 2 * rounds)
    assert checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)[2] == metrics


def test_a_checkpoint_of_the_previous_version_is_resumed(tmp_path):
    """Version 2 kept every metric, the lists too, in its header."""
    (tmp_path / "checkpoint.4.bin").write_bytes(forged(header(), magic=checkpoint.OLD_MAGIC))
    round_, stats, metrics = checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)
    assert round_ == 4 and metrics == METRICS
    np.testing.assert_array_equal(stats, STATS)


def test_non_finite_series_are_refused(tmp_path):
    forged_ = forged(header(metrics={"rounds_done": 4}, series={"loss": 1}), np.r_[STATS, np.nan])
    (tmp_path / "checkpoint.4.bin").write_bytes(forged_)
    with pytest.raises(CRCError, match="statistics or series contain non-finite values"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)


def test_no_checkpoint_is_round_0_and_nothing_to_resume(tmp_path):
    assert checkpoint.load(tmp_path / "none", identity=IDENTITY, size=STATS.size) is None
    assert checkpoint.completed_round(tmp_path / "none") == 0


def test_each_round_replaces_the_last_and_the_newest_wins_over_a_leftover(tmp_path):
    for round_ in range(1, 6):
        written(tmp_path, round_, metrics=METRICS | {"rounds_done": round_})
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.5.bin"]
    (tmp_path / "checkpoint.5.bin").rename(tmp_path / "keep")
    written(tmp_path, 3, metrics=METRICS | {"rounds_done": 3})
    (tmp_path / "keep").rename(tmp_path / "checkpoint.5.bin")  # a crash between the rename and the removal
    assert checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)[0] == 5
    written(tmp_path, 5, metrics=METRICS | {"rounds_done": 5})  # the same round again (the final write)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.5.bin"]


@pytest.mark.parametrize("change, message", [
    ({"round": 10**9}, "round 1000000000 is beyond the run's 10 rounds"),
    ({"round": 11}, "beyond the run's 10 rounds"),
    ({"round": True}, "round must be an integer, got true"),
    ({"round": 4.0}, "round must be an integer, got 4.0"),
    ({"round": -1}, "round must be at least 0"),
    ({"size": True}, "size must be an integer, got true"),
    ({"size": 16}, "holds 136 bytes of statistics and series, not the 128 its header says"),
    ({"series": {"loss": 2}}, "holds 136 bytes of statistics and series, not the 152 its header says"),
    ({"series": {"loss": -1}}, "series.loss must be from 0 to 400004, got -1"),
    ({"series": {"a": 200_002, "b": 200_003}}, "its series hold more than 400004 values"),
    ({"series": {"rounds_done": 0}}, "series 'rounds_done' is among the metrics too"),
    ({"series": [1]}, "series must be an object"),
    ({"identity": IDENTITY | {"ess": 1.0}}, r"checkpoint of a different configuration \(ess differ\)"),
    ({"identity": IDENTITY | {"rounds": 10**9}}, r"different configuration \(rounds differ\)"),
    ({"identity": [1]}, "identity must be an object"),
    ({"metrics": METRICS | {"rounds_done": 3}}, "metrics.rounds_done is 3, the round 4"),
    ({"metrics": METRICS | {"soft_loss": [0.5, True]}}, r"metrics.soft_loss\[1\] must be a number or a string, got true"),
    ({"metrics": METRICS | {"missing": {"a": None}}}, "metrics.missing.a must be a number or a string, got null"),
    ({"metrics": 7}, "metrics must be an object"),
    ({"metrics": {"soft_loss": []}}, "metrics.rounds_done must be an integer, got null"),  # resumed, it was saved as 0
])
def test_a_well_formed_but_wrong_checkpoint_is_refused_in_one_line(tmp_path, change, message):
    round_ = change.get("round", 4)
    if type(round_) is int and round_ >= 0:  # named and counted like a real checkpoint of that round
        change = {"metrics": METRICS | {"rounds_done": round_}} | change
    name = checkpoint.file_name(round_) if type(round_) is int and round_ >= 0 else "checkpoint.4.bin"
    (tmp_path / name).write_bytes(forged(header(**change)))
    with pytest.raises(CRCError, match=message) as raised:
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)
    assert str(raised.value).startswith(str(tmp_path)) and "\n" not in str(raised.value)


def test_checking_a_long_metrics_list_takes_no_memory_per_entry(tmp_path):
    """The metrics' check named every entry before looking at it: a header of 3 million numbers took 660 MB to check
    (a 64 MiB header would have taken 3.5 GB)."""
    metrics = {"rounds_done": 4, "soft_loss": [0.5] * 200_000, "missing": {f"tcp://10.0.{i}.1:7000": i for i in range(9)}}
    tracemalloc.start()
    checkpoint._check_metrics(metrics, 4)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20


def test_statistics_that_are_not_finite_or_of_another_model_are_refused(tmp_path):
    (tmp_path / "checkpoint.4.bin").write_bytes(forged(header(), np.r_[STATS[:-1], np.inf]))
    with pytest.raises(CRCError, match="statistics or series contain non-finite values"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)
    (tmp_path / "checkpoint.4.bin").write_bytes(forged(header()))
    with pytest.raises(CRCError, match="17 statistics, the model has 18"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=18)


def test_a_checkpoint_larger_than_the_model_s_is_refused_before_reading(tmp_path):
    """Reading a checkpoint takes twice its size (the bytes and the statistics): a 1 GiB one took 2.3 GB before its
    length was refused, so its size is bounded by the model's statistics before it is read."""
    with open(tmp_path / "checkpoint.4.bin", "wb") as stream:
        stream.truncate(2**30)  # sparse
    limit = checkpoint.PREFIX.size + checkpoint.MAX_HEADER_BYTES + 8 * (STATS.size + checkpoint.MAX_SERIES_VALUES)
    with pytest.raises(CRCError, match=f"checkpoint.4.bin: checkpoint larger than {limit} bytes"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)


def test_a_file_named_for_another_round_is_refused(tmp_path):
    (tmp_path / "checkpoint.7.bin").write_bytes(forged(header()))
    with pytest.raises(CRCError, match="checkpoint.7.bin: damaged checkpoint: it records round 4"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)


def test_a_fifo_in_a_checkpoint_s_place_is_refused_without_waiting_for_a_writer(tmp_path):
    written(tmp_path)
    os.mkfifo(tmp_path / checkpoint.file_name(5))
    with fails_if_blocked(), pytest.raises(CRCError, match=r"checkpoint\.5\.bin: checkpoint is not a regular file"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)


def test_a_checkpoint_of_the_earlier_json_format_is_refused_not_ignored(tmp_path):
    (tmp_path / "checkpoint.json").write_text(json.dumps({"format": "crc-checkpoint/1", "round": 3}))
    with pytest.raises(CRCError, match="checkpoint.json: a checkpoint of an earlier crc version"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)


def test_a_deeply_nested_header_is_refused_before_parsing(tmp_path):
    deep = json.loads(json.dumps(header()))
    deep["metrics"]["x"] = json.loads("[" * 30 + "]" * 30)
    (tmp_path / "checkpoint.4.bin").write_bytes(forged(deep))
    assert checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)[0] == 4  # 30 deep: within the limit
    raw = forged(header()).replace(b'"metrics": {', b'"metrics": {"x":' + b"[" * 100_000 + b"]" * 100_000 + b",")
    head = struct.unpack_from("<I", raw, 8)[0] + 200_000 + len(b'"x":,')
    body = raw[16:]
    (tmp_path / "checkpoint.4.bin").write_bytes(checkpoint.PREFIX.pack(checkpoint.MAGIC, head, zlib.crc32(body)) + body)
    with pytest.raises(CRCError, match="nests arrays and objects more than 32 deep"):
        checkpoint.load(tmp_path, identity=IDENTITY, size=STATS.size)


@SETTINGS
@given(data=st.data())
def test_any_truncation_or_corruption_is_refused_in_one_line(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("c")
    path = written(directory)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] ^= data.draw(st.integers(1, 255))  # a changed byte: CRC-32 detects every error burst of 32 bits or less
    path.write_bytes(bytes(raw))
    with pytest.raises(CRCError) as raised:
        checkpoint.load(directory, identity=IDENTITY, size=STATS.size)
    assert str(raised.value).startswith(str(path)) and "\n" not in str(raised.value)
    assert checkpoint.completed_round(directory) is None


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_random_bytes_are_refused(tmp_path_factory, raw):
    directory = tmp_path_factory.mktemp("c")
    (directory / "checkpoint.3.bin").write_bytes(checkpoint.MAGIC[:4] + raw if raw[:1] == b"x" else raw)
    with pytest.raises(CRCError):
        checkpoint.load(directory, identity=IDENTITY, size=STATS.size)


@SETTINGS
@given(round_=st.integers(0, 10), stats=st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=50),
       loss=st.lists(st.floats(0, 1), max_size=10))
def test_whatever_a_peer_saves_loads_back_bit_for_bit(tmp_path_factory, round_, stats, loss):
    directory = tmp_path_factory.mktemp("c")
    metrics = {"rounds_done": round_, "soft_loss": loss, "rejected": {"stale": 2}}
    checkpoint.save(directory, identity=IDENTITY, round_=round_, stats=np.array(stats), metrics=metrics)
    back_round, back_stats, back_metrics = checkpoint.load(directory, identity=IDENTITY, size=len(stats))
    assert back_round == round_ and back_metrics == metrics
    np.testing.assert_array_equal(back_stats, np.array(stats, dtype=np.float64))
