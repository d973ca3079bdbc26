"""Runs and qrels as numpy columns: read fast from large files, and joined.

The readers here give the same answer as :func:`pooling.trec.read_run` and
:func:`pooling.trec.read_qrels` (same rows, same errors) but read a 10-million-line run in a
second or two instead of a minute: the file is read in large byte blocks and every block is
split into columns with numpy, without one Python object per line.

That speed is only taken where it is safe. A block is read the fast way when it is plain
ASCII, its lines are ``\\n`` or ``\\r\\n`` terminated, and every non-empty line has exactly
one space or tab between its columns: the layout of every run file TREC tools write. Any
other file (non-ASCII ids, aligned columns, control characters), and any file with a
problem in it, is handed to the line-by-line reader of :mod:`pooling.trec`, which reports
the exact file and line of the first problem. So the fast path never accepts a file the
reference reader rejects, and never reads a line differently.

Ids are kept as *keys*: the UTF-8 bytes of an id, zero-padded to a multiple of 8 and cut
into big-endian uint64 words. Comparing keys word by word is comparing the ids byte by byte,
which is how trec_eval (``strcmp``) and Python (code points of UTF-8 text) order them.

:class:`JudgedIndex` finds the grade of (query, document) rows; :mod:`evaluation.measures`
ranks the rows as trec_eval does and builds the measures on them.

Pure core: no Django import.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt

from pooling.trec import RunRow, read_qrels, read_run

__all__ = [
    "JudgedIndex",
    "NotFast",
    "QrelsTable",
    "RunTable",
    "concat_tables",
    "has_duplicates",
    "iter_run_pieces",
    "lexsort_keys",
    "pack_keys",
    "read_qrels_table",
    "read_run_table",
    "widen",
]

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
_GZIP_MAGIC = b"\x1f\x8b"

# _LOW[k] keeps the first k bytes of a token loaded as a little-endian word (its low bytes);
# _HIGH_BITS[k] is the top bit of each of those bytes.
_LOW = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_HIGH_BITS = _LOW & np.uint64(0x8080808080808080)
_ZEROS = np.uint64(0x3030303030303030)  # "00000000"
_DIGIT_ADD = np.uint64(0x7676767676767676)  # a byte b - "0" < 10 iff adding 0x76 keeps bit 7 clear
_DOTS = np.uint64(0x2E2E2E2E2E2E2E2E)  # "........"
_POW10 = np.array([10.0**k for k in range(9)])


class NotFast(Exception):  # a signal to take the slow path, never shown to a user
    """The fast path declines this file; the reference reader of pooling.trec takes over."""


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class RunTable:
    """A run as columns, rows in file order.

    ``qid_codes[i]`` indexes ``qids`` (distinct qids, in order of first appearance);
    ``doc_keys[i]`` is the key of the row's docid (see the module docstring).
    """

    qids: tuple[str, ...]
    qid_codes: I32
    doc_keys: U64
    scores: F64

    @classmethod
    def from_mapping(cls, run: Mapping[str, Sequence[RunRow]]) -> RunTable:
        """Columns of ``{qid: rows}``; the row order inside a query does not matter."""
        qids = tuple(run)
        counts = [len(rows) for rows in run.values()]
        rows = [row for rows in run.values() for row in rows]
        scores = np.array([row.score for row in rows], dtype=np.float64)
        if not np.isfinite(scores).all():
            raise ValueError("run scores must be finite numbers")
        codes = np.repeat(np.arange(len(qids), dtype=np.int32), counts)
        return cls(qids, codes, pack_keys([row.docid for row in rows]), scores)


@dataclass(frozen=True)
class QrelsTable:
    """Qrels as columns: one row per judged (query, document) pair."""

    qids: tuple[str, ...]
    qid_codes: I32
    doc_keys: U64
    grades: I64

    @classmethod
    def from_mapping(cls, qrels: Mapping[str, Mapping[str, int]]) -> QrelsTable:
        """Columns of ``{qid: {docid: grade}}``."""
        qids = tuple(qrels)
        counts = [len(judged) for judged in qrels.values()]
        docids = [docid for judged in qrels.values() for docid in judged]
        grades = np.array([g for judged in qrels.values() for g in judged.values()], np.int64)
        codes = np.repeat(np.arange(len(qids), dtype=np.int32), counts)
        return cls(qids, codes, pack_keys(docids), grades)


def pack_keys(ids: Sequence[str]) -> U64:
    """Keys of ``ids``: ``(len(ids), W)`` uint64, each row the zero-padded UTF-8 bytes."""
    raw = np.array([i.encode("utf-8") for i in ids], dtype=np.bytes_)
    width = max(1, math.ceil(raw.dtype.itemsize / 8))
    padded = np.zeros((len(ids), 8 * width), dtype=np.uint8)
    if len(ids) and raw.dtype.itemsize:
        padded[:, : raw.dtype.itemsize] = raw.view(np.uint8).reshape(len(ids), -1)
    return padded.view(">u8").astype(np.uint64)


def widen(keys: U64, width: int) -> U64:
    """``keys`` with zero words appended up to ``width`` words (the same ids, compared wider)."""
    if keys.shape[1] >= width:
        return keys
    return np.pad(keys, ((0, 0), (0, width - keys.shape[1])))


# --------------------------------------------------------------------------- block reading


def _open_binary(path: str | Path) -> IO[bytes]:
    with open(path, "rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    # The caller closes the stream it is given, hence no ``with`` here.
    if compressed:
        return gzip.open(path, "rb")  # type: ignore[return-value]  # GzipFile reads bytes
    return open(path, "rb")


def _blocks(path: str | Path) -> Iterator[bytes]:
    """Yield the file in blocks of whole lines, each ending with ``\\n``, then _PAD zeros."""
    with _open_binary(path) as fh:
        tail = b""
        while True:
            try:
                data = fh.read(_BLOCK)
            except (OSError, EOFError) as exc:  # corrupt gzip: the reference reader says where
                raise NotFast from exc
            if not data:
                break
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
    """Columns of a padded block in the simple layout, or raise NotFast.

    Only the blanks and control bytes (< 33) are located, about one byte in six, so the
    checks run on small arrays. In the simple layout the blanks of a line are n_cols - 1
    single separators then the newline, so they reshape into a (lines, n_cols) grid whose
    last column is the newline.
    """
    size = len(block) - _PAD
    if not block.isascii() or b"\x7f" in block:
        raise NotFast
    buf = np.frombuffer(block, dtype=np.uint8)
    ws = np.flatnonzero(buf[:size] < 33)
    vals = buf[ws]
    if _is_grid(vals, n_cols, terminators=(10,)):
        # No two blanks in a row and no blank first: every token is at least one byte.
        if len(ws) and (ws[0] == 0 or np.diff(ws).min() < 2):
            raise NotFast
        ends = ws.reshape(-1, n_cols).T.copy()
        return _Columns(buf, np.concatenate(([0], ends[-1, :-1] + 1)), ends)
    return _split_slowly(buf, ws, vals, n_cols)


def _split_slowly(buf: U8, ws: I64, vals: U8, n_cols: int) -> _Columns:
    """_split for blocks with ``\\r\\n`` line ends or empty lines."""
    cr = np.flatnonzero(vals == 13)
    after = np.minimum(cr + 1, len(ws) - 1)
    if not ((vals[after] == 10) & (ws[after] == ws[cr] + 1)).all():
        raise NotFast  # a lone \r separates columns for str.split(): the reference decides
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
        raise NotFast
    cols = _Columns(buf, line_starts, ws.reshape(-1, n_cols).T.copy())
    if len(ws) and min(int(cols.token(j)[1].min()) for j in range(n_cols)) < 1:
        raise NotFast
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
        raise NotFast  # a token longer than the padding: rare enough for the slow path
    return width


def _keys(cols: _Columns, j: int) -> U64:
    """Keys of column j (see the module docstring): the words byte-swapped to big-endian."""
    return _token_words(cols, j, _width(cols, j)).byteswap()


def _text(cols: _Columns, j: int) -> npt.NDArray[np.bytes_]:
    """Tokens of column j as a fixed-width bytes array (numpy drops the zero padding)."""
    width = _width(cols, j)
    return _token_words(cols, j, width).view(f"S{8 * width}").ravel()


def _check_integers(cols: _Columns, j: int) -> None:
    """Raise NotFast unless every token of column j matches ``[+-]?[0-9]+``, the
    reference reader's rule; eight bytes at a time, one word per token."""
    starts, lengths = cols.token(j)
    if int(lengths.max(initial=1)) > 8:
        raise NotFast
    word = cols.words()[starts] & _LOW[lengths]
    first = word & np.uint64(0xFF)
    signed = ((first == ord("+")) | (first == ord("-"))) & (lengths > 1)
    word = np.where(signed, word ^ first ^ np.uint64(ord("0")), word)  # "+12" checks as "012"
    if not _all_digits(word, lengths).all():
        raise NotFast


def _floats(cols: _Columns, j: int) -> F64:
    """Column j parsed as Python's float() parses it (correctly rounded), finite only.

    Short plain decimals (at most 8 bytes, such as ``-12.3456``) are parsed eight bytes at a
    time by _short_decimals; the rest by numpy's conversion of bytes to float.
    """
    starts, lengths = cols.token(j)
    short = lengths <= 8
    word = cols.words()[starts] & _LOW[np.minimum(lengths, 8)]
    values, simple = _short_decimals(word, lengths)
    simple &= short
    if not simple.all():
        try:
            values[~simple] = _text(cols, j)[~simple].astype(np.float64)
        except ValueError as exc:
            raise NotFast from exc
    if not np.isfinite(values).all():
        raise NotFast
    return values


def _short_decimals(word: U64, lengths: I64) -> tuple[F64, Bools]:
    """Values of tokens ``[+-]?digits[.digits]`` of at most 8 bytes, each given as one
    little-endian word, and which tokens had that form.

    The digits without the dot form an integer m < 10**8; with f digits after the dot the
    value is m / 10**f. Both are exact doubles, so the single rounding of the division gives
    the correctly rounded value, the very double float() returns (the "fast path" of
    decimal-to-binary conversion). Pure word arithmetic, no Python object per token.
    """
    first = word & np.uint64(0xFF)
    signed = (first == ord("-")) | (first == ord("+"))
    word = np.where(signed, word >> np.uint64(8), word)
    n_chars = np.minimum(lengths, 8) - signed
    dots = _zero_bytes(word ^ _DOTS)
    lowest = dots & (~dots + np.uint64(1))  # bit 7 of the first dot's byte
    has_dot = lowest != 0
    # A power of two converts to float exactly, and so does its log2.
    dot = np.where(has_dot, np.log2(np.maximum(lowest, 1).astype(np.float64)) // 8, n_chars)
    dot = dot.astype(np.int64)
    below = _LOW[dot]
    digits = (word & below) | ((word >> np.uint64(8)) & ~below)  # the dot taken out
    n_digits = n_chars - has_dot
    ok = (n_digits >= 1) & _all_digits(digits, n_digits)
    mantissa = _digits_value((digits ^ _ZEROS) & _LOW[n_digits], n_digits)
    after = np.where(has_dot, n_chars - 1 - dot, 0).clip(0, 8)
    values = mantissa.astype(np.float64) / _POW10[after]
    return np.where(first == ord("-"), -values, values), ok


def _zero_bytes(x: U64) -> U64:
    """Bit 7 set in the lowest zero byte of x (bits above it may be set too, below never)."""
    return (x - np.uint64(0x0101010101010101)) & ~x & np.uint64(0x8080808080808080)


def _all_digits(word: U64, n_bytes: I64) -> Bools:
    """Whether the first n_bytes bytes of each word are ASCII digits."""
    return (((word ^ _ZEROS) + _DIGIT_ADD) & _HIGH_BITS[n_bytes]) == 0


def _digits_value(digits: U64, n_digits: I64) -> U64:
    """Integer value of n_digits digit values (0-9 per byte, first digit in the low byte).

    Shifted so that the digits fill the high bytes (the low bytes become leading zeros),
    then neighbouring digits, pairs and quadruples are combined: three multiplications.
    """
    shift = (np.uint64(8) * (np.uint64(8) - n_digits.astype(np.uint64))) & np.uint64(63)
    v = np.where(n_digits == 0, np.uint64(0), digits << shift)
    v = v * np.uint64(10) + (v >> np.uint64(8))
    pairs = np.uint64(0x000000FF000000FF)
    v = (v & pairs) * np.uint64(100 + (1000000 << 32)) + ((v >> np.uint64(16)) & pairs) * np.uint64(
        1 + (10000 << 32)
    )
    return (v >> np.uint64(32)) & np.uint64(0xFFFFFFFF)


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


def lexsort_keys(keys: U64, descending: bool) -> list[U64]:
    """The words of ``keys`` as np.lexsort keys, last word first (lexsort sorts by its last
    key first); complemented when the ids are to be sorted in descending order."""
    words = [~keys[:, j] if descending else keys[:, j] for j in range(keys.shape[1])]
    return words[::-1]


def has_duplicates(codes: I32, keys: U64) -> bool:
    """Whether some (qid code, key) pair occurs twice.

    When each query's rows are together and every query has as many rows (a run cut at a
    fixed depth), each query's keys are sorted as one row of a 2-D array: much cheaper than
    one global sort. Anything else takes the global sort.
    """
    if len(codes) < 2:
        return False
    heads = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    depth = int(heads[0]) if len(heads) else len(codes)
    uniform = len(codes) % depth == 0 and (heads == np.arange(1, len(heads) + 1) * depth).all()
    if uniform and keys.shape[1] == 1 and len(np.unique(codes[::depth])) == len(codes) // depth:
        grid = np.sort(keys[:, 0].reshape(-1, depth), axis=1)
        return bool((grid[:, 1:] == grid[:, :-1]).any())
    sort_by: list[npt.NDArray[np.integer]] = [*lexsort_keys(keys, descending=False), codes]
    order = np.lexsort(sort_by)
    same_key = (keys[order][1:] == keys[order][:-1]).all(axis=1)
    return bool((same_key & (codes[order][1:] == codes[order][:-1])).any())


# --------------------------------------------------------------------------- runs


def read_run_table(path: str | Path) -> RunTable:
    """Read a whole TREC run as one :class:`RunTable` (raises :class:`FormatError`)."""
    try:
        table = concat_tables(list(iter_run_pieces(path)))
        if has_duplicates(table.qid_codes, table.doc_keys):
            raise NotFast  # the reference reader names the line
        return table
    except NotFast:
        return RunTable.from_mapping(read_run(path))


def iter_run_pieces(path: str | Path) -> Iterator[RunTable]:
    """Yield a run block by block, each piece a :class:`RunTable` of consecutive lines.

    Every piece's ``qids`` is every qid seen so far, so codes mean the same in all pieces.
    Raises :class:`NotFast` (possibly after some pieces) when the file is not in the simple
    layout or has a problem: the caller then reads it with :func:`pooling.trec.read_run`,
    which reports the first problem with its line. Duplicate documents are not looked for
    here (a query can span pieces); :func:`has_duplicates` does that on whole queries.
    """
    seen: dict[str, int] = {}
    for block in _blocks(path):
        cols = _split(block, 6)
        if not len(cols.line_starts):
            continue  # only empty lines
        _check_integers(cols, 3)
        codes = _qid_codes(cols, seen)
        yield RunTable(tuple(seen), codes, _keys(cols, 2), _floats(cols, 4))


def concat_tables(pieces: Sequence[RunTable]) -> RunTable:
    """One table of consecutive pieces (the last piece's qids cover all the codes)."""
    if not pieces:
        return RunTable((), np.zeros(0, np.int32), np.zeros((0, 1), np.uint64), np.zeros(0))
    width = max(p.doc_keys.shape[1] for p in pieces)
    return RunTable(
        pieces[-1].qids,
        np.concatenate([p.qid_codes for p in pieces]),
        np.concatenate([widen(p.doc_keys, width) for p in pieces]),
        np.concatenate([p.scores for p in pieces]),
    )


# --------------------------------------------------------------------------- qrels


def read_qrels_table(path: str | Path) -> QrelsTable:
    """Read qrels as a :class:`QrelsTable` (raises :class:`FormatError`, like read_qrels).

    The fast path reads TREC qrels (4 columns); BEIR TSV qrels (3 columns and a header)
    go to the reference reader, which handles both.
    """
    try:
        return _read_qrels_fast(path)
    except NotFast:
        return QrelsTable.from_mapping(read_qrels(path))


def _read_qrels_fast(path: str | Path) -> QrelsTable:
    seen: dict[str, int] = {}
    codes: list[I32] = []
    keys: list[U64] = []
    grades: list[I64] = []
    for block in _blocks(path):
        cols = _split(block, 4)
        if not len(cols.line_starts):
            continue
        _check_integers(cols, 3)
        codes.append(_qid_codes(cols, seen))
        grades.append(_text(cols, 3).astype(np.int64))
        keys.append(_keys(cols, 2))
    if not codes:
        return QrelsTable(
            (), np.zeros(0, np.int32), np.zeros((0, 1), np.uint64), np.zeros(0, np.int64)
        )
    width = max(k.shape[1] for k in keys)
    table = QrelsTable(
        tuple(seen),
        np.concatenate(codes),
        np.concatenate([widen(k, width) for k in keys]),
        np.concatenate(grades),
    )
    if has_duplicates(table.qid_codes, table.doc_keys):
        raise NotFast  # the reference reader names the line
    return table


# --------------------------------------------------------------------------- joining


_HASH_BITS = 23  # an 8 MB filter: about 3% of a run's rows pass it for 250,000 judged ids
_MULTIPLIERS = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64
)


@dataclass(frozen=True)
class JudgedIndex:
    """Finds the grade of (query, document) rows in qrels.

    A hash filter drops the rows whose document no query has judged (most rows of a deep
    run); the rest take two binary searches: the document's key among every judged key,
    then ``query * len(docs) + that index`` among the judged pairs.
    """

    docs: npt.NDArray[np.generic]  # sorted distinct judged keys, see _searchable
    width: int
    pairs: I64
    grades: I64
    seen: Bools  # one flag per hash value of a judged key

    @classmethod
    def build(cls, qrels: QrelsTable) -> JudgedIndex:
        docs, doc_index = np.unique(_searchable(qrels.doc_keys), return_inverse=True)
        pairs = qrels.qid_codes.astype(np.int64) * len(docs) + doc_index.ravel()
        order = np.argsort(pairs)
        seen = np.zeros(1 << _HASH_BITS, dtype=bool)
        seen[_hash(qrels.doc_keys)] = True
        return cls(docs, qrels.doc_keys.shape[1], pairs[order], qrels.grades[order], seen)

    def grades_of(self, queries: I64, keys: U64) -> tuple[Bools, I64]:
        """(judged, grade) of each row; ``queries`` index the qrels' qids, -1 for none."""
        judged = np.zeros(len(keys), dtype=bool)
        grades = np.zeros(len(keys), dtype=np.int64)
        rows = np.flatnonzero(self.seen[_hash(keys)] & (queries >= 0))
        judged[rows], grades[rows] = self._lookup(queries[rows], keys[rows])
        return judged, grades

    def _lookup(self, queries: I64, keys: U64) -> tuple[Bools, I64]:
        # A key wider than every judged key matches only if its extra words are empty.
        fits = ~keys[:, self.width :].any(axis=1)
        probe = _searchable(widen(keys[:, : self.width], self.width))
        at = np.minimum(np.searchsorted(self.docs, probe), max(len(self.docs) - 1, 0))
        judged = fits & (self.docs[at] == probe) if len(self.docs) else np.zeros_like(fits)
        rows = np.flatnonzero(judged)
        pair = queries[rows] * len(self.docs) + at[rows]
        slot = np.minimum(np.searchsorted(self.pairs, pair), max(len(self.pairs) - 1, 0))
        found = self.pairs[slot] == pair
        judged[rows] = found
        grades = np.zeros(len(keys), dtype=np.int64)
        grades[rows[found]] = self.grades[slot[found]]
        return judged, grades


def _hash(keys: U64) -> I64:
    """_HASH_BITS bits of a multiplicative hash of each key (zero words add nothing, so a
    key and its widened form hash alike)."""
    mixed = np.zeros(len(keys), dtype=np.uint64)
    for j in range(keys.shape[1]):
        mixed += keys[:, j] * _MULTIPLIERS[j % len(_MULTIPLIERS)]
    return (mixed >> np.uint64(64 - _HASH_BITS)).astype(np.int64)


def _searchable(keys: U64) -> npt.NDArray[np.generic]:
    """Keys as a 1-D array ordered like the ids: the word itself when keys are one word
    wide, else the big-endian bytes as numpy void, which compares like memcmp."""
    if keys.shape[1] == 1:
        return keys[:, 0]
    big_endian = np.ascontiguousarray(keys.astype(">u8"))
    return big_endian.view(f"V{8 * keys.shape[1]}").ravel()
