"""Pooling run files directly: the fast path of :func:`pooling.pooling.pool_files`.

Each file is streamed in blocks; a block is parsed with numpy and, per query, only the rows that
can still be in the top ``depth`` are kept: no Python object per line. Anything the fast parser
cannot vouch for falls back to :func:`pooling.trec.read_run`, so the result and the error
messages are exactly those of ``depth_pool(read_run(...))``. Pure core: no Django.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pooling.trec import read_run

from .pooling import PoolEntry, PoolStats, pool_summary

__all__ = ["PoolTable", "format_pool_jsonl", "format_pool_trec", "pool_files", "pool_table"]

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]
Bytes = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]


# --------------------------------------------------------------------------- pooling run files


def pool_files(
    paths: Sequence[str | Path], depth: int, names: Sequence[str] | None = None
) -> list[PoolEntry]:
    """Pool run files: the same list as ``depth_pool`` of their ``read_run``, only faster.

    Run ``i`` is called ``names[i]``, by default the path as given (``str(path)``). Files may
    be gzip-compressed. A file that is not a valid run raises
    :class:`pooling.trec.FormatError` naming the file and the line, as ``read_run`` would.
    """
    return pool_table(paths, depth, names).entries()


def pool_table(
    paths: Sequence[str | Path], depth: int, names: Sequence[str] | None = None
) -> PoolTable:
    """Pool run files like :func:`pool_files`, keeping the pool in columns (:class:`PoolTable`).

    The columns are what a large pool needs to be summarised and written out quickly;
    :meth:`PoolTable.entries` turns them into the :class:`PoolEntry` list.
    """
    if depth < 1:
        raise ValueError(f"pool depth must be at least 1, got {depth}")
    run_names = _run_names(paths, names)
    qids: dict[str, int] = {}  # qid -> code, shared by all files, in order of first sight
    tops = [_file_top(path, depth, qids) for path in paths]
    return _merge(tops, run_names, list(qids), depth)


def _run_names(paths: Sequence[str | Path], names: Sequence[str] | None) -> tuple[str, ...]:
    run_names = tuple(str(path) for path in paths) if names is None else tuple(names)
    if len(run_names) != len(paths):
        raise ValueError(f"{len(run_names)} run names for {len(paths)} run files")
    seen: set[str] = set()
    for name in run_names:
        if name in seen:
            raise ValueError(f"run name {name!r} is given twice; each run needs its own")
        seen.add(name)
    return run_names


class _NotFast(Exception):
    """The fast reader met something that only the exact reader handles or can report."""


_BLOCK_BYTES = 1 << 21  # 2 MiB at a time: the arrays of a block stay in the CPU cache
_MAX_TOKEN = 256  # ids and numbers longer than this (never seen in practice) go the exact way
_SLACK = _MAX_TOKEN + 8  # bytes readable past a block's end, for reading fields by the word
_EXACT_DIGITS = 19  # the longest plain decimal mantissa read without numpy's string parser
_POW10 = np.array([float(10**k) for k in range(_EXACT_DIGITS + 1)])  # all exact doubles
# _KEEP[n] keeps the first n bytes of a big-endian 64-bit word and zeroes the rest.
_KEEP = np.array([(1 << 64) - (1 << (64 - 8 * n)) for n in range(9)], dtype=np.uint64)
_GZIP_MAGIC = b"\x1f\x8b"
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio) to spread hashes


def _file_top(path: str | Path, depth: int, qids: dict[str, int]) -> _Rows:
    """The top ``depth`` rows of every query of one run file, in trec_eval order."""
    try:
        return _fast_top(path, depth, qids)
    except _NotFast:
        # Whatever the fast reader cannot vouch for (non-ASCII ids, odd control bytes, a
        # malformed or repeated line), the exact reader pools the same way or reports with
        # the file and line, as read_run does. Valid runs rarely get here.
        return _exact_top(path, depth, qids)


def _exact_top(path: str | Path, depth: int, qids: dict[str, int]) -> _Rows:
    codes: list[int] = []
    docids: list[str] = []
    positions: list[int] = []
    for qid, rows in read_run(path).items():
        code = qids.setdefault(qid, len(qids))
        for position, row in enumerate(rows[:depth], start=1):
            codes.append(code)
            docids.append(row.docid)
            positions.append(position)
    return _Rows(_ints(codes), _Ids.from_strings(docids), _ints(positions))


def _fast_top(path: str | Path, depth: int, qids: dict[str, int]) -> _Rows:
    kept: list[_Rows] = []
    codes: list[Ints] = []
    keys: list[Words] = []
    for buf, end in _blocks(path):
        rows = _parse_block(buf, end, qids)
        codes.append(rows.qcode)
        keys.append(rows.pair_keys())
        kept.append(_keep_top(rows, depth))
        if len(kept) > 32:  # bound the memory a long file takes
            kept = [_keep_top(_Rows.concat(kept), depth)]
    # read_run refuses a document listed twice for a query. Equal hashes are rare enough that
    # the exact reader can settle every case (a real repeat, or a mere collision).
    if keys and _repeats(np.concatenate(codes), np.concatenate(keys)):
        raise _NotFast
    return _rank(_Rows.concat(kept), depth)


def _repeats(codes: Ints, keys: Words) -> bool:
    """Whether two rows share a (query, document) key.

    Runs list each query's rows together, so sorting each query's keys on its own is
    enough, and quick: they fit in the CPU cache. Otherwise a bucket count comes first,
    so that only the keys that share a bucket need sorting.
    """
    firsts, sizes = _groups(codes)
    if len(firsts) <= len(codes) // 16 and len(np.unique(codes[firsts])) == len(firsts):
        keys = keys.copy()
        for first, size in zip(firsts.tolist(), sizes.tolist(), strict=True):
            keys[first : first + size].sort()
        return bool(np.any(keys[1:] == keys[:-1]))
    bits = min(max(len(keys).bit_length() + 2, 10), 24)
    bucket = (keys >> np.uint64(64 - bits)).astype(np.intp)
    suspects = np.sort(keys[np.bincount(bucket, minlength=1 << bits)[bucket] > 1])
    return bool(np.any(suspects[1:] == suspects[:-1]))


def _blocks(path: str | Path) -> Iterator[tuple[Bytes, int]]:
    """The file's bytes (gunzipped if it starts with the gzip magic), a block of whole lines
    at a time: ``(buf, end)``, the lines being ``buf[:end]``.

    One buffer serves every block, with _SLACK bytes to spare after the lines so that
    fields can be read eight bytes at a time without running off its end. A block is only
    valid until the next one is read.
    """
    with open(path, "rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    buffer, filled = bytearray(_BLOCK_BYTES + _SLACK), 0
    try:
        with gzip.open(path, "rb") if compressed else open(path, "rb") as stream:
            while True:
                if filled == len(buffer) - _SLACK:  # a line longer than the buffer
                    buffer = buffer + bytearray(len(buffer))
                with memoryview(buffer) as free:
                    read = stream.readinto(free[filled : len(buffer) - _SLACK])
                if not read:
                    break
                filled += read
                end = buffer.rfind(b"\n", 0, filled) + 1
                if end:
                    yield np.frombuffer(buffer, np.uint8), end
                    buffer[: filled - end] = buffer[end:filled]  # the unfinished line
                    filled -= end
            if filled:
                yield np.frombuffer(buffer, np.uint8), filled
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise _NotFast from exc  # the exact reader names the line where the damage starts


@dataclass(frozen=True)
class _Ids:
    """Identifiers as numbers: zero-padded bytes in big-endian 64-bit words, and lengths.

    Big-endian words compare as integers the way their bytes compare as strings, and UTF-8
    bytes compare the way Python compares the strings (by code point), so ids are sorted,
    grouped and tie-broken exactly as ``str`` would be, without leaving numpy. The length
    separates ``"a"`` from ``"a\\x00"``, which only ids holding a NUL (``nul_free`` False)
    can need.
    """

    words: Words  # shape (n, k)
    length: Ints
    nul_free: bool = True

    @classmethod
    def from_strings(cls, ids: Sequence[str]) -> _Ids:
        encoded = [text.encode() for text in ids]
        width = 8 * _words(max(map(len, encoded), default=0))
        matrix = np.array(encoded, dtype=f"S{width}").view(np.uint8).reshape(len(ids), width)
        nul_free = not any(b"\0" in raw for raw in encoded)
        return cls(matrix.view(">u8").astype(np.uint64), _ints(list(map(len, encoded))), nul_free)

    def __len__(self) -> int:
        return len(self.length)

    def take(self, index: npt.NDArray[Any]) -> _Ids:
        return _Ids(self.words[index], self.length[index], self.nul_free)

    def sort_keys(self, descending: bool = False) -> list[npt.NDArray[Any]]:
        """Keys for :func:`_lexsort` (least significant first) that order the ids as strings."""
        words = list(self.words.T[::-1])
        if self.nul_free and len(words) == 1:
            return [~words[0]] if descending else words  # one word says it all
        if descending:
            return [-self.length, *(~word for word in words)]
        return [self.length, *words]

    def changes(self) -> Mask:
        """True where an id differs from the one before it (and for the first)."""
        changed = np.ones(len(self), dtype=bool)
        changed[1:] = (self.length[1:] != self.length[:-1]) | np.any(
            self.words[1:] != self.words[:-1], axis=1
        )
        return changed

    def bytes(self) -> Bytes:
        """The ids as an (n, 8k) matrix of zero-padded bytes."""
        n, k = self.words.shape
        return self.words.astype(">u8").view(np.uint8).reshape(n, 8 * k)

    def fixed(self) -> npt.NDArray[np.bytes_]:
        """The ids as a fixed-width bytes array (trailing NUL bytes dropped)."""
        n, k = self.words.shape
        return self.bytes().view(f"S{8 * k}").reshape(n)

    def hashes(self) -> Words:
        """A 64-bit hash of each id: equal ids hash alike; different ones almost never do."""
        mixed = self.length.astype(np.uint64)
        for column in self.words.T:
            mixed = (mixed ^ column) * _MIX  # uint64 arithmetic wraps around, as a hash wants
            mixed ^= mixed >> np.uint64(29)
        return mixed

    def strings(self) -> list[str]:
        fixed = self.fixed()
        texts: list[str] = fixed.astype(np.dtypes.StringDType()).tolist()
        # A fixed-width bytes array drops trailing NUL bytes, which an id may (rarely) end with.
        for i in np.flatnonzero(np.strings.str_len(fixed) != self.length).tolist():
            texts[i] = self.bytes()[i, : self.length[i]].tobytes().decode()
        return texts

    @staticmethod
    def concat(parts: Sequence[_Ids]) -> _Ids:
        k = max((part.words.shape[1] for part in parts), default=1)
        words = [np.pad(part.words, ((0, 0), (0, k - part.words.shape[1]))) for part in parts]
        return _Ids(
            np.concatenate(words) if words else np.zeros((0, k), np.uint64),
            np.concatenate([part.length for part in parts]) if parts else _ints([]),
            all(part.nul_free for part in parts),
        )


@dataclass(frozen=True)
class _Rows:
    """Run rows in columns: query code, document id, and the score (as a float32, see
    :func:`_single`) while rows are candidates, or the 1-based position in trec_eval order
    (int) once ranked."""

    qcode: Ints
    docid: _Ids
    value: npt.NDArray[Any]

    def take(self, index: npt.NDArray[Any]) -> _Rows:
        return _Rows(self.qcode[index], self.docid.take(index), self.value[index])

    def pair_keys(self) -> Words:
        """A 64-bit hash of each (query, document) pair."""
        return self.docid.hashes() ^ (self.qcode.astype(np.uint64) * _MIX)

    @staticmethod
    def empty() -> _Rows:
        return _Rows(_ints([]), _Ids.concat([]), _ints([]))

    @staticmethod
    def concat(parts: Sequence[_Rows]) -> _Rows:
        if len(parts) <= 1:
            return parts[0] if parts else _Rows.empty()
        return _Rows(
            np.concatenate([part.qcode for part in parts]),
            _Ids.concat([part.docid for part in parts]),
            np.concatenate([part.value for part in parts]),
        )


def _parse_block(buf: Bytes, end: int, qids: dict[str, int]) -> _Rows:
    """Parse the lines ``buf[:end]`` of a run (``qid Q0 docid rank score tag``) into columns.

    Raises :class:`_NotFast` unless every non-blank line is ASCII with six fields, an integer
    rank and a number for a score: the exact reader handles the rest, with its messages.
    ``buf`` must have _SLACK readable bytes after ``end``.
    """
    lines = buf[:end]
    if lines.max(initial=0) >= 128:
        raise _NotFast  # non-ASCII bytes: UTF-8 checks and Unicode whitespace apply
    starts, ends = _fields(lines)
    if not len(starts[0]):
        return _Rows.empty()  # blank lines only
    # The big-endian 64-bit word at every byte offset, as a view: a field's first eight bytes
    # are then one gather away.
    words = np.ndarray((len(buf) - 7,), dtype=">u8", buffer=buf, strides=(1,))
    qid = _field(words, starts[0], ends[0])
    docid = _field(words, starts[2], ends[2])
    _check_ranks(*_columns(buf, starts[3], ends[3]))
    score = _single(_scores(*_columns(buf, starts[4], ends[4])))
    return _Rows(_query_codes(qid, qids), docid, score)


def _fields(buf: Bytes) -> tuple[list[Ints], list[Ints]]:
    """Start and end offsets of the six fields of every line: ``starts[field][line]``."""
    blanks = np.flatnonzero(buf <= 32)
    kinds = buf[blanks]
    # str.split() splits on blanks, \t-\r and \x1c-\x1f; other control bytes belong to a
    # field for it. Leave any such file to it. (kinds - 14 wraps around below 14.)
    if len(kinds) and (kinds.min() < 9 or np.any(kinds - np.uint8(14) < 14)):
        raise _NotFast
    if buf[-1] > 32:  # the last line has no line end: give it one
        blanks, kinds = np.append(blanks, len(buf)), np.append(kinds, np.uint8(10))
    if len(blanks) % 6 or not len(blanks) or blanks[0] == 0 or np.any(np.diff(blanks) == 1):
        return _spaced_fields(buf)
    # The usual layout: one byte between fields, five blanks and a line end a line.
    if np.count_nonzero(kinds == 10) * 6 != len(kinds) or np.any(kinds[5::6] != 10):
        raise _NotFast
    ends = [blanks[field::6] for field in range(6)]
    # A field starts after the blank that ends the one before; a line after the line end.
    starts = [np.concatenate(([0], ends[5][:-1] + 1)), *(end + 1 for end in ends[:5])]
    return starts, ends


def _spaced_fields(buf: Bytes) -> tuple[list[Ints], list[Ints]]:
    """:func:`_fields` for any layout: several blanks, CR LF line ends, blank lines."""
    token = buf > 32
    edges = np.flatnonzero(token[1:] != token[:-1]) + 1
    if token[0]:
        edges = np.concatenate(([0], edges))
    if token[-1]:
        edges = np.concatenate((edges, [len(buf)]))
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) % 6:
        raise _NotFast
    # Six fields a line: the gap before every sixth field holds a line end, no other gap does.
    expected = np.zeros(max(len(starts) - 1, 0), dtype=bool)
    expected[5::6] = True
    if not np.array_equal(_holds_newline(buf, ends[:-1], starts[1:]), expected):
        raise _NotFast
    return [starts[field::6] for field in range(6)], [ends[field::6] for field in range(6)]


def _holds_newline(buf: Bytes, low: Ints, high: Ints) -> Mask:
    """Whether each gap ``buf[low:high]`` between two fields holds a line end."""
    holds: Mask = buf[low] == 10  # most gaps are a single byte: a blank or the line end
    wide = np.flatnonzero(high - low > 1)
    if len(wide):
        newlines = np.flatnonzero(buf == 10)
        before_high = np.searchsorted(newlines, high[wide])
        holds[wide] = before_high > np.searchsorted(newlines, low[wide])
    return holds


def _field(words: Words, starts: Ints, ends: Ints) -> _Ids:
    """One field of every line as :class:`_Ids`, eight bytes (one gather) at a time."""
    length = ends - starts
    k = _words(int(length.max(initial=0)))
    if 8 * k > _MAX_TOKEN:
        raise _NotFast
    out = np.empty((len(starts), k), np.uint64)
    for word in range(k):
        # Keep the bytes that belong to the field; zero the ones that follow it.
        keep = _KEEP[length if k == 1 else np.clip(length - 8 * word, 0, 8)]
        out[:, word] = words[starts + 8 * word] & keep
    return _Ids(out, length)


def _columns(buf: Bytes, starts: Ints, ends: Ints) -> tuple[Bytes, Ints]:
    """A field of every line, zero-padded, column by column: (width, lines), the layout in
    which numpy is quick at per-byte work; and the fields' lengths. The width is a multiple
    of four (see :func:`_scores`)."""
    length = ends - starts
    width = int(length.max(initial=0))
    if width > _MAX_TOKEN:
        raise _NotFast
    columns = np.zeros((-(-width // 4) * 4, len(starts)), np.uint8)
    index = starts.copy()
    for column in range(width):
        np.take(buf, index, out=columns[column])
        if column:  # zero what lies past a field's end (every field has its first byte)
            columns[column] *= length > column
        index += 1
    return columns, length


def _column_sum(flags: Bytes) -> npt.NDArray[np.uint16]:
    """Sum a (width, n) array of small numbers down its columns (a width of at most 256)."""
    return np.add.reduce(flags, axis=0, dtype=np.uint16)


def _check_ranks(columns: Bytes, length: Ints) -> None:
    """Refuse what read_run refuses as a rank: anything but ``[+-]?[0-9]+``."""
    digits = _column_sum(((columns - np.uint8(48)) < 10).view(np.uint8))
    signed = (columns[0] == 43) | (columns[0] == 45)
    if not np.all((digits == length) | (signed & (digits == length - 1) & (length > 1))):
        raise _NotFast


def _scores(columns: Bytes, length: Ints) -> npt.NDArray[np.float64]:
    """The scores as ``float()`` reads them, bit for bit.

    A plain decimal (``[+-]digits[.digits]``) is M / 10**k. With up to 15 digits, M and
    10**k are exact doubles and IEEE division rounds M / 10**k correctly, as ``float()``
    rounds the decimal. Up to 19 digits (what ``repr`` of a double prints, with a leading
    zero) take x86 extended precision, see :func:`_wide_quotient`. Any other token
    (exponent, more digits, malformed) goes through numpy's string parser, which gives
    what ``float()`` gives and refuses what it refuses.
    """
    # Byte arithmetic on 0/1 arrays and explicit small-integer sums: numpy's where,
    # count_nonzero and argmax along the columns cost several times as much here.
    value = columns - np.uint8(48)  # digits become 0-9; every other byte wraps above 9
    digit, dot = (value < 10).view(np.uint8), (columns == 46).view(np.uint8)
    signed = (columns[0] == 43) | (columns[0] == 45)
    n_digits, n_dots = _column_sum(digit), _column_sum(dot)
    plain = (n_digits + n_dots + signed == length) & (n_dots <= 1)
    plain &= (n_digits >= 1) & (n_digits <= _EXACT_DIGITS)
    # Horner, left to right: M = M * 10 + digit, where a sign, the dot or padding multiply by
    # 1 and add 0. Four columns are first folded into one (10**4 and 9999 fit 16 bits), so
    # that only a quarter of the steps run on 64-bit numbers.
    times, plus = digit * np.uint8(9) + np.uint8(1), value * digit
    times, plus = times[0::2] * times[1::2], plus[0::2] * times[1::2] + plus[1::2]
    times, plus = (
        times[0::2].astype(np.uint16) * times[1::2],
        plus[0::2].astype(np.uint16) * times[1::2] + plus[1::2],
    )
    mantissa = np.zeros(len(length), np.uint64)
    for factor, digits in zip(times, plus, strict=True):
        mantissa *= factor
        mantissa += digits
    dot_at = _column_sum(dot * np.arange(len(columns), dtype=np.uint8)[:, None])
    decimals = np.where(n_dots == 1, length - 1 - dot_at, 0).clip(0, _EXACT_DIGITS)
    score = mantissa.astype(np.float64) / _POW10[decimals]
    long = np.flatnonzero(plain & (n_digits > 15))
    if len(long):
        score[long], exact = _wide_quotient(mantissa[long], decimals[long])
        plain[long] &= exact
    score = np.where(columns[0] == 45, -score, score)  # keeps -0.0 as float() does
    other = np.flatnonzero(~plain)
    if len(other):
        try:
            tokens = np.ascontiguousarray(columns[:, other].T).view(f"S{len(columns)}")
            score[other] = tokens.reshape(len(other)).astype(np.float64)
        except ValueError as exc:
            raise _NotFast from exc
    if not np.all(np.isfinite(score)):
        raise _NotFast  # read_run refuses nan and inf
    return score


def _single(score: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """The scores as trec_eval compares them: rounded to single precision, as rank_run does
    (scores that differ only beyond float32 precision tie, and the docid decides)."""
    with np.errstate(over="ignore"):
        single = score.astype(np.float32)
    if not np.all(np.isfinite(single)):
        raise _NotFast  # too large for a float32: rare enough to leave to the exact reader
    return single


def _wide_quotient(mantissa: Words, decimals: Ints) -> tuple[npt.NDArray[np.float64], Mask]:
    """M / 10**k for mantissas of 16 to 19 digits, and whether each result is exact.

    In x86 extended precision (64-bit significand) M and 10**k are exact and the quotient
    is correctly rounded; rounding it again to a double is correct unless the first
    rounding landed exactly halfway between two doubles, which is the case reported as
    not exact. Where long double is no wider than a double, nothing is exact here.
    """
    if np.finfo(np.longdouble).nmant < 63:
        return np.zeros(len(mantissa)), np.zeros(len(mantissa), dtype=bool)
    quotient = mantissa.astype(np.longdouble) / _POW10[decimals].astype(np.longdouble)
    score = quotient.astype(np.float64)
    off = quotient - score  # exact: the two are within one double ulp
    beyond = np.nextafter(score, np.where(off > 0, np.inf, -np.inf))
    return score, (off == 0) | (off != beyond.astype(np.longdouble) - quotient)


def _query_codes(qid: _Ids, qids: dict[str, int]) -> Ints:
    """The code of each row's qid; runs list a query's rows together, so decode one a block."""
    firsts = np.flatnonzero(qid.changes())
    codes = [qids.setdefault(text, len(qids)) for text in qid.take(firsts).strings()]
    return np.repeat(_ints(codes), np.diff(np.append(firsts, len(qid))))


def _keep_top(rows: _Rows, depth: int) -> _Rows:
    """Drop the rows below the ``depth``-th best score of their query: they cannot be pooled.

    Rows tied with that score stay; the docid decides between them later.
    """
    firsts, sizes = _groups(rows.qcode)  # blocks of one query, as the file lists them
    if _descending(rows.value, firsts):  # the usual file: the cut-off is the depth-th row
        cutoff = rows.value[firsts + np.minimum(sizes, depth) - 1]
        return rows.take(np.flatnonzero(rows.value >= np.repeat(cutoff, sizes)))
    order = _lexsort([-rows.value, rows.qcode])
    score = rows.value[order]
    firsts, sizes = _groups(rows.qcode[order])
    cutoff = score[firsts + np.minimum(sizes, depth) - 1]
    return rows.take(order[score >= np.repeat(cutoff, sizes)])


def _descending(score: npt.NDArray[np.float32], firsts: Ints) -> bool:
    """Whether every block (starting at ``firsts``) lists its scores from high to low."""
    rises = score[1:] > score[:-1]
    rises[firsts[1:] - 1] = False  # from one block to the next is no rise
    return not np.any(rises)


def _rank(rows: _Rows, depth: int) -> _Rows:
    """Sort each query's rows in trec_eval order; keep the first ``depth`` with positions.

    Queries stay together, in no particular order.
    """
    order = _trec_order(rows)
    firsts, sizes = _groups(rows.qcode[order])
    position = np.arange(len(order)) - np.repeat(firsts, sizes) + 1
    keep = order[position <= depth]
    return _Rows(rows.qcode[keep], rows.docid.take(keep), position[position <= depth])


def _trec_order(rows: _Rows) -> Ints:
    """An order that groups the rows by query, each in rank_run's order: score (in single
    precision) descending, then docid descending."""
    firsts, _ = _groups(rows.qcode)
    if len(np.unique(rows.qcode[firsts])) < len(firsts) or not _descending(rows.value, firsts):
        return _lexsort([*rows.docid.sort_keys(descending=True), -rows.value, rows.qcode])
    # The usual file lists each query's rows by score already: only ties need the docid.
    order = np.arange(len(rows.qcode))
    tied = (rows.value[1:] == rows.value[:-1]) & (rows.qcode[1:] == rows.qcode[:-1])
    if np.any(tied):
        in_tie = np.zeros(len(order), dtype=bool)
        in_tie[1:] |= tied
        in_tie[:-1] |= tied
        rows_tied = np.flatnonzero(in_tie)
        # Consecutive tied rows share a group; a new group starts where a tie does not join.
        group = np.cumsum(np.concatenate(([True], ~tied[rows_tied[1:] - 1])))
        by_docid = rows.docid.take(rows_tied).sort_keys(descending=True)
        order[rows_tied] = rows_tied[_lexsort([*by_docid, group])]
    return order


def _lexsort(keys: Sequence[npt.NDArray[Any]]) -> Ints:
    """``np.lexsort(keys)``: stable, the last key primary.

    Done as a chain of stable argsorts of keys gathered into order, which is several times
    quicker than np.lexsort on large arrays; small integer keys even sort by radix.
    """
    order: Ints = np.argsort(_narrow(keys[0]), kind="stable")
    for key in keys[1:]:
        order = order[np.argsort(_narrow(key[order]), kind="stable")]
    return order


def _narrow(key: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Integer keys that fit in 16 bits as uint16, which numpy's stable sort does by radix."""
    if key.dtype.kind not in "iu" or not len(key):
        return key
    low, high = int(key.min()), int(key.max())
    return (key - low).astype(np.uint16) if high - low < 1 << 16 else key


def _groups(codes: npt.NDArray[Any]) -> tuple[Ints, Ints]:
    """First index and length of each run of equal consecutive values."""
    changed = np.ones(len(codes), dtype=bool)
    changed[1:] = codes[1:] != codes[:-1]
    firsts = np.flatnonzero(changed)
    return firsts, np.diff(np.append(firsts, len(codes)))


def _words(n_bytes: int) -> int:
    return max(1, -(-n_bytes // 8))


def _ints(values: Sequence[int]) -> Ints:
    return np.array(values, dtype=np.int64)


# --------------------------------------------------------------------------- pool table


@dataclass(frozen=True)
class PoolTable:
    """A pool in columns, in the order of :func:`depth_pool` (qid, best position, docid).

    Entry ``i`` is query ``qids[entry_qid[i]]`` and document ``docids[i]``; the runs that
    pooled it are ``run_names[hit_run[h]]``, at ``hit_position[h]``, for ``h`` from
    ``hit_start[i]`` to ``hit_start[i + 1]`` (in name order, as depth_pool lists them).
    ``qids`` holds the pooled queries in string order.
    """

    run_names: tuple[str, ...]
    depth: int
    qids: tuple[str, ...]
    entry_qid: Ints
    docids: tuple[str, ...]
    hit_start: Ints
    hit_run: Ints
    hit_position: Ints

    def __len__(self) -> int:
        return len(self.docids)

    def entries(self) -> list[PoolEntry]:
        names, runs, positions = self.run_names, self.hit_run.tolist(), self.hit_position.tolist()
        bounds = self.hit_start.tolist()
        return [
            PoolEntry(self.qids[q], docid, {names[runs[h]]: positions[h] for h in range(a, b)})
            for q, docid, a, b in zip(
                self.entry_qid.tolist(), self.docids, bounds[:-1], bounds[1:], strict=True
            )
        ]

    def stats(self) -> PoolStats:
        """The same :class:`PoolStats` as :func:`pool_stats` of the entries, in numpy."""
        n_runs = len(self.run_names)
        sizes = np.bincount(self.entry_qid, minlength=len(self.qids)).tolist()
        contributed = np.bincount(self.hit_run, minlength=n_runs).tolist()
        alone = np.repeat(np.diff(self.hit_start) == 1, np.diff(self.hit_start))
        unique = np.bincount(self.hit_run[alone], minlength=n_runs).tolist()
        both = self._shared_counts()
        return pool_summary(
            dict(zip(self.qids, sizes, strict=True)),
            list(zip(self.run_names, contributed, unique, strict=True)),
            {
                (self.run_names[a], self.run_names[b]): int(both[a, b])
                for a, b in combinations(range(n_runs), 2)
            },
        )

    def _shared_counts(self, rows: int = 1 << 16) -> npt.NDArray[np.float64]:
        """Pairs pooled by both runs ``a`` and ``b``, as an (n_runs, n_runs) matrix.

        The product of the entry-by-run membership matrix with itself, a slice of entries
        at a time so that memory stays small; float64 counts are exact far beyond any pool.
        """
        n_runs = len(self.run_names)
        entry = np.repeat(np.arange(len(self)), np.diff(self.hit_start))
        counts = np.zeros((n_runs, n_runs))
        for low in range(0, len(self), rows):
            hits = slice(self.hit_start[low], self.hit_start[min(low + rows, len(self))])
            member = np.zeros((min(rows, len(self) - low), n_runs))
            member[entry[hits] - low, self.hit_run[hits]] = 1.0
            counts += member.T @ member
        return counts


def _merge(
    tops: Sequence[_Rows], run_names: tuple[str, ...], qids: list[str], depth: int
) -> PoolTable:
    """Join the runs' top rows into pool entries, in depth_pool's order."""
    by_name = sorted(range(len(tops)), key=run_names.__getitem__)
    hits = _Rows.concat([tops[i] for i in by_name])
    run = np.repeat(_ints(by_name), [len(tops[i].qcode) for i in by_name])
    # qids as strings rank the queries; depth_pool orders entries by qid string.
    qid_rank = np.argsort(np.argsort(np.array(qids, dtype=object))) if qids else _ints([])
    query = qid_rank[hits.qcode]
    # Hits by (query, document); stable, so a pair's runs stay in name order.
    order = _lexsort([*hits.docid.sort_keys(), query])
    hits, run, query = hits.take(order), run[order], query[order]
    changed = np.ones(len(run), dtype=bool)
    changed[1:] = (query[1:] != query[:-1]) | hits.docid.changes()[1:]
    firsts = np.flatnonzero(changed)
    sizes = np.diff(np.append(firsts, len(run)))
    best = np.minimum.reduceat(hits.value, firsts) if len(firsts) else _ints([])
    # Entries come out by (query, docid); a stable sort on (query, best) finishes the order.
    entry_order = _lexsort([query[firsts] * (depth + 1) + best])
    pooled = np.unique(query[firsts])  # ranks of the pooled qids, ascending
    by_rank = sorted(qids)
    hit_order = _expand(firsts[entry_order], sizes[entry_order])
    return PoolTable(
        run_names=run_names,
        depth=depth,
        qids=tuple(by_rank[r] for r in pooled.tolist()),
        entry_qid=np.searchsorted(pooled, query[firsts][entry_order]),
        docids=tuple(hits.docid.take(firsts[entry_order]).strings()),
        hit_start=np.append(0, np.cumsum(sizes[entry_order])),
        hit_run=run[hit_order],
        hit_position=hits.value[hit_order],
    )


def _expand(starts: Ints, sizes: Ints) -> Ints:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, sizes)])`` without the loop."""
    offsets = np.cumsum(sizes) - sizes
    return np.repeat(starts - offsets, sizes) + np.arange(int(sizes.sum()))


# --------------------------------------------------------------------------- output formats


def format_pool_jsonl(table: PoolTable, batch: int = 1 << 16) -> Iterator[str]:
    """The pool as JSON lines, in blocks of up to ``batch`` lines.

    One line per entry, ``{"qid": "...", "docid": "...", "runs": {"<run name>": position}}``,
    exactly as ``json.dumps`` writes it (runs in name order), in the pool's order.
    """
    # Strings are assembled with numpy object arrays (one C loop per piece, not a Python
    # loop per line), then joined once per batch.
    heads = _objects('{"qid": ' + _json_string(qid) + ', "docid": ' for qid in table.qids)
    for low in range(0, len(table), batch):
        entries = slice(low, min(low + batch, len(table)))
        start = table.hit_start[entries.start : entries.stop + 1]
        docids = _objects(map(_json_string, table.docids[entries]))
        head = heads[table.entry_qid[entries]] + docids + ', "runs": {'
        runs = _provenance(table, slice(start[0], start[-1]), start - start[0])
        # Each entry's head, then its runs: entry i's head goes after the runs of the
        # entries before it, and each run after the heads so far.
        sizes = np.diff(start)
        pieces = np.empty(len(head) + len(runs), dtype=object)
        pieces[start[:-1] - start[0] + np.arange(len(head))] = head
        pieces[np.arange(len(runs)) + np.repeat(np.arange(len(head)), sizes) + 1] = runs
        yield "".join(pieces.tolist())


def _provenance(table: PoolTable, hits: slice, bounds: Ints) -> npt.NDArray[np.object_]:
    """``"<run name>": position`` for each hit, with the ", " before all but an entry's first
    and, after its last, the braces and the line end that close the line."""
    run, position = table.hit_run[hits], table.hit_position[hits]
    first = np.zeros(len(run), dtype=bool)
    first[bounds[:-1]] = True
    last = np.zeros(len(run), dtype=bool)
    last[bounds[1:] - 1] = True
    names = [_json_string(name) + ": " for name in table.run_names]
    variant = (~first).astype(np.intp) * 2 + last
    n_runs, depth = len(names), table.depth
    if 4 * n_runs * depth <= len(run):  # a table of every possible piece is the smaller
        pieces = _objects(
            ("" if lead else ", ") + name + str(rank) + ("}}\n" if end else "")
            for lead in (True, False)
            for end in (False, True)
            for name in names
            for rank in range(1, depth + 1)
        )
        return pieces[(variant * n_runs + run) * depth + position - 1]
    leads, ends = ("", "", ", ", ", "), ("", "}}\n", "", "}}\n")
    return _objects(
        leads[v] + names[r] + str(p) + ends[v]
        for v, r, p in zip(variant.tolist(), run.tolist(), position.tolist(), strict=True)
    )


def format_pool_trec(table: PoolTable, batch: int = 1 << 16) -> Iterator[str]:
    """The pool as a TREC run file, ``qid Q0 docid rank score pool@<depth>``, in blocks.

    One line per pooled pair, in the pool's order: ``rank`` counts 1, 2, ... within each
    query and ``score`` counts down to 1, so that every TREC tool (which orders by score)
    and ``read_run`` see the pool's order. Provenance needs the JSON lines format.
    """
    firsts, sizes = _groups(table.entry_qid)
    rank = np.arange(len(table)) - np.repeat(firsts, sizes) + 1
    score = np.repeat(sizes, sizes) - rank + 1
    numbers = _objects(map(str, range(int(sizes.max(initial=0)) + 1)))
    heads = _objects(f"{qid} Q0 " for qid in table.qids)
    tail = f" pool@{table.depth}\n"
    for low in range(0, len(table), batch):
        entries = slice(low, min(low + batch, len(table)))
        line = heads[table.entry_qid[entries]] + _objects(table.docids[entries]) + " "
        line += numbers[rank[entries]] + " " + numbers[score[entries]] + tail
        yield "".join(line.tolist())


def _objects(items: Iterable[str]) -> npt.NDArray[np.object_]:
    """A numpy array of Python strings, on which ``+`` concatenates element by element."""
    strings = list(items)
    array = np.empty(len(strings), dtype=object)
    array[:] = strings
    return array
