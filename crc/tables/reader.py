"""CSV files (plain or gzip) into factorized columns, with pandas' C parser.

pandas parses numbers in C (to the same float64 as Python's ``float``; a test
checks it) and hands over one array per column, which
``pandas.factorize`` turns into a ``Column`` without a Python call per cell.
Files that the fast path cannot read with the product's rules (quoted cells,
rows of the wrong length, blank-looking rows) are read cell by cell with the
standard library instead, with the same result.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import stat
import warnings
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crc.core.columns import MISSING_TOKENS, Column, NumberColumn, as_column, headerless_hint, separator_hint
from crc.core.errors import CRCError

EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
"""``pd.read_csv``'s arguments that parse every number as Python's ``float`` does: pandas 2's default parser was off
by an ulp in 43 % of 2 million random numbers (pandas 2.3.3, the newest for Python 3.10); pandas 3 parses exactly by
default and deprecates the argument."""

MAX_TABLE_BYTES = 2 * 2**30
"""Largest file read, after decompression."""
MAX_TABLE_CELLS = 2**25
"""Most cells (rows × columns) read: about 0.8 GB of memory as numbers, 3 GB as distinct texts."""
MAX_QUOTED_CELLS = 2**23
"""Most cells of a file read cell by cell, at about 100-200 bytes a cell: one that quotes cells, or that the fast
reader gives up on (a row of another length, infinities, mixed numbers and texts; 2^25 cells of '10' with a short
last row took 3.2 GB)."""
MAX_CELL_CHARS = 65536
"""Longest cell, in characters."""
MAX_STRETCH_BYTES = 4 * MAX_CELL_CHARS + 1
"""Longest stretch of a file without a comma or line end, checked as it is counted: a cell of ``MAX_CELL_CHARS``
characters (4 bytes at most each in UTF-8) and a carriage return. A 2 GB file of one cell (NUL bytes after its header)
took 14.7 GB and two minutes before the cell's length was refused."""
_WINDOW = (MAX_STRETCH_BYTES - 1) // 2
"""A longer stretch within a block holds one of the block's windows of this many bytes (from its start) whole."""
SCAN_BLOCK = 2**20
MAX_HEADER_BYTES = 2 * SCAN_BLOCK
"""Longest header line (about 200 000 column names of ten characters)."""


def read_csv(path, *, header: bool = True, max_bytes: int = MAX_TABLE_BYTES, max_cells: int = MAX_TABLE_CELLS,
             text: tuple[str, ...] = ()) -> dict[str, Column | NumberColumn]:
    """Read a comma-separated file (plain or ``.gz``) into columns by name.

    Without a header the columns are named ``x1 … xd`` and the last one ``class``. Cells are stripped;
    empty, ``?`` and ``nan`` cells are missing; rows without any cell are skipped. The columns named in ``text``
    are read as text, never as numbers, so that ``Column.texts`` gives each cell as written (``007``, not ``7``).
    Every problem is a CRCError naming the file (and the line or column). The byte and cell limits are checked in
    one streaming pass before anything is parsed, so that no file holds more memory than the cells' limit allows.
    """
    scan = _scan(path, max_bytes)
    _check_size(path, scan, *((min(max_cells, MAX_QUOTED_CELLS), "a file that quotes cells") if scan.quoted
                              else (max_cells, "a file")))
    names = _header(path, scan.first_line) if header else None
    columns = _fast(path, scan, header, names, text) if not scan.quoted else None
    if columns is None:
        _check_size(path, scan, min(max_cells, MAX_QUOTED_CELLS), "a file cell by cell, as this one must be (a row of "
                    "another length, infinities, mixed numbers and texts)")
        with _Unchanged(path, scan) as stream:
            columns = _careful(path, stream.read(), header, names)
    _check_cells(path, columns)
    return columns


def column_names(path) -> list[str]:
    """The names in the header of the CSV file ``path``; a CRCError if it cannot be read."""
    return _header(path, _scan(path, MAX_TABLE_BYTES).first_line)


@dataclass(frozen=True)
class _Scan:
    """What one streaming pass over a file finds: its first non-blank line, its commas and line ends, whether it
    quotes."""

    first_line: bytes
    commas: int
    lines: int
    quoted: bool
    size: int
    """Bytes (decompressed)."""
    newlines: int
    returns: int
    head: bytes
    """The file's first bytes, up to and with its first line (at most ``MAX_HEADER_BYTES``)."""

    @property
    def cells(self) -> int:
        """Cells the file holds at most (a quoted comma or a blank line counts as one more); without quotes, at least
        its lines times the first line's cells: pandas, which reads it, pads a short row to that width (a 170 KB file
        of a 20 000-column header and 20 000 rows of one cell took 3.7 GB before its rows were found short). A
        quoted file is read cell by cell, unpadded, and its cells' line ends are no rows."""
        cells = self.commas + self.lines
        return cells if self.quoted else max(cells, (self.first_line.count(b",") + 1) * self.lines)


def _check_size(path, scan: _Scan, max_cells: int, kind: str) -> None:
    """A CRCError if ``scan`` found more than ``max_cells``, the limit of ``kind`` of file."""
    if scan.cells > max_cells:
        raise CRCError(f"{path}: about {scan.cells:,} cells (rows × columns), more than the {max_cells:,} read from "
                       f"{kind}: use a sample of its rows or fewer columns")


def _open(path):
    """The file ``path`` (gunzipped if ``.gz``), opened for reading; one that is not a regular file is a CRCError, not
    waited for: it is read twice (counted, then parsed), which a pipe or a FIFO cannot be."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise CRCError(f"{path}: a directory, not a CSV file: name a file in it")
        if not stat.S_ISREG(mode):
            raise CRCError(f"{path}: not a regular file (a pipe, FIFO or device), which cannot be read twice, counted "
                           "then parsed: save it to a file")
        return opener(path, "rb")
    except FileNotFoundError:
        raise CRCError(f"{path}: no such file") from None
    except OSError as exc:
        raise CRCError(f"{path}: cannot read ({exc})") from None


def _scan(path, max_bytes: int) -> _Scan:
    """One pass in blocks of SCAN_BLOCK bytes (decompressed), refusing a file over ``max_bytes``."""
    first, commas, newlines, returns, quoted, size, last, stretch = b"", 0, 0, 0, False, 0, b"", 0
    with _open(path) as stream:
        try:
            while block := stream.read(SCAN_BLOCK):
                size += len(block)
                if size > max_bytes:
                    raise CRCError(f"{path}: larger than {max_bytes} bytes")
                commas += block.count(b",")
                newlines += block.count(b"\n")
                returns += block.count(b"\r")
                last = block[-1:]
                quoted = quoted or b'"' in block
                longest, stretch = _stretches(block, stretch)
                if longest > MAX_STRETCH_BYTES:
                    raise CRCError(f"{path}: a cell longer than {MAX_CELL_CHARS} characters ({longest:,} bytes or more "
                                   "without a comma or line end): is it a CSV file?")
                if not first.strip() or b"\n" not in first:
                    first = (first + block)[:MAX_HEADER_BYTES]
        except (OSError, EOFError, zlib.error) as exc:
            raise _unreadable(path, exc) from None
    lines = [line for line in first.splitlines() if line.strip()]
    if not lines:
        raise CRCError(f"{path}: no rows")
    if size > len(first) and first.find(lines[0]) + len(lines[0]) == len(first):  # cut at MAX_HEADER_BYTES
        raise CRCError(f"{path}: first line longer than {MAX_HEADER_BYTES} bytes (too many columns, or not a CSV file)")
    unended = last not in (b"\n", b"\r")
    return _Scan(lines[0], commas, max(newlines, returns) + unended, quoted, size, newlines, returns,
                 first[:first.find(lines[0]) + len(lines[0])])


def _unreadable(path, exc: Exception) -> CRCError:
    """The error of a file whose bytes could not be read (``exc``), with what to do when it is a gzip problem: a name
    ending in ``.gz`` on a plain file, or a compressed file cut short or damaged."""
    if isinstance(exc, gzip.BadGzipFile):
        return CRCError(f"{path}: not gzip-compressed ({exc}), though its name ends in .gz: rename a plain CSV file "
                        "without .gz")
    if isinstance(exc, (EOFError, zlib.error)):
        return CRCError(f"{path}: damaged or cut short ({exc}): copy the file again, or decompress what is left of it")
    return CRCError(f"{path}: cannot read ({exc})")


def _stretches(block: bytes, before: int) -> tuple[int, int]:
    """(the longest stretch without a comma or line end in ``block``, after ``before`` such bytes ending the blocks
    before it; the stretch it ends with), the first exact whenever it exceeds ``MAX_STRETCH_BYTES``. The separators
    are looked for with ``bytes.find``, which stops at the first, and counted with numpy only in a block that holds a
    window of ``_WINDOW`` bytes (from its start) without one."""
    last = max(block.rfind(b","), block.rfind(b"\n"))
    if last < 0:
        return before + len(block), before + len(block)
    first = min(at for at in (block.find(b","), block.find(b"\n")) if at >= 0)
    longest = max(before + first, len(block) - 1 - last)
    if any(block.find(b",", at, at + _WINDOW) < 0 and block.find(b"\n", at, at + _WINDOW) < 0
           for at in range(0, len(block), _WINDOW)):
        data = np.frombuffer(block, dtype=np.uint8)
        longest = max(longest, int(np.diff(np.flatnonzero((data == ord(",")) | (data == ord("\n")))).max(initial=1)) - 1)
    return longest, len(block) - 1 - last


class _Unchanged(io.RawIOBase):
    """The file ``path`` read again as ``scan`` counted it: more bytes, commas or line ends than it counted, or another
    first line (which sets the width pandas pads short rows to), are a CRCError, so that a file that changes between
    the two passes holds no more cells when parsed than when counted."""

    def __init__(self, path, scan: _Scan):
        super().__init__()
        self.path, self.scan, self._stream = path, scan, _open(path)
        self._seen = np.zeros(4, dtype=np.int64)  # bytes, commas, newlines, returns

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            block = self._stream.read(len(buffer))
        except (OSError, EOFError, zlib.error) as exc:
            raise _unreadable(self.path, exc) from None
        at, head = int(self._seen[0]), self.scan.head
        self._seen += (len(block), block.count(b","), block.count(b"\n"), block.count(b"\r"))
        counted = (self.scan.size, self.scan.commas, self.scan.newlines, self.scan.returns)
        if (np.any(self._seen > counted) or block[:max(0, len(head) - at)] != head[at:at + len(block)]
                or not block and at < self.scan.size):
            raise CRCError(f"{self.path}: changed while it was read (more bytes, commas or lines, another first line, "
                           "or fewer bytes, than its count found): read it when it is complete")
        buffer[:len(block)] = block
        return len(block)

    def close(self) -> None:
        self._stream.close()
        super().close()


def _utf8(path, raw: bytes) -> str:
    """``raw`` decoded as UTF-8 (a byte-order mark dropped); else one line saying how to fix the file."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CRCError(f"{path}: not UTF-8 text ({exc}): save the file as UTF-8 (a spreadsheet's 'CSV UTF-8')") from None


def _header(path, line: bytes) -> list[str]:
    """The stripped column names of the header line."""
    text = _utf8(path, line)
    if text.count('"') % 2:
        raise CRCError(f"{path}: a quoted column name in the header spans lines: put each name on the header line")
    try:
        names = [name.strip() for name in next(csv.reader([text]))]
    except (csv.Error, StopIteration) as exc:
        raise CRCError(f"{path}: unreadable header ({exc})") from None
    hint = separator_hint(names)
    if hint:  # a tab- or semicolon-separated file without commas: its lines would be one cell each
        raise CRCError(f"{path}: a header of one column, named {names[0]!r}{hint}")
    if "" in names:
        index = " (a row index, as pandas' DataFrame.to_csv writes without index=False?)" if names[0] == "" else ""
        raise CRCError(f"{path}: header has empty column names: column {names.index('') + 1} has none{index}: name that "
                       f"column, or delete it")
    repeated = next((name for k, name in enumerate(names) if name in names[:k]), None)
    if repeated is not None:
        raise CRCError(f"{path}: header has repeated column names: {repeated!r} names two columns"
                       f"{headerless_hint(names) or ': give each column a name of its own'}")
    return names


def _fast(path, scan: _Scan, header: bool, names: list[str] | None, text: tuple[str, ...]) -> dict[str, Column] | None:
    """Columns by pandas (those named in ``text`` as strings), or None when the file needs the careful reader."""
    dtype = {name: str for name in text if name in names} if names else None
    try:
        with warnings.catch_warnings(), _Unchanged(path, scan) as stream:
            warnings.simplefilter("ignore", pd.errors.DtypeWarning)  # mixed columns go to the careful reader
            frame = pd.read_csv(io.BufferedReader(stream), header=0 if header else None, dtype=dtype or None,
                                na_values=sorted(MISSING_TOKENS), keep_default_na=False, skipinitialspace=True,
                                encoding="utf-8-sig", skip_blank_lines=True, **EXACT_FLOATS)
    except CRCError:
        raise
    except (ValueError, OSError, EOFError, zlib.error, pd.errors.ParserError, UnicodeDecodeError):
        return None  # the careful reader finds the line and says what is wrong
    d = frame.shape[1]
    if frame.empty or frame.isna().all(axis=1).any():
        return None
    if scan.commas != (d - 1) * (len(frame) + header):  # a row of the wrong length (pandas pads short rows)
        return None
    if names is None:
        names = [f"x{j + 1}" for j in range(d - 1)] + ["class"]
    if len(names) != d:
        return None
    columns = {}
    for name, (_, series) in zip(names, frame.items()):
        if series.dtype.kind in "iuf":
            rows = series.to_numpy(dtype=np.float64)
            if not np.isinf(rows).any():
                columns[name] = NumberColumn(rows)
                continue
        elif pd.api.types.is_string_dtype(series.dtype):  # only strings (pandas 3: StringDtype)
            codes, values = pd.factorize(series, use_na_sentinel=True)
            columns[name] = Column.factorized(codes, np.asarray(values, dtype=object))
            continue
        return None  # booleans, infinities, mixed types: read the text as it is
    return columns


def _careful(path, raw: bytes, header: bool, names: list[str] | None) -> dict[str, Column]:
    """Columns by the standard library's csv reader, cell by cell."""
    text = _utf8(path, raw)
    reader = csv.reader(io.StringIO(text))
    rows = []
    try:
        for row in reader:
            if row and any(cell.strip() for cell in row):
                rows.append(row)
    except csv.Error as exc:
        raise CRCError(f"{path}: line {reader.line_num}: {exc}") from None
    if header:
        rows.pop(0)
    else:
        names = [f"x{j + 1}" for j in range(len(rows[0]) - 1)] + ["class"]
    for i, row in enumerate(rows):
        if len(row) != len(names):
            line = i + 2 if header else i + 1
            comment = header and names[0].startswith("#")
            raise CRCError(f"{path}: line {line} has {len(row)} cells, expected {len(names)}"
                           + (" (the first line starts with '#': crc reads no comment lines; delete it)" if comment
                              else ": give every row one cell per column name"))
    if not rows:
        raise CRCError(f"{path}: header but no data rows")
    return {name: as_column([row[j].strip() for row in rows]) for j, name in enumerate(names)}


def _check_cells(path, columns: dict) -> None:
    for name, column in columns.items():
        if column.numeric_dtype or not column.has_values():
            continue
        lengths = np.fromiter((len(v) for v in column.values), dtype=np.int64, count=len(column.values))
        if lengths.max() > MAX_CELL_CHARS:
            row = column.first_row(int(np.argmax(lengths))) + 1
            raise CRCError(f"{path}: column {name!r}, data row {row}: cell longer than {MAX_CELL_CHARS} characters (crc "
                           "reads numbers and categories, not free text): drop the column, or shorten the cell")
