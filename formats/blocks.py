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

from formats.text import is_gzip

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

# _LOW[k] keeps the first k bytes of a token loaded as a little-endian word (its low bytes);
# _HIGH_BITS[k] is the top bit of each of those bytes.
_LOW = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_HIGH_BITS = _LOW & np.uint64(0x8080808080808080)
_ZEROS = np.uint64(0x3030303030303030)  # "00000000"
_DIGIT_ADD = np.uint64(0x7676767676767676)  # a byte b - "0" < 10 iff adding 0x76 keeps bit 7 clear
_DOTS = np.uint64(0x2E2E2E2E2E2E2E2E)  # "........"
_POW10 = np.array([10.0**k for k in range(9)])
_EXACT_DIGITS = 19  # the longest plain decimal mantissa read without numpy's string parser
_POW10_WIDE = np.array([float(10**k) for k in range(_EXACT_DIGITS + 1)])  # all exact doubles


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
        _check_integers(cols, 3)
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
        _check_integers(cols, 3)
        codes = _qid_codes(cols, seen)
        grades = _text(cols, 3).astype(np.int64)
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


def _text(cols: _Columns, j: int) -> npt.NDArray[np.bytes_]:
    """Tokens of column j as a fixed-width bytes array (numpy drops the zero padding)."""
    width = _width(cols, j)
    return _token_words(cols, j, width).view(f"S{8 * width}").ravel()


def _check_integers(cols: _Columns, j: int) -> None:
    """Raise NotSplit unless every token of column j matches ``[+-]?[0-9]+``, the
    line rule's; eight bytes at a time, one word per token."""
    starts, lengths = cols.token(j)
    if int(lengths.max(initial=1)) > 8:
        raise NotSplit
    word = cols.words()[starts] & _LOW[lengths]
    first = word & np.uint64(0xFF)
    signed = ((first == ord("+")) | (first == ord("-"))) & (lengths > 1)
    word = np.where(signed, word ^ first ^ np.uint64(ord("0")), word)  # "+12" checks as "012"
    if not _all_digits(word, lengths).all():
        raise NotSplit


def _floats(cols: _Columns, j: int) -> F64:
    """Column j parsed as Python's float() parses it (correctly rounded), finite only.

    Short plain decimals (at most 8 bytes, such as ``-12.3456``) are parsed eight bytes at a
    time by _short_decimals; the rest byte column by byte column by _long_decimals.
    """
    starts, lengths = cols.token(j)
    short = lengths <= 8
    word = cols.words()[starts] & _LOW[np.minimum(lengths, 8)]
    values, simple = _short_decimals(word, lengths)
    simple &= short
    rest = np.flatnonzero(~simple)
    if len(rest):
        if int(lengths[rest].max()) > _PAD:
            raise NotSplit  # a token longer than the padding: rare enough for the line parser
        values[rest] = _long_decimals(
            _columns(cols.buf, starts[rest], lengths[rest]), lengths[rest]
        )
    if not np.isfinite(values).all():
        raise NotSplit
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


def _columns(buf: U8, starts: I64, length: I64) -> U8:
    """Tokens zero-padded, byte by byte: (width, tokens), the layout in which numpy is
    quick at per-byte work. The width is a multiple of four (see :func:`_long_decimals`)."""
    width = int(length.max(initial=0))
    columns = np.zeros((-(-width // 4) * 4, len(starts)), np.uint8)
    index = starts.copy()
    for column in range(width):
        np.take(buf, index, out=columns[column])
        if column:  # zero what lies past a field's end (every field has its first byte)
            columns[column] *= length > column
        index += 1
    return columns


def _column_sum(flags: U8) -> npt.NDArray[np.uint16]:
    """Sum a (width, n) array of small numbers down its columns (a width of at most 256)."""
    return np.add.reduce(flags, axis=0, dtype=np.uint16)


def _long_decimals(columns: U8, length: I64) -> F64:
    """Tokens (as :func:`_columns` lays them out) as ``float()`` reads them, bit for bit.

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
    score = mantissa.astype(np.float64) / _POW10_WIDE[decimals]
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
            raise NotSplit from exc
    return score


def _wide_quotient(mantissa: U64, decimals: I64) -> tuple[F64, Bools]:
    """M / 10**k for mantissas of 16 to 19 digits, and whether each result is exact.

    In x86 extended precision (64-bit significand) M and 10**k are exact and the quotient
    is correctly rounded; rounding it again to a double is correct unless the first
    rounding landed exactly halfway between two doubles, which is the case reported as
    not exact. Where long double is no wider than a double, nothing is exact here.
    """
    if np.finfo(np.longdouble).nmant < 63:
        return np.zeros(len(mantissa)), np.zeros(len(mantissa), dtype=bool)
    quotient = mantissa.astype(np.longdouble) / _POW10_WIDE[decimals].astype(np.longdouble)
    score = quotient.astype(np.float64)
    off = quotient - score  # exact: the two are within one double ulp
    beyond = np.nextafter(score, np.where(off > 0, np.inf, -np.inf))
    return score, (off == 0) | (off != beyond.astype(np.longdouble) - quotient)


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
