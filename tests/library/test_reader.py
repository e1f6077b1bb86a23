"""The CSV reader: pandas' fast path and the standard library's careful path agree, and bad files are one line."""

import gzip
import io
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crc.core.data import dataset_from_columns
from crc.core.errors import CRCError
from crc.tables import reader
from crc.tables.reader import MAX_CELL_CHARS, read_csv
from support.blocking import fails_if_blocked


def cells_of(columns):
    return {name: column.cells() for name, column in columns.items()}


def careful(path, header=True):
    raw = path.read_bytes() if not str(path).endswith(".gz") else gzip.decompress(path.read_bytes())
    names = reader._header(path, raw.split(b"\n")[0]) if header else None
    return reader._careful(path, raw, header, names)


def test_pandas_parses_numbers_as_python_does():
    rng = np.random.default_rng(0)
    values = (rng.normal(size=3000) * 10.0 ** rng.integers(-300, 300, 3000)).tolist()
    spellings = [repr(v) for v in values] + [f"{v:.17g}" for v in values] + [f"{v:.5e}" for v in values] + ["0.1", "1e-320", "-0"]
    parsed = pd.read_csv(io.StringIO("a\n" + "\n".join(spellings)), **reader.EXACT_FLOATS)["a"].to_numpy()
    assert parsed.tolist() == [float(s) for s in spellings]


@pytest.mark.parametrize("text", [
    "a,b,cls\n1.5,x,yes\n,y,no\n",
    "a,b,cls\n1,x,yes\n2.0,?,no\n 3 , y ,yes\n",
    "a,b,cls\n\n1,x,yes\n\n2,y,no\n,,\n",
    'a,b,cls\n1,"x, quoted",yes\n2,y,no\n',
    "a,b,cls\ninf,x,yes\n1,y,no\n",
    "a,b,cls\nTrue,x,yes\nFalse,y,no\n",
    "a,b,cls\n1,x,yes\nz,y,no\n",
])
def test_fast_and_careful_readers_agree(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert cells_of(read_csv(path)) == cells_of(careful(path))


@pytest.mark.parametrize("end", ["\r", "\r\n"])
def test_a_file_of_other_line_ends_reads_as_with_newlines(tmp_path, end):
    """Old Mac exports end lines with CR alone: its header was refused as 'new-line character seen in unquoted field'."""
    text = "a,b,cls\n1.5,x,yes\n,y,no\n2,?,yes\n"
    (tmp_path / "lf.csv").write_text(text)
    (tmp_path / "other.csv").write_bytes(text.replace("\n", end).encode())
    assert cells_of(read_csv(tmp_path / "other.csv")) == cells_of(read_csv(tmp_path / "lf.csv"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32), st.integers(-5, 5),
                                    st.sampled_from(["", "?", "nan", "a", " b "])),
                          st.sampled_from(["p", "q", "1", "2.0"])), min_size=2, max_size=30))
def test_any_small_table_reads_as_the_careful_reader_reads_it(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("t") / "t.csv"
    path.write_text("f,cls\n" + "".join(f"{f},{c}\n" for f, c in rows))
    try:
        expected = cells_of(careful(path))
    except CRCError as exc:
        with pytest.raises(CRCError):
            read_csv(path)
        return exc
    assert cells_of(read_csv(path)) == expected


def test_a_million_cells_keep_the_schema_rules(tmp_path):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x": rng.normal(size=20000), "k": rng.integers(0, 4, 20000), "cls": rng.choice(["u", "v"], 20000)})
    frame.loc[::7, "x"] = np.nan
    path = tmp_path / "t.csv.gz"
    frame.to_csv(path, index=False)
    dataset = dataset_from_columns(read_csv(path), "cls")
    kinds = [f.kind for f in dataset.schema.features]
    assert kinds == ["continuous", "discrete"] and dataset.schema.classes == ("u", "v")
    np.testing.assert_array_equal(dataset.x[:, 0], frame["x"].to_numpy())
    assert dataset.schema.features[1].categories == ("0", "1", "2", "3")


@pytest.mark.parametrize("content, message", [
    (b"a,b\n1,2\n3\n", "line 3 has 1 cells, expected 2: give every row one cell per column name$"),
    (b"# iris\na,b\n1,2\n", "line 2 has 2 cells, expected 1 \\(the first line starts with '#': crc reads no comment lines; "
                          "delete it\\)$"),
    (b"a;y\n1,5;p\n", "a header of one column, named 'a;y' \\(the file looks separated by ';': crc reads "
                      "comma-separated files; save it with commas between cells and points in numbers\\)$"),  # decimal commas
    (b"a;y\n1.5;p\n2;q\n", "a header of one column, named 'a;y' \\(the file looks separated by ';'"),  # no comma at all
    (b"a\ty\n1.5\tp\n2\tq\n", "a header of one column, named 'a\\\\ty' \\(the file looks separated by '\\\\t'"),
    (b"a,b,\n1,2,\n", "header has empty column names: column 3 has none: name that column, or delete it$"),
    (b"a,b\n", "header but no data"),
    (b"", "no rows"),
    (b"a,a\n1,2\n", "repeated column names: 'a' names two columns: give each column a name of its own$"),
    (b"0,1.5,0\n1,2,3\n", "repeated column names: '0' names two columns \\(its first line looks like data, not column "
                         "names: add a header row naming the columns\\)$"),
    (b"a,b\n1,\xff\xfe\n", r"not UTF-8 text \(.*\): save the file as UTF-8"),
    ("a,b\n1,grün\n".encode("latin-1"), r"not UTF-8 text \(.*\): save the file as UTF-8"),
    ("a,grün\n1,2\n".encode("latin-1"), r"not UTF-8 text \(.*\): save the file as UTF-8"),  # in the header
    (b"\x00\x01\x02\x89PNG\r\n\x1a\n" * 50, "cells|UTF-8|column"),
])
def test_bad_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(CRCError, match=message):
        read_csv(path)


def test_a_header_longer_than_the_scan_keeps_is_refused_as_such(tmp_path):
    """It was cut where the scan stopped, its last name a prefix of another: 'header has empty or repeated names'."""
    names = [f"c{j}" for j in range(reader.MAX_HEADER_BYTES // 6)] + ["y"]
    path = tmp_path / "wide.csv"
    path.write_text(",".join(names) + "\n" + ",".join(["1"] * len(names)) + "\n")
    assert len(",".join(names)) > reader.MAX_HEADER_BYTES
    with pytest.raises(CRCError, match=f"wide.csv: first line longer than {reader.MAX_HEADER_BYTES} bytes"):
        read_csv(path)
    path.write_text(",".join(names[:1000]) + "\n" + ",".join(["1"] * 1000) + "\n")
    assert list(read_csv(path)) == names[:1000]


def test_a_column_name_on_two_lines_is_refused_as_such(tmp_path):
    """A spreadsheet's header cell with a line break: it was 'line 2 has 3 cells, expected 1'."""
    path = tmp_path / "t.csv"
    path.write_text('"a\nb",c,y\n1,2,p\n3,4,q\n')
    with pytest.raises(CRCError, match="t.csv: a quoted column name in the header spans lines"):
        read_csv(path)
    path.write_text('"a ""b""",c,y\n1,2,p\n3,4,q\n')
    assert list(read_csv(path)) == ['a "b"', "c", "y"]


@pytest.mark.parametrize("offset", [0, reader.SCAN_BLOCK - 7, 3 * reader._WINDOW + 5])
def test_a_stretch_without_a_separator_longer_than_a_cell_is_refused_as_the_file_is_counted(tmp_path, offset):
    """A 2 GB file of NUL bytes after its header took 14.7 GB and two minutes before its one cell was refused; the
    stretch may start anywhere, across the scan's blocks too."""
    path = tmp_path / "long.csv"
    with open(path, "wb") as stream:
        stream.write(b"a,cls\n" + b"1,p\n" * (offset // 4))
        stream.truncate(stream.tell() + 2 * 2**30)  # sparse: 2 GiB of NUL bytes
    with pytest.raises(CRCError, match=r"long.csv: a cell longer than 65536 characters \([\d,]+ bytes or more without "
                                       r"a comma or line end\): is it a CSV file\?$"):
        read_csv(path)


def test_the_longest_cell_in_the_longest_utf8_passes_the_count(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_bytes(("a,cls\r\n" + "\U0001F600" * MAX_CELL_CHARS + ",p\r\n1,q\r\n").encode())
    assert len(read_csv(path)["a"].values[0]) == MAX_CELL_CHARS


def test_huge_cells_and_corrupt_gzip_are_refused(tmp_path):
    for quote in ("", '"'):
        path = tmp_path / f"big{len(quote)}.csv"
        path.write_text(f"a,cls\n{quote}{'x' * (2 * MAX_CELL_CHARS)}{quote},p\n1,q\n")
        with pytest.raises(CRCError, match=f"column 'a', data row 1: cell longer than {MAX_CELL_CHARS} characters \\(crc "
                                           "reads numbers and categories, not free text\\): drop the column, or shorten"):
            read_csv(path)
    rows = "".join(f"{v},p\n" for v in np.random.default_rng(0).normal(size=2000))
    compressed = gzip.compress(("a,cls\n" + rows).encode())
    broken = tmp_path / "t.csv.gz"
    broken.write_bytes(compressed[: len(compressed) // 2])
    with pytest.raises(CRCError, match=r"t.csv.gz: damaged or cut short \(.*\): copy the file again"):
        read_csv(broken)
    named = tmp_path / "plain.csv.gz"  # a plain file named as compressed: it was 'cannot read (Not a gzipped file)'
    named.write_text("a,cls\n" + rows)
    with pytest.raises(CRCError, match=r"plain.csv.gz: not gzip-compressed \(.*\), though its name ends in .gz: rename"):
        read_csv(named)
    plain = tmp_path / "plain.csv"
    plain.write_text("a,cls\n" + rows)
    with pytest.raises(CRCError, match="larger than 100 bytes"):
        read_csv(plain, max_bytes=100)


def test_files_of_too_many_cells_are_refused_before_parsing(tmp_path, monkeypatch):
    import crc.tables.reader as reader
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(b"a,b,cls\n" + b"1,2,p\n" * 100))  # 303 cells, 3 per line
    assert list(read_csv(path, max_cells=303)) == ["a", "b", "cls"]
    with pytest.raises(CRCError, match=r"t.csv.gz: about 303 cells \(rows × columns\), more than the 300 read from a file:"):
        read_csv(path, max_cells=300)
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(b"a,cls\r\n" + b"1,p\r\n" * 100)
    with pytest.raises(CRCError, match="about 202 cells"):
        read_csv(crlf, max_cells=200)
    quoted = tmp_path / "q.csv"
    quoted.write_text('a,cls\n' + '"1",p\n' * 100)
    monkeypatch.setattr(reader, "MAX_QUOTED_CELLS", 150)
    with pytest.raises(CRCError, match="more than the 150 read from a file that quotes cells"):
        read_csv(quoted)
    monkeypatch.setattr(reader, "_fast", lambda *args: pytest.fail("parsed a file over the limit"))
    monkeypatch.setattr(reader, "_careful", lambda *args: pytest.fail("parsed a file over the limit"))
    with pytest.raises(CRCError, match="cells"):
        read_csv(path, max_cells=10)


def test_short_rows_count_as_wide_as_the_first_line(tmp_path, monkeypatch):
    """pandas pads a short row to the first line's width: 2 000 columns over 2 000 rows of one cell (a 20 KB file)
    would be 4 million cells parsed, so the limit counts them before parsing."""
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{j}" for j in range(2000)) + "\n" + "1\n" * 2000)
    monkeypatch.setattr(reader, "_fast", lambda *args: pytest.fail("parsed a file over the limit"))
    with pytest.raises(CRCError, match=r"wide.csv: about 4,002,000 cells \(rows × columns\), more than the 1,000,000"):
        read_csv(path, max_cells=10**6)
    multiline = tmp_path / "multiline.csv"  # 4 + 7 x 100 cells at most by its commas and lines, 4 x 401 by its width
    multiline.write_text("a,b,c,cls\n" + '1,2,"three\nfour\nfive\nsix",p\n' * 100)
    assert len(read_csv(multiline, max_cells=704)["c"].values) == 1


def test_a_file_the_fast_reader_gives_up_on_is_read_cell_by_cell_only_within_that_limit(tmp_path, monkeypatch):
    """A short last row sends a file to the careful reader, which takes about 100 bytes a cell (2^25 cells of '10':
    3.2 GB), so the limit of files read cell by cell holds for it too."""
    path = tmp_path / "short.csv"
    path.write_text("a,cls\n" + "10,pp\n" * 100 + "10\n")
    with pytest.raises(CRCError, match="line 102 has 1 cells, expected 2"):
        read_csv(path)
    monkeypatch.setattr(reader, "MAX_QUOTED_CELLS", 150)
    monkeypatch.setattr(reader, "_careful", lambda *args: pytest.fail("read a file over the limit cell by cell"))
    with pytest.raises(CRCError, match=r"short.csv: about 204 cells \(rows × columns\), more than the 150 read from a file cell by cell"):
        read_csv(path)


@pytest.mark.parametrize("quote", ["", '"'])
def test_a_file_that_shrinks_between_the_count_and_the_parse_is_refused(tmp_path, monkeypatch, quote):
    path = tmp_path / "t.csv"
    path.write_text(f"a,cls\n{quote}1{quote},p\n1,p\n")
    scan = reader._scan

    def then_shrink(*args):
        found = scan(*args)
        path.write_text("a,cls\n")
        return found

    monkeypatch.setattr(reader, "_scan", then_shrink)
    with pytest.raises(CRCError, match="t.csv: changed while it was read"):
        read_csv(path)


def test_a_pipe_or_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """It would be read twice: a pipe's second read found nothing (an IndexError traceback), a FIFO's blocked."""
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with fails_if_blocked(), pytest.raises(CRCError, match="fifo.csv: not a regular file .* save it to a file"):
        read_csv(fifo)
    with pytest.raises(CRCError, match=f"^{tmp_path}: a directory, not a CSV file: name a file in it$"):
        read_csv(tmp_path)


@pytest.mark.parametrize("quote", ["", '"'])
@pytest.mark.parametrize("grown", ["a,cls\n" + "1,p\n" * 1000, ",".join(f"c{j}" for j in range(1000)) + "\n" + "1\n" * 2])
def test_a_file_that_grows_between_the_count_and_the_parse_is_refused(tmp_path, monkeypatch, quote, grown):
    """The parse pass reads the file again: it may not find more bytes, commas or line ends than the count did, nor
    another first line (pandas pads short rows to its width)."""
    path = tmp_path / "t.csv"
    path.write_text(f"a,cls\n{quote}1{quote},p\n1,p\n")
    scan = reader._scan

    def then_grow(*args):
        found = scan(*args)
        path.write_text(grown.replace("1", f"{quote}1{quote}"))
        return found

    monkeypatch.setattr(reader, "_scan", then_grow)
    with pytest.raises(CRCError, match="t.csv: changed while it was read"):
        read_csv(path)


def test_dataframes_are_tables_everywhere(tmp_path):
    from crc.core.data import encode_features
    frame = pd.DataFrame({"x": [0.5, np.nan, 2.0, 3.5] * 5, "k": ["a", "b", None, "a"] * 5, "cls": [1, 2, 1, 2] * 5})
    dataset = dataset_from_columns(frame, "cls")
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    from_file = dataset_from_columns(read_csv(path), "cls")
    assert dataset.schema == from_file.schema
    np.testing.assert_array_equal(dataset.x, from_file.x)
    np.testing.assert_array_equal(encode_features(dataset.schema, frame), encode_features(dataset.schema, read_csv(path)))


@pytest.mark.parametrize("text", [
    "key,a\n007,1\n 8 ,2\n1e3,3\n12345678901234567890,4\n12345678901234567891,5\n,6\n",  # numbers alone: fast reader
    'key,a\n"007",1\n 8 ,2\n1e3,3\n12345678901234567890,4\n12345678901234567891,5\n?,6\n',  # quoted: careful reader
])
def test_a_text_column_keeps_each_cell_as_written(tmp_path, text):
    """Instance ids are compared as written: ``007`` is not ``7``, and two 20-digit ids are not one float."""
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert read_csv(path, text=("key",))["key"].texts() == ["007", "8", "1e3", "12345678901234567890",
                                                            "12345678901234567891", ""]
    assert read_csv(path)["a"].cells() == ["1", "2", "3", "4", "5", "6"]
