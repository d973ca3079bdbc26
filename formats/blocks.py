"""Splitting large run and qrels files into numpy columns, a block of lines at a time.

The columns readers of :mod:`formats.trec` (:func:`~formats.trec.read_run_table`,
:func:`~formats.trec.iter_run_pieces`, :func:`~formats.trec.read_qrels_table`) read a file
here: in 4 MiB blocks, each split into columns with numpy, without one Python object per
line. A 10-million-line run takes a second or two this way instead of a minute.

This module vouches only for what it can check in bulk: a block is split here when it is
plain ASCII, its lines end in ``\\n`` or ``\\r\\n``, every non-empty line has exactly one space
or tab between its columns (the layout every TREC tool writes), and every field passes the
line rule's checks. Anything else raises :class:`NotSplit`, and the reader of
:mod:`formats.trec` reads the file with its line parser, which defines the rule and names
the file and line of the first problem. So a file is never read differently here, and no
problem is worded twice.

Numbers are converted by Arrow's casts (``pyarrow.compute.cast``), which parse decimals
exactly as ``float()`` does (correctly rounded) and refuse what they cannot read; the
integer columns must also match the line rule's pattern (Arrow would read ``0x10``). Nothing
here parses a number by hand.

Ids are kept as *keys*: the UTF-8 bytes of an id, zero-padded to a multiple of 8 and cut
into big-endian uint64 words. Comparing keys word by word is comparing the ids byte by byte,
which is how trec_eval (``strcmp``) and Python (code points of UTF-8 text) order them.

Pure core: no Django import.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from formats.text import INT_RE, is_gzip

__all__ = ["NotSplit", "QrelsBlock", "RunBlock", "qrels_blocks", "run_blocks"]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]

# 4 MiB: large enough that numpy's per-call cost vanishes, small enough that a block's
# temporaries are reused from one block to the next instead of being fresh pages each time.
_BLOCK = 1 << 22
_PAD = 64  # zero bytes after a block so that 8-byte loads past a short token stay inside
_PADDING = bytes(_PAD)

# _LOW[k] keeps the first k bytes of a token loaded as a little-endian word (its low bytes).
_LOW = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_INTEGER = f"^{INT_RE.pattern}$"  # the line rule's integer, anchored for Arrow's RE2


class NotSplit(Exception):  # a signal to read with the line parser, never shown to a user
    """This module does not vouch for a block: the line parser of formats.trec reads the file."""


class RunBlock(NamedTuple):
    """Consecutive run lines as columns. ``qids`` is every qid seen so far in the file, in
    order of first appearance, so that ``codes`` mean the same in every block."""

    qids: tuple[str, ...]
    codes: I32
    keys: U64
    lengths: I64  # bytes of each docid
    scores: F64


class QrelsBlock(NamedTuple):
    qids: tuple[str, ...]
    codes: I32
    keys: U64
    grades: I64


def run_blocks(path: str | Path) -> Iterator[RunBlock]:
    """Yield a TREC run block by block, or raise :class:`NotSplit` (possibly after some
    blocks). Duplicate documents are not looked for here: a query can span blocks."""
    seen: dict[str, int] = {}
    for block in _blocks(path):
        cols = _split(block, 6)
        if not len(cols.line_starts):
            continue  # only empty lines
        _check_integers(cols, 3)  # trec_eval ignores the rank, but the line rule checks it
        codes = _qid_codes(cols, seen)
        yield RunBlock(tuple(seen), codes, _keys(cols, 2), cols.token(2)[1], _floats(cols, 4))


def qrels_blocks(path: str | Path) -> Iterator[QrelsBlock]:
    """Yield TREC qrels (4 columns) block by block, or raise :class:`NotSplit`; BEIR TSV
    qrels (3 columns and a header) are left to the line parser, which reads both."""
    seen: dict[str, int] = {}
    for block in _blocks(path):
        cols = _split(block, 4)
        if not len(cols.line_starts):
            continue
        grades = _integers(cols, 3)
        codes = _qid_codes(cols, seen)
        yield QrelsBlock(tuple(seen), codes, _keys(cols, 2), grades)


# --------------------------------------------------------------------------- block reading


def _open_binary(path: str | Path) -> IO[bytes]:
    # The caller closes the stream it is given, hence no ``with`` here.
    if is_gzip(path):
        return gzip.open(path, "rb")  # type: ignore[return-value]  # GzipFile reads bytes
    return open(path, "rb")


def _blocks(path: str | Path) -> Iterator[bytes]:
    """Yield the file in blocks of whole lines, each ending with ``\\n``, then _PAD zeros."""
    with _open_binary(path) as fh:
        tail = b""
        while True:
            try:
                data = fh.read(_BLOCK)
            except (OSError, EOFError) as exc:  # corrupt gzip: the line parser says where
                raise NotSplit from exc
            if not data:
                break
            if b"\x00" in data:  # refused by the line rule, which names the line
                raise NotSplit
            cut = data.rfind(b"\n") + 1
            if cut:
                # One copy: the unfinished line kept from before, the whole lines, padding.
                yield b"".join((tail, memoryview(data)[:cut], _PADDING))
                tail = data[cut:]
            else:
                tail += data
        if tail:
            yield tail + b"\n" + _PADDING


@dataclass(frozen=True)
class _Columns:
    """Where the tokens of a block are.

    ``ends[j]`` is the offset of the blank that ends token j of each non-empty line (the
    last one is the line terminator) and ``line_starts`` the offset of each line's first byte.
    """

    buf: U8
    line_starts: I64
    ends: I64  # (columns, lines): a row per column, so that column arithmetic is contiguous
    _cache: dict[int, tuple[I64, I64]] = field(default_factory=dict)

    def token(self, j: int) -> tuple[I64, I64]:
        """(starts, lengths) of column j."""
        if j not in self._cache:
            starts = self.line_starts if j == 0 else self.ends[j - 1] + 1
            self._cache[j] = (starts, self.ends[j] - starts)
        return self._cache[j]

    def words(self) -> U64:
        """Every offset of the block as the start of a little-endian uint64 load (a view)."""
        return np.ndarray((len(self.buf) - 7,), dtype="<u8", buffer=self.buf, strides=(1,))


def _split(block: bytes, n_cols: int) -> _Columns:
    """Columns of a padded block in the simple layout, or raise NotSplit.

    Only the blanks and control bytes (< 33) are located, about one byte in six, so the
    checks run on small arrays. In the simple layout the blanks of a line are n_cols - 1
    single separators then the newline, so they reshape into a (lines, n_cols) grid whose
    last column is the newline.
    """
    size = len(block) - _PAD
    if not block.isascii() or b"\x7f" in block:
        raise NotSplit
    buf = np.frombuffer(block, dtype=np.uint8)
    ws = np.flatnonzero(buf[:size] < 33)
    vals = buf[ws]
    if _is_grid(vals, n_cols, terminators=(10,)):
        # No two blanks in a row and no blank first: every token is at least one byte.
        if len(ws) and (ws[0] == 0 or np.diff(ws).min() < 2):
            raise NotSplit
        ends = ws.reshape(-1, n_cols).T.copy()
        return _Columns(buf, np.concatenate(([0], ends[-1, :-1] + 1)), ends)
    return _split_slowly(buf, ws, vals, n_cols)


def _split_slowly(buf: U8, ws: I64, vals: U8, n_cols: int) -> _Columns:
    """_split for blocks with ``\\r\\n`` line ends or empty lines."""
    cr = np.flatnonzero(vals == 13)
    after = np.minimum(cr + 1, len(ws) - 1)
    if not ((vals[after] == 10) & (ws[after] == ws[cr] + 1)).all():
        raise NotSplit  # a lone \r separates columns for str.split(): the line parser decides
    keep = np.ones(len(ws), dtype=bool)
    keep[after] = False  # the \r of a \r\n ends the line; its \n goes
    ws, vals = ws[keep], vals[keep]
    term = np.flatnonzero((vals == 10) | (vals == 13))
    line_starts = np.concatenate(([0], ws[term[:-1]] + 1 + (vals[term[:-1]] == 13)))
    empty = ws[term] == line_starts
    keep = np.ones(len(ws), dtype=bool)
    keep[term[empty]] = False
    ws, vals, line_starts = ws[keep], vals[keep], line_starts[~empty]
    if not _is_grid(vals, n_cols, terminators=(10, 13)):
        raise NotSplit
    cols = _Columns(buf, line_starts, ws.reshape(-1, n_cols).T.copy())
    if len(ws) and min(int(cols.token(j)[1].min()) for j in range(n_cols)) < 1:
        raise NotSplit
    return cols


def _is_grid(vals: U8, n_cols: int, terminators: tuple[int, ...]) -> bool:
    """Whether the blanks are n_cols - 1 separators (space, tab) then a terminator, per line.

    Counting suffices: if every n_cols-th blank is a terminator, there are no other
    terminators, and the separators number (n_cols - 1) per line, nothing else is left.
    """
    if len(vals) % n_cols:
        return False
    lines = len(vals) // n_cols
    ends = vals[n_cols - 1 :: n_cols]
    if sum(np.count_nonzero(vals == t) for t in terminators) != lines:
        return False
    if not np.logical_or.reduce([ends == t for t in terminators]).all():
        return False
    separators = np.count_nonzero(vals == 32)
    if separators != lines * (n_cols - 1):
        separators += np.count_nonzero(vals == 9)
    return bool(separators == lines * (n_cols - 1))


def _token_words(cols: _Columns, j: int, width: int) -> U64:
    """Tokens of column j as ``(n, width)`` little-endian words, zero after the token."""
    starts, lengths = cols.token(j)
    words = cols.words()
    out = np.empty((len(starts), width), dtype=np.uint64)
    for w in range(width):
        out[:, w] = words[starts + 8 * w] & _LOW[np.clip(lengths - 8 * w, 0, 8)]
    return out


def _width(cols: _Columns, j: int) -> int:
    width = max(1, math.ceil(int(cols.token(j)[1].max(initial=1)) / 8))
    if 8 * width > _PAD:
        raise NotSplit  # a token longer than the padding: rare enough for the slow path
    return width


def _keys(cols: _Columns, j: int) -> U64:
    """Keys of column j (see the module docstring): the words byte-swapped to big-endian."""
    return _token_words(cols, j, _width(cols, j)).byteswap()


def _tokens(cols: _Columns, j: int) -> pa.LargeStringArray:
    """Tokens of column j as an Arrow string array (gathered into one contiguous buffer)."""
    starts, lengths = cols.token(j)
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
    data = cols.buf[index]
    return pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(data))


def _check_integers(cols: _Columns, j: int) -> pa.LargeStringArray:
    """The tokens of column j, or raise NotSplit unless every one matches the line rule's
    ``[+-]?[0-9]+`` (Arrow's RE2 runs the line rule's own pattern)."""
    tokens = _tokens(cols, j)
    if not pc.all(pc.match_substring_regex(tokens, _INTEGER)).as_py():
        raise NotSplit
    return tokens


def _integers(cols: _Columns, j: int) -> I64:
    """Column j as integers, or raise NotSplit unless every token matches the line rule and
    fits 64 bits (Arrow refuses a sign of "+": the line parser reads it)."""
    tokens = _check_integers(cols, j)
    try:
        return np.asarray(pc.cast(tokens, pa.int64()).to_numpy(), dtype=np.int64)
    except pa.ArrowInvalid as exc:
        raise NotSplit from exc


def _floats(cols: _Columns, j: int) -> F64:
    """Column j as ``float()`` reads it (correctly rounded), finite only, or raise NotSplit.

    Arrow's cast accepts a subset of what ``float()`` accepts (no ``1_0``) and gives the same
    double for it; a token it refuses, or a value that is not finite, leaves the file to the
    line parser, which names the line.
    """
    try:
        values = np.asarray(pc.cast(_tokens(cols, j), pa.float64()).to_numpy(), dtype=np.float64)
    except pa.ArrowInvalid as exc:
        raise NotSplit from exc
    if not np.isfinite(values).all():
        raise NotSplit
    return values


def _qid_codes(cols: _Columns, seen: dict[str, int]) -> I32:
    """Per-row qid codes (indexes into ``seen``, which grows in order of first appearance).

    Only the rows whose qid differs from the previous row's are decoded and looked up: runs
    list a query's rows together, so that is 10,000 lookups for 10 million rows.
    """
    words = _token_words(cols, 0, _width(cols, 0))  # equality needs no byte swap
    changed = words[1:, 0] != words[:-1, 0]
    for w in range(1, words.shape[1]):
        changed |= words[1:, w] != words[:-1, w]
    heads = np.flatnonzero(np.concatenate(([True], changed)))
    starts, lengths = cols.token(0)
    head_codes = np.empty(len(heads), dtype=np.int32)
    for n, h in enumerate(heads.tolist()):
        qid = cols.buf[starts[h] : starts[h] + lengths[h]].tobytes().decode("ascii")
        head_codes[n] = seen.setdefault(qid, len(seen))
    return np.repeat(head_codes, np.diff(np.append(heads, len(words))))
