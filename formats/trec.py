"""The TREC formats: runs and qrels, as records and as numpy columns.

* TREC runs: ``qid Q0 docid rank score tag``
* TREC qrels: ``qid 0 docid grade`` and BEIR qrels TSV ``query-id<TAB>corpus-id<TAB>score``

The rule for a line lives in one place, the line parsers here (:func:`iter_run`,
:func:`iter_qrels`): they define what a valid line is and word every problem as a
:class:`FormatError` naming file and line. Large files are read as columns
(:func:`read_run_table`, :func:`iter_run_pieces`, :func:`read_qrels_table`) by
:mod:`formats.blocks`, which splits whole blocks of the usual layout with numpy and hands
any block it cannot vouch for, and any file with a problem, to the line parsers: the same
rows, the same messages. Each reader also accepts the gzip-compressed file.

Pure core: no Django, plain records in, frozen dataclasses or numpy columns out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from formats.blocks import NotSplit, qrels_blocks, run_blocks
from formats.text import (
    INT_RE,
    WHITESPACE_RE,
    FormatError,
    check_id_length,
    check_no_nul,
    lines,
    open_text,
    parse_int,
)

__all__ = [
    "FormatError",
    "NotSplit",
    "QrelRow",
    "QrelsTable",
    "RunRow",
    "RunTable",
    "concat_tables",
    "format_qrels_line",
    "format_run_line",
    "has_duplicates",
    "iter_qrels",
    "iter_qrels_numbered",
    "iter_run",
    "iter_run_pieces",
    "key_strings",
    "lexsort_keys",
    "open_text",
    "pack_keys",
    "rank_run",
    "read_qrels",
    "read_qrels_table",
    "read_run",
    "read_run_table",
    "single",
    "trec_order",
    "widen",
    "write_run",
]

_RUN_COLUMNS = "qid Q0 docid rank score tag"
_TREC_QRELS_COLUMNS = "qid iteration docid grade"
_BEIR_QRELS_COLUMNS = "query-id corpus-id score"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class RunRow:
    """One line of a TREC run. ``rank`` is the file's claim; ordering uses score and docid."""

    qid: str
    docid: str
    rank: int
    score: float
    tag: str


@dataclass(frozen=True, slots=True)
class QrelRow:
    """One relevance judgment. Grades may be negative (some TREC qrels use -1 or -2)."""

    qid: str
    docid: str
    grade: int


# --------------------------------------------------------------------------- runs


def _parse_score(path: str | Path, line: int, token: str) -> float:
    try:
        score = float(token)
    except ValueError:
        raise FormatError(path, line, f"score {token!r} is not a number") from None
    # nan breaks every sort, and inf makes ties impossible to reason about.
    if not math.isfinite(score):
        raise FormatError(path, line, f"score {token!r} is not a finite number")
    return score


def iter_run(path: str | Path, *, max_id_length: int | None = None) -> Iterator[RunRow]:
    """Stream the rows of a TREC run (``qid Q0 docid rank score tag``) in file order.

    Columns are separated by any run of blanks; blank lines are skipped. The second column
    is not checked (runs use ``Q0`` or ``0``). A document listed twice for one query is an
    error because trec_eval would silently count it twice, and so is a NUL character anywhere
    on the line (see :func:`_split_line`). ``max_id_length`` is for runs that go into a
    database: a query or document id longer than it is an error.
    """
    # qid -> docid -> first line; runs are usually but not always grouped by qid.
    seen: dict[str, dict[str, int]] = {}
    for number, line in lines(path):
        row = _parse_run_line(path, number, line)
        if max_id_length is not None:
            check_id_length(path, number, "query", row.qid, max_id_length)
            check_id_length(path, number, "document", row.docid, max_id_length)
        first = seen.setdefault(row.qid, {}).setdefault(row.docid, number)
        if first != number:
            reason = (
                f"document {row.docid} appears twice for query {row.qid} (first at line {first})"
            )
            raise FormatError(path, number, reason)
        yield row


def _split_line(path: str | Path, number: int, line: str) -> list[str]:
    """The columns of a run or qrels line. A NUL is refused by every reader, not only those
    that store ids: PostgreSQL cannot store it, and trec_eval (C) would cut the id there, so
    a file scored here would score differently there."""
    check_no_nul(path, number, line)
    return line.split()


def _parse_run_line(path: str | Path, number: int, line: str) -> RunRow:
    cols = _split_line(path, number, line)
    if len(cols) != 6:
        reason = f"expected 6 columns ({_RUN_COLUMNS}), found {len(cols)}"
        raise FormatError(path, number, reason)
    qid, _, docid, rank, score, tag = cols
    return RunRow(
        qid=qid,
        docid=docid,
        rank=parse_int(path, number, "rank", rank),
        score=_parse_score(path, number, score),
        tag=tag,
    )


def rank_run(rows: Iterable[RunRow]) -> list[RunRow]:
    """Sort one query's rows in trec_eval order: score descending, then docid descending
    (see :func:`trec_order`, which this applies to the rows)."""
    rows = list(rows)
    keys, lengths = pack_keys([row.docid for row in rows])
    scores = np.array([row.score for row in rows], dtype=np.float64)
    order = trec_order(np.zeros(len(rows), dtype=np.int32), scores, keys, lengths)
    return [rows[i] for i in order.tolist()]


def read_run(path: str | Path, *, max_id_length: int | None = None) -> dict[str, list[RunRow]]:
    """Read a whole run as ``{qid: rows}``, each list in trec_eval order (see :func:`rank_run`).

    Whatever the rank column says, position ``i`` of a list is the document trec_eval
    places at rank ``i + 1``. Queries keep the order of their first appearance in the file.
    """
    by_qid: dict[str, list[RunRow]] = {}
    for row in iter_run(path, max_id_length=max_id_length):
        by_qid.setdefault(row.qid, []).append(row)
    return {qid: rank_run(rows) for qid, rows in by_qid.items()}


def format_run_line(row: RunRow) -> str:
    """``qid Q0 docid rank score tag`` without a newline; ``repr`` keeps the score exact."""
    return f"{row.qid} Q0 {row.docid} {row.rank} {row.score!r} {row.tag}"


def write_run(rows: Iterable[RunRow], out: TextIO) -> None:
    """Write rows as TREC run lines, in the order given (the caller chooses the ranks)."""
    for row in rows:
        for kind, value in (("query", row.qid), ("document", row.docid), ("run", row.tag)):
            _require_token(kind, value)
        out.write(format_run_line(row) + "\n")


def _require_token(kind: str, value: str) -> None:
    # Written files are re-read by splitting on whitespace; refuse what would not survive.
    if not value or WHITESPACE_RE.search(value):
        raise ValueError(f"{kind} id {value!r} is empty or contains whitespace")


# --------------------------------------------------------------------------- qrels


def iter_qrels(path: str | Path) -> Iterator[QrelRow]:
    """Stream judgments from TREC qrels or BEIR qrels TSV.

    The first non-blank line decides the format: 4 columns is TREC
    (``qid iteration docid grade``, the iteration column is ignored); 3 columns is BEIR
    (``query-id corpus-id score``), and when its third column is not an integer that line is
    the BEIR header and is skipped. Every later line must have the same number of columns.
    Grades are integers and may be negative. A (qid, docid) pair judged twice is an error.
    """
    for _, row in iter_qrels_numbered(path):
        yield row


def iter_qrels_numbered(path: str | Path) -> Iterator[tuple[int, QrelRow]]:
    """:func:`iter_qrels` with each row's line number, for checks made after reading (a grade
    out of a scale, a pair a project lacks) that must name the line too."""
    numbered = lines(path)
    first = next(numbered, None)
    if first is None:
        return
    n_cols = _qrels_columns(path, *first)
    is_beir_header = n_cols == 3 and not INT_RE.fullmatch(first[1].split()[2])
    if not is_beir_header:
        numbered = chain([first], numbered)
    seen: dict[tuple[str, str], int] = {}
    for number, line in numbered:
        row = _parse_qrels_line(path, number, line, n_cols)
        first_line = seen.setdefault((row.qid, row.docid), number)
        if first_line != number:
            reason = (
                f"document {row.docid} is judged twice for query {row.qid} "
                f"(first at line {first_line})"
            )
            raise FormatError(path, number, reason)
        yield number, row


def _qrels_columns(path: str | Path, number: int, line: str) -> int:
    n_cols = len(_split_line(path, number, line))
    if n_cols not in (3, 4):
        reason = (
            f"expected 4 columns ({_TREC_QRELS_COLUMNS}) or 3 ({_BEIR_QRELS_COLUMNS}), "
            f"found {n_cols}"
        )
        raise FormatError(path, number, reason)
    return n_cols


def _parse_qrels_line(path: str | Path, number: int, line: str, n_cols: int) -> QrelRow:
    cols = _split_line(path, number, line)
    if len(cols) != n_cols:
        names = _TREC_QRELS_COLUMNS if n_cols == 4 else _BEIR_QRELS_COLUMNS
        reason = f"expected {n_cols} columns ({names}), found {len(cols)}"
        raise FormatError(path, number, reason)
    qid, docid, grade = (cols[0], cols[2], cols[3]) if n_cols == 4 else cols
    return QrelRow(qid=qid, docid=docid, grade=parse_int(path, number, "grade", grade))


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read qrels as ``{qid: {docid: grade}}`` (qids in order of first appearance)."""
    qrels: dict[str, dict[str, int]] = {}
    for row in iter_qrels(path):
        qrels.setdefault(row.qid, {})[row.docid] = row.grade
    return qrels


def format_qrels_line(qid: str, docid: str, grade: int) -> str:
    """``qid 0 docid grade`` without a newline: the line trec_eval reads."""
    _require_token("query", qid)
    _require_token("document", docid)
    return f"{qid} 0 {docid} {int(grade)}"


# --------------------------------------------------------------------------- columns

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class RunTable:
    """A run as columns, rows in file order (or grouped by query when built from rows).

    ``qid_codes[i]`` indexes ``qids`` (distinct qids, in order of first appearance);
    ``doc_keys[i]`` is the key of the row's docid (see :mod:`formats.blocks`) and
    ``doc_lengths[i]`` its length in bytes, which tells apart ids that differ only by
    trailing NUL characters (their keys are equal).
    """

    qids: tuple[str, ...]
    qid_codes: I32
    doc_keys: U64
    doc_lengths: I64
    scores: F64

    @classmethod
    def from_mapping(cls, run: Mapping[str, Sequence[RunRow]]) -> RunTable:
        """Columns of ``{qid: rows}``; rows keep the mapping's order."""
        qids = tuple(run)
        counts = [len(rows) for rows in run.values()]
        rows = [row for rows in run.values() for row in rows]
        scores = np.array([row.score for row in rows], dtype=np.float64)
        if not np.isfinite(scores).all():
            raise ValueError("run scores must be finite numbers")
        codes = np.repeat(np.arange(len(qids), dtype=np.int32), counts)
        keys, lengths = pack_keys([row.docid for row in rows])
        return cls(qids, codes, keys, lengths, scores)

    @classmethod
    def empty(cls) -> RunTable:
        empty_keys = np.zeros((0, 1), np.uint64)
        return cls((), np.zeros(0, np.int32), empty_keys, _no_ints(), np.zeros(0))

    def __len__(self) -> int:
        return len(self.qid_codes)

    def take(self, rows: npt.NDArray[np.integer] | slice) -> RunTable:
        """The table of the rows ``rows`` (indexes or a slice), same qids."""
        return RunTable(
            self.qids,
            self.qid_codes[rows],
            self.doc_keys[rows],
            self.doc_lengths[rows],
            self.scores[rows],
        )


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
        return cls(qids, codes, pack_keys(docids)[0], grades)


def _no_ints() -> I64:
    return np.zeros(0, dtype=np.int64)


def pack_keys(ids: Sequence[str]) -> tuple[U64, I64]:
    """Keys of ``ids`` (``(len(ids), W)`` uint64, each row the zero-padded UTF-8 bytes)
    and the ids' lengths in bytes."""
    encoded = [i.encode("utf-8") for i in ids]
    raw = np.array(encoded, dtype=np.bytes_)
    width = max(1, math.ceil(raw.dtype.itemsize / 8))
    padded = np.zeros((len(ids), 8 * width), dtype=np.uint8)
    if len(ids) and raw.dtype.itemsize:
        padded[:, : raw.dtype.itemsize] = raw.view(np.uint8).reshape(len(ids), -1)
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    return padded.view(">u8").astype(np.uint64), lengths


def key_strings(keys: U64, lengths: I64) -> list[str]:
    """The ids whose keys and byte lengths these are (the inverse of :func:`pack_keys`)."""
    raw = keys.astype(">u8").view(np.uint8).reshape(len(keys), 8 * keys.shape[1])
    fixed = raw.view(f"S{raw.shape[1]}").reshape(len(keys))
    texts: list[str] = fixed.astype(np.dtypes.StringDType()).tolist()  # decodes UTF-8
    # A fixed-width bytes array drops trailing NUL bytes, which an id may (rarely) end with.
    for i in np.flatnonzero(np.strings.str_len(fixed) != lengths).tolist():
        texts[i] = raw[i, : lengths[i]].tobytes().decode("utf-8")
    return texts


def widen(keys: U64, width: int) -> U64:
    """``keys`` with zero words appended up to ``width`` words (the same ids, compared wider)."""
    if keys.shape[1] >= width:
        return keys
    return np.pad(keys, ((0, 0), (0, width - keys.shape[1])))


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


def single(scores: npt.NDArray[np.floating[Any]]) -> F32:
    """Scores as trec_eval compares them: it holds them in a C ``float``, so two scores
    that differ only beyond single precision tie (a score beyond its range is infinite)."""
    with np.errstate(over="ignore"):
        return scores.astype(np.float32)


def trec_order(
    codes: I32 | I64, scores: npt.NDArray[np.floating[Any]], keys: U64, lengths: I64 | None = None
) -> I64:
    """An order that groups rows by query code (ascending) and sorts each query as
    trec_eval does: score in single precision descending, then docid descending.

    trec_eval ignores the rank column and breaks ties by comparing docids as strings
    (``strcmp``), the greater first; keys compare as the UTF-8 bytes, which order like
    ``strcmp`` and like Python's code points. ``lengths`` (bytes) separate ids that differ
    only by trailing NUL characters, the longer being the greater. Ordering this way is what
    lets measures computed on these lists reproduce trec_eval to the last digit.
    """
    sort_by: list[npt.NDArray[np.generic]] = [] if lengths is None else [-lengths]
    sort_by += [*lexsort_keys(keys, descending=True), -single(scores), codes]
    return np.lexsort(sort_by)


def read_run_table(path: str | Path) -> RunTable:
    """Read a whole TREC run as one :class:`RunTable`, rows in file order (raises
    :class:`FormatError` with file and line, exactly as :func:`read_run`)."""
    try:
        table = concat_tables(list(iter_run_pieces(path)))
        if has_duplicates(table.qid_codes, table.doc_keys):
            raise NotSplit  # the line parser names the line
        return table
    except NotSplit:
        return RunTable.from_mapping(read_run(path))


def iter_run_pieces(path: str | Path) -> Iterator[RunTable]:
    """Yield a run in pieces of consecutive lines, each a :class:`RunTable` whose ``qids``
    are every qid seen so far (codes mean the same in all pieces), in bounded memory.

    Raises :class:`NotSplit`, possibly after some pieces, when the file is not in the layout
    read in bulk or has a problem: the caller then reads it with :func:`read_run` (or
    :func:`read_run_table`), which reports the first problem with its line. Duplicate
    documents are not looked for (a query can span pieces): :func:`has_duplicates` does that
    on whole queries.
    """
    for block in run_blocks(path):
        yield RunTable(block.qids, block.codes, block.keys, block.lengths, block.scores)


def concat_tables(pieces: Sequence[RunTable]) -> RunTable:
    """One table of consecutive pieces (the last piece's qids cover all the codes)."""
    if not pieces:
        return RunTable.empty()
    width = max(p.doc_keys.shape[1] for p in pieces)
    return RunTable(
        pieces[-1].qids,
        np.concatenate([p.qid_codes for p in pieces]),
        np.concatenate([widen(p.doc_keys, width) for p in pieces]),
        np.concatenate([p.doc_lengths for p in pieces]),
        np.concatenate([p.scores for p in pieces]),
    )


def read_qrels_table(path: str | Path) -> QrelsTable:
    """Read qrels as a :class:`QrelsTable` (raises :class:`FormatError`, like read_qrels).

    TREC qrels (4 columns) are read in bulk; BEIR TSV qrels (3 columns and a header) and
    any file with a problem go through :func:`read_qrels`, which reads both.
    """
    try:
        blocks = list(qrels_blocks(path))
    except NotSplit:
        return QrelsTable.from_mapping(read_qrels(path))
    if not blocks:
        return QrelsTable((), np.zeros(0, np.int32), np.zeros((0, 1), np.uint64), _no_ints())
    width = max(b.keys.shape[1] for b in blocks)
    table = QrelsTable(
        blocks[-1].qids,
        np.concatenate([b.codes for b in blocks]),
        np.concatenate([widen(b.keys, width) for b in blocks]),
        np.concatenate([b.grades for b in blocks]),
    )
    if has_duplicates(table.qid_codes, table.doc_keys):
        return QrelsTable.from_mapping(read_qrels(path))  # which names the line
    return table
