"""Reading and writing the file formats of a retrieval evaluation, one line at a time.

Formats handled (each reader also accepts the gzip-compressed file, detected by its magic
bytes rather than its extension, because downloaded files are often renamed):

* TREC runs: ``qid Q0 docid rank score tag``
* TREC qrels: ``qid 0 docid grade`` and BEIR qrels TSV ``query-id<TAB>corpus-id<TAB>score``
* corpora: BEIR ``corpus.jsonl`` or TSV ``docid<TAB>[title<TAB>]text``
* queries: BEIR ``queries.jsonl`` or TSV ``qid<TAB>text``

Readers stream: they hold one line at a time plus the ids seen so far (to reject
duplicates). Every problem in a file is reported as a :class:`FormatError` naming the file
and the 1-based line, so that a person can open the file at the right place.

This module is a pure core: no Django, plain records in, frozen dataclasses out.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import re
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO, Any, TextIO, cast

__all__ = [
    "CorpusDoc",
    "FormatError",
    "QrelRow",
    "QueryRow",
    "RunRow",
    "format_qrels_line",
    "format_run_line",
    "iter_corpus",
    "iter_qrels",
    "iter_queries",
    "iter_run",
    "open_text",
    "rank_run",
    "read_qrels",
    "read_run",
    "write_run",
]

_GZIP_MAGIC = b"\x1f\x8b"
# Python's int() also accepts "1_000" and surrounding blanks; the formats do not.
_INT_RE = re.compile(r"[+-]?[0-9]+")
_WHITESPACE_RE = re.compile(r"\s")

_RUN_COLUMNS = "qid Q0 docid rank score tag"
_TREC_QRELS_COLUMNS = "qid iteration docid grade"
_BEIR_QRELS_COLUMNS = "query-id corpus-id score"

_DOC_ID_KEYS = ("_id", "docid", "id", "doc_id")
_DOC_TEXT_KEYS = ("text", "contents", "doc", "body")
_QUERY_ID_KEYS = ("_id", "qid", "query_id")
_QUERY_TEXT_KEYS = ("text", "query")
_QUERY_NOTE_KEYS = ("description", "narrative", "notes")


class FormatError(ValueError):
    """A file does not follow its format.

    ``line`` is 1-based, or 0 when the problem is not about one line (for example an
    empty file). ``str(error)`` is ``"path:line: reason"`` (``"path: reason"`` when line is 0),
    the form editors and CI logs turn into links.
    """

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.line:
            return f"{self.path}:{self.line}: {self.reason}"
        return f"{self.path}: {self.reason}"

    def __reduce__(self) -> tuple[type[FormatError], tuple[str, int, str]]:
        # The default pickling replays ``args`` (the message) into __init__, which takes
        # three arguments; errors must survive being sent back from worker processes.
        return (type(self), (self.path, self.line, self.reason))


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


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    docid: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class QueryRow:
    qid: str
    text: str
    description: str = ""


# --------------------------------------------------------------------------- opening


class _Utf8Lines(io.TextIOBase):
    """Decodes a binary stream one physical line at a time.

    A stock TextIOWrapper decodes in chunks, so a UnicodeDecodeError cannot say which line
    is broken; decoding per line can, at no cost in memory. Lines are split on ``\\n`` only
    and keep their terminator, like a file opened with ``newline=""``.
    """

    def __init__(self, raw: IO[bytes] | gzip.GzipFile, path: str) -> None:
        super().__init__()
        self._raw = raw
        self._path = path
        self._line = 0
        self._pending = ""

    def readable(self) -> bool:
        return True

    # typeshed's own TextIOBase.readline needs the same ignore: its base says bytes.
    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        if size < 0 and not self._pending:
            return self._decode_next()  # the path iteration takes, line after line
        while "\n" not in self._pending and (size < 0 or len(self._pending) < size):
            decoded = self._decode_next()
            if not decoded:
                break
            self._pending += decoded
        end = self._pending.find("\n") + 1 or len(self._pending)
        if size >= 0:
            end = min(end, size)
        text, self._pending = self._pending[:end], self._pending[end:]
        return text

    def read(self, size: int | None = -1, /) -> str:
        if size is None or size < 0:
            return "".join(iter(self.readline, ""))
        parts: list[str] = []
        wanted = size
        while wanted > 0 and (piece := self.readline(wanted)):
            parts.append(piece)
            wanted -= len(piece)
        return "".join(parts)

    def close(self) -> None:
        self._raw.close()
        super().close()

    def _decode_next(self) -> str:
        try:
            data = self._raw.readline()
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FormatError(self._path, self._line + 1, f"corrupt gzip data ({exc})") from exc
        if not data:
            return ""
        self._line += 1
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"invalid UTF-8 (byte {exc.start + 1} of the line)"
            raise FormatError(self._path, self._line, reason) from exc


def open_text(path: str | Path) -> TextIO:
    """Open ``path`` as UTF-8 text, gunzipping it when it starts with the gzip magic bytes.

    Invalid UTF-8 raises :class:`FormatError` with the number of the offending line when
    that line is read. The caller closes the returned stream (it is a context manager).
    """
    with open(path, "rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    # The returned reader owns and closes the binary stream, hence no ``with`` here.
    raw = gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115
    return cast(TextIO, _Utf8Lines(raw, str(path)))


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for non-blank lines, without the line terminator."""
    with open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            if number == 1:
                # Spreadsheet tools prepend a byte-order mark; it would otherwise end up
                # glued to the first id.
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line


# --------------------------------------------------------------------------- field parsing


def _parse_int(path: str | Path, line: int, field: str, token: str) -> int:
    if not _INT_RE.fullmatch(token):
        raise FormatError(path, line, f"{field} {token!r} is not an integer")
    return int(token)


def _parse_score(path: str | Path, line: int, token: str) -> float:
    try:
        score = float(token)
    except ValueError:
        raise FormatError(path, line, f"score {token!r} is not a number") from None
    # nan breaks every sort, and inf makes ties impossible to reason about.
    if not math.isfinite(score):
        raise FormatError(path, line, f"score {token!r} is not a finite number")
    return score


def _check_writable_id(
    path: str | Path, line: int, kind: str, value: str, max_length: int | None = None
) -> None:
    """Reject ids that TREC run and qrels files (whitespace-separated) cannot carry."""
    if not value:
        raise FormatError(path, line, f"empty {kind} id")
    if _WHITESPACE_RE.search(value):
        reason = f"{kind} id {value!r} contains whitespace; TREC run and qrels files cannot hold it"
        raise FormatError(path, line, reason)
    _check_id_length(path, line, kind, value, max_length)


def _check_id_length(
    path: str | Path, line: int, kind: str, value: str, max_length: int | None
) -> None:
    # The caller's storage bounds ids (a database column); the formats themselves do not.
    if max_length is not None and len(value) > max_length:
        shown = f"{value[:40]!r}..."
        reason = f"{kind} id {shown} is {len(value)} characters long (at most {max_length})"
        raise FormatError(path, line, reason)


def _check_no_nul(path: str | Path, line: int, value: str, where: str = "the line") -> None:
    # PostgreSQL refuses a NUL in text, and C tools (trec_eval) would cut the id there.
    if "\x00" in value:
        reason = f"{where} holds a NUL character (U+0000), which a database cannot store"
        raise FormatError(path, line, reason)


def _check_unique(path: str | Path, line: int, seen: dict[str, int], kind: str, key: str) -> None:
    first = seen.setdefault(key, line)
    if first != line:
        raise FormatError(path, line, f"{kind} {key} appears twice (first at line {first})")


# --------------------------------------------------------------------------- runs


def iter_run(path: str | Path, *, max_id_length: int | None = None) -> Iterator[RunRow]:
    """Stream the rows of a TREC run (``qid Q0 docid rank score tag``) in file order.

    Columns are separated by any run of blanks; blank lines are skipped. The second column
    is not checked (runs use ``Q0`` or ``0``). A document listed twice for one query is an
    error because trec_eval would silently count it twice. ``max_id_length`` is for runs that
    go into a database: a query or document id longer than it is an error, and so is a NUL
    character anywhere on the line (PostgreSQL refuses it in text).
    """
    # qid -> docid -> first line; runs are usually but not always grouped by qid.
    seen: dict[str, dict[str, int]] = {}
    for number, line in _lines(path):
        row = _parse_run_line(path, number, line)
        if max_id_length is not None:
            _check_no_nul(path, number, line)
            _check_id_length(path, number, "query", row.qid, max_id_length)
            _check_id_length(path, number, "document", row.docid, max_id_length)
        first = seen.setdefault(row.qid, {}).setdefault(row.docid, number)
        if first != number:
            reason = (
                f"document {row.docid} appears twice for query {row.qid} (first at line {first})"
            )
            raise FormatError(path, number, reason)
        yield row


def _parse_run_line(path: str | Path, number: int, line: str) -> RunRow:
    cols = line.split()
    if len(cols) != 6:
        reason = f"expected 6 columns ({_RUN_COLUMNS}), found {len(cols)}"
        raise FormatError(path, number, reason)
    qid, _, docid, rank, score, tag = cols
    return RunRow(
        qid=qid,
        docid=docid,
        rank=_parse_int(path, number, "rank", rank),
        score=_parse_score(path, number, score),
        tag=tag,
    )


def rank_run(rows: Iterable[RunRow]) -> list[RunRow]:
    """Sort one query's rows in trec_eval order: score descending, then docid descending.

    trec_eval ignores the rank column, holds scores as single-precision floats (so two scores
    that differ only beyond float32 precision tie), and breaks ties by comparing docids as
    strings (``strcmp``), the greater docid first. Python compares str by code point, which
    orders UTF-8 text exactly like ``strcmp`` orders its bytes. Sorting the same way is what
    lets measures computed from these lists reproduce trec_eval to the last digit.
    """
    rows = list(rows)
    # array('f') rounds each score to float32, exactly as trec_eval's C float does.
    scores32 = array("f", (row.score for row in rows)).tolist()
    order = sorted(range(len(rows)), key=lambda i: (scores32[i], rows[i].docid), reverse=True)
    return [rows[i] for i in order]


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
    if not value or _WHITESPACE_RE.search(value):
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
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        return
    n_cols = _qrels_columns(path, *first)
    is_beir_header = n_cols == 3 and not _INT_RE.fullmatch(first[1].split()[2])
    if not is_beir_header:
        lines = chain([first], lines)
    seen: dict[tuple[str, str], int] = {}
    for number, line in lines:
        row = _parse_qrels_line(path, number, line, n_cols)
        first_line = seen.setdefault((row.qid, row.docid), number)
        if first_line != number:
            reason = (
                f"document {row.docid} is judged twice for query {row.qid} "
                f"(first at line {first_line})"
            )
            raise FormatError(path, number, reason)
        yield row


def _qrels_columns(path: str | Path, number: int, line: str) -> int:
    n_cols = len(line.split())
    if n_cols not in (3, 4):
        reason = (
            f"expected 4 columns ({_TREC_QRELS_COLUMNS}) or 3 ({_BEIR_QRELS_COLUMNS}), "
            f"found {n_cols}"
        )
        raise FormatError(path, number, reason)
    return n_cols


def _parse_qrels_line(path: str | Path, number: int, line: str, n_cols: int) -> QrelRow:
    cols = line.split()
    if len(cols) != n_cols:
        names = _TREC_QRELS_COLUMNS if n_cols == 4 else _BEIR_QRELS_COLUMNS
        reason = f"expected {n_cols} columns ({names}), found {len(cols)}"
        raise FormatError(path, number, reason)
    qid, docid, grade = (cols[0], cols[2], cols[3]) if n_cols == 4 else cols
    return QrelRow(qid=qid, docid=docid, grade=_parse_int(path, number, "grade", grade))


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


# --------------------------------------------------------------------------- JSONL / TSV

# A parser turns one non-blank line into (id, title, text).
_LineParser = Callable[[str | Path, int, str], tuple[str, str, str]]


def _iter_records(
    path: str | Path,
    kind: str,
    json_parser: _LineParser,
    tsv_parser: _LineParser,
    max_id_length: int | None = None,
    fields: tuple[str, str, str] = ("the id", "the title", "the text"),
) -> Iterator[tuple[str, str, str]]:
    """Shared loop of the corpus and query readers: detect the format, check ids."""
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        return
    parse = json_parser if first[1].lstrip().startswith("{") else tsv_parser
    seen: dict[str, int] = {}
    for number, line in chain([first], lines):
        record = parse(path, number, line)
        _check_writable_id(path, number, kind, record[0], max_id_length)
        for where, value in zip(fields, record, strict=True):
            _check_no_nul(path, number, value, where)
        _check_unique(path, number, seen, kind, record[0])
        yield record


def _json_object(path: str | Path, number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FormatError(path, number, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise FormatError(path, number, f"expected a JSON object, found {type(value).__name__}")
    return value


def _json_id(path: str | Path, number: int, obj: dict[str, Any], keys: tuple[str, ...]) -> str:
    key = next((k for k in keys if k in obj), None)
    if key is None:
        raise FormatError(path, number, f"missing id (one of {', '.join(keys)})")
    value = obj[key]
    # BEIR writes some ids as JSON numbers; bool is an int subclass but never an id.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FormatError(path, number, f"id {key!r} must be a string or an integer")
    return str(value)


def _json_str(
    path: str | Path, number: int, obj: dict[str, Any], keys: tuple[str, ...], required: bool
) -> str:
    key = next((k for k in keys if k in obj), None)
    if key is None:
        if required:
            raise FormatError(path, number, f"missing text (one of {', '.join(keys)})")
        return ""
    value = obj[key]
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise FormatError(path, number, f"{key!r} must be a string")
    return value


def _tsv_fields(path: str | Path, number: int, line: str, allowed: tuple[int, ...]) -> list[str]:
    fields = line.split("\t")
    if len(fields) not in allowed:
        expected = " or ".join(str(n) for n in allowed)
        reason = f"expected {expected} tab-separated columns, found {len(fields)}"
        raise FormatError(path, number, reason)
    return fields


# --------------------------------------------------------------------------- corpus


def _corpus_json(path: str | Path, number: int, line: str) -> tuple[str, str, str]:
    obj = _json_object(path, number, line)
    docid = _json_id(path, number, obj, _DOC_ID_KEYS)
    title = _json_str(path, number, obj, ("title",), required=False)
    return docid, title, _json_str(path, number, obj, _DOC_TEXT_KEYS, required=True)


def _corpus_tsv_parser() -> _LineParser:
    """A TSV parser that holds every line to the column count of the first one.

    Mixing 2 and 3 columns is how a tab inside a passage shows up; without this check such
    a line would silently turn its first sentence into a title.
    """
    width: list[int] = []

    def parse(path: str | Path, number: int, line: str) -> tuple[str, str, str]:
        fields = _tsv_fields(path, number, line, tuple(width) or (2, 3))
        width[:] = [len(fields)]
        if len(fields) == 2:
            return fields[0], "", fields[1]
        return fields[0], fields[1], fields[2]

    return parse


def iter_corpus(path: str | Path, *, max_id_length: int | None = None) -> Iterator[CorpusDoc]:
    """Stream documents from BEIR ``corpus.jsonl`` or a TSV ``docid<TAB>[title<TAB>]text``.

    JSONL when the first non-blank line starts with ``{``. JSON id keys: ``_id``, ``docid``,
    ``id``, ``doc_id`` (numbers become strings); text keys: ``text``, ``contents``, ``doc``,
    ``body``; ``title`` is optional. In TSV every line has the column count of the first.
    Ids must be non-empty, unique, and free of whitespace (TREC files could not hold them), and
    no longer than ``max_id_length`` when it is given; no field may hold a NUL character.
    """
    parse_tsv = _corpus_tsv_parser()
    records = _iter_records(path, "document", _corpus_json, parse_tsv, max_id_length)
    for docid, title, text in records:
        yield CorpusDoc(docid=docid, title=title, text=text)


# --------------------------------------------------------------------------- queries


def _query_json(path: str | Path, number: int, line: str) -> tuple[str, str, str]:
    obj = _json_object(path, number, line)
    qid = _json_id(path, number, obj, _QUERY_ID_KEYS)
    text = _json_str(path, number, obj, _QUERY_TEXT_KEYS, required=True)
    # TREC topics carry a description and a narrative: what the judge needs to read.
    notes = [_json_str(path, number, obj, (key,), required=False) for key in _QUERY_NOTE_KEYS]
    return qid, "\n\n".join(note.strip() for note in notes if note.strip()), text


def _query_tsv(path: str | Path, number: int, line: str) -> tuple[str, str, str]:
    qid, text = _tsv_fields(path, number, line, (2,))
    return qid, "", text


def iter_queries(path: str | Path, *, max_id_length: int | None = None) -> Iterator[QueryRow]:
    """Stream queries from BEIR ``queries.jsonl`` or TSV ``qid<TAB>text`` (the TREC DL topics).

    JSON id keys: ``_id``, ``qid``, ``query_id``; text keys: ``text``, ``query``; optional
    ``description``, ``narrative`` and ``notes`` become the query's description (joined by a
    blank line), shown to judges beside the query. TSV lines have exactly 2 columns. Qids must
    be non-empty, unique, free of whitespace and no longer than ``max_id_length`` when it is
    given; no field may hold a NUL character.
    """
    fields = ("the id", "the description", "the text")
    records = _iter_records(path, "query", _query_json, _query_tsv, max_id_length, fields)
    for qid, description, text in records:
        yield QueryRow(qid=qid, text=text, description=description)
