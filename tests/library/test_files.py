import json
import os
import stat
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crc.core import files
from crc.core.errors import CRCError
from crc.core.files import (
    MAX_JSON_DEPTH,
    atomic_write_bytes,
    nesting_depth,
    parse_json,
    read_bytes,
    read_json,
    without_strings,
)
from support.blocking import fails_if_blocked

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30)


def depth_of(value) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def strip(text: str) -> bytes:
    return without_strings(text.encode())


@SETTINGS
@given(JSON_VALUES)
def test_any_json_within_the_limits_reads_back_and_its_depth_is_counted_exactly(value):
    text = json.dumps(value)
    assert nesting_depth(strip(text)) == depth_of(value)
    assert parse_json(text.encode(), source="f") == value


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes_give_a_value_or_a_one_line_error_naming_the_source(raw):
    try:
        parse_json(raw, source="f.json")
    except CRCError as exc:
        assert str(exc).startswith("f.json: ") and "\n" not in str(exc)


@SETTINGS
@given(JSON_VALUES, st.data())
def test_truncated_json_gives_a_value_or_a_one_line_error(value, data):
    raw = json.dumps(value).encode()
    cut = data.draw(st.integers(0, len(raw)))
    try:
        parse_json(raw[:cut], source="f")
    except CRCError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
                                 b"[" * 10_000_000])
def test_deep_nesting_is_refused_before_parsing(raw):
    with pytest.raises(CRCError, match=f"f: JSON nests arrays and objects more than {MAX_JSON_DEPTH} deep"):
        parse_json(raw, source="f")


def test_the_depth_limit_is_inclusive_and_brackets_inside_strings_do_not_count():
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(at_limit.encode(), source="f") is not None
    with pytest.raises(CRCError, match="more than"):
        parse_json(("[" + at_limit + "]").encode(), source="f")
    tricky = json.dumps(["[[[{{{", 'quote " and [', "backslash \\", "\\\"[[[", {"k[": "]]]"}])
    assert nesting_depth(strip(tricky)) == 2
    assert parse_json(tricky.encode(), source="f")[3] == '\\"[[['


def test_emptying_the_strings_of_many_short_ones_takes_about_the_text_s_size():
    """``re.sub`` kept a piece per string: a 150 MB results file of short keys took 1.75 GB before its values were
    counted (and refused)."""
    text = json.dumps([{"round": k, "train_error": 0.5} for k in range(100_000)]).encode()
    tracemalloc.start()
    emptied = without_strings(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert emptied == text.replace(b'"round"', b'""').replace(b'"train_error"', b'""')
    assert peak < 3 * len(text)


@pytest.mark.parametrize("text, message", [
    ("[NaN]", "NaN is not allowed"), ('{"a": Infinity}', "Infinity is not allowed"), ("[-Infinity]", "Infinity is not allowed"),
    ("[1e999]", r"a number that overflows a float \(1e999\)"), ("[-2.5E+400]", "overflows a float"),
    ("[" + "9" * 350 + ".5]", "overflows a float"), ("[" + "1" * 25 + "]", "an integer of 25 digits"),
    ("[-123456789012345678901]", "an integer of 21 digits"), ("[" + "1" * 5000 + "]", "a number literal of more than 400 characters"),
    ("[0." + "1" * 10_000_000 + "e999]", "more than 400 characters"), ("{nope", "not valid JSON"),
    ("", "f: JSON is empty"), (" \n", "f: JSON is empty"),
])
def test_numbers_json_cannot_hold_as_floats_and_broken_text_are_refused(text, message):
    with pytest.raises(CRCError, match=message):
        parse_json(text.encode(), source="f")


@pytest.mark.parametrize("text, key", [('{"a": 1, "a": 2}', "a"), ('[{"x": {"b": [], "c": 0, "b": []}}]', "b"),
                                       ('{"\\u0061": 1, "a": 1}', "a")])
def test_a_key_named_twice_in_an_object_is_refused(text, key):
    """json kept the last value silently: a file that names a key twice reads differently in another reader."""
    with pytest.raises(CRCError, match=rf"^f: JSON is not valid JSON \(key '{key}' appears twice in an object\)$"):
        parse_json(text.encode(), source="f")
    assert parse_json(b'[{"a": 1}, {"a": 2}]', source="f") == [{"a": 1}, {"a": 2}]


def test_tiny_huge_and_long_but_finite_numbers_are_read():
    assert parse_json(b"[1e-400, -1.7e308, 12345678901234567890, 0.10000000000000000555111512312578270211]", source="f") == \
        [0.0, -1.7e308, 12345678901234567890, 0.1]


def test_non_utf8_is_one_line_and_utf16_is_read(tmp_path):
    with pytest.raises(CRCError, match=r"f: JSON is not valid JSON \(not UTF-8 text at byte 1\)"):
        parse_json(b'"\xff\xfe\xfa"', source="f")
    assert parse_json(json.dumps({"a": [1]}).encode("utf-16"), source="f") == {"a": [1]}


def test_too_many_values_are_refused_before_parsing(monkeypatch):
    """Each float costs 32 bytes of the budget, each string, container or member 64 (``PARSED_BYTES``)."""
    monkeypatch.setattr(files, "MAX_JSON_MEMORY", 32_000)
    assert len(parse_json(json.dumps([0.5] * 900).encode(), source="f")) == 900
    for value in ([0.5] * 1001, ["ab"] * 600, [[]] * 600, {str(k): 0 for k in range(300)}):
        with pytest.raises(CRCError, match=r"f: JSON holds too many values \(about 0.0 GiB parsed, more than 2.98023e-05 GiB\)$"):
            parse_json(json.dumps(value).encode(), source="f")
    assert parse_json(json.dumps(["a,b:c[{"] * 300).encode(), source="f")[0] == "a,b:c[{"  # inside strings: one each


def test_size_is_checked_before_reading(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as stream:
        stream.truncate(10 * 2**30)  # sparse: 10 GiB that would take long to read
    with pytest.raises(CRCError, match=f"{path}: schema file larger than 1000 bytes"):
        read_json(path, max_bytes=1000, what="schema file")


def test_unreadable_files_are_one_line(tmp_path):
    with pytest.raises(CRCError, match=f"{tmp_path / 'none.json'}: cannot read model file"):
        read_json(tmp_path / "none.json", what="model file")
    with pytest.raises(CRCError, match="cannot read"):
        read_bytes(tmp_path, max_bytes=10, what="file")


def test_a_stream_without_a_size_is_cut_at_the_limit(tmp_path):
    path = tmp_path / "zero"
    os.symlink("/dev/zero", path)
    with pytest.raises(CRCError, match="larger than 4096 bytes"):
        read_bytes(path, max_bytes=4096, what="file")


def test_a_regular_file_is_required_where_asked_and_a_fifo_is_not_waited_for(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_bytes(b"key")
    for path in (fifo, tmp_path / "zero"):
        if path.name == "zero":
            os.symlink("/dev/zero", path)
        with fails_if_blocked(), pytest.raises(CRCError, match=f"{path}: noise key is not a regular file; delete it"):
            read_bytes(path, max_bytes=32, what="noise key", regular=True)
    assert read_bytes(tmp_path / "file", max_bytes=32, what="noise key", regular=True) == b"key"


def test_a_fifo_without_a_writer_is_not_waited_for_and_a_pipe_is_read_to_its_end(tmp_path):
    """Every JSON reader blocked forever on a FIFO that no process writes to (``crc predict --model-file FIFO``)."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with fails_if_blocked(), pytest.raises(CRCError, match=f"^{fifo}: model file is empty$"):
        read_json(fifo, what="model file")
    reading, writing = os.pipe()
    with fails_if_blocked(), os.fdopen(writing, "wb") as writer, os.fdopen(reading, "rb") as reader:
        writer.write(b'{"a": [1, 2]}')
        writer.close()
        assert read_json(f"/dev/fd/{reader.fileno()}") == {"a": [1, 2]}


def test_atomic_write_replaces_whole_files_and_leaves_no_temporary(tmp_path):
    for durable in (True, False):
        atomic_write_bytes(tmp_path / "d" / "f", b"one" * 1000, durable=durable)
        atomic_write_bytes(tmp_path / "d" / "f", b"two", durable=durable)
        assert (tmp_path / "d" / "f").read_bytes() == b"two"
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["f"]


def test_atomic_writes_get_the_umask_permissions_unless_private(tmp_path):
    mask = os.umask(0o077)
    os.umask(mask)
    atomic_write_bytes(tmp_path / "shared", b"x")
    atomic_write_bytes(tmp_path / "private", b"x", private=True)
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o600
