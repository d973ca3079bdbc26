"""The BEIR file formats (and their TSV cousins): corpora and queries, one line at a time.

* corpora: BEIR ``corpus.jsonl`` or TSV ``docid<TAB>[title<TAB>]text``
* queries: BEIR ``queries.jsonl`` or TSV ``qid<TAB>text`` (the TREC DL topics), or TREC topics
  XML (:mod:`formats.topics`); the writers here write each of the three so that it reads back
  unchanged

BEIR's third file, the qrels TSV ``query-id<TAB>corpus-id<TAB>score``, is read by
:func:`formats.trec.read_qrels`, which tells it from TREC qrels by its column count: one
qrels reader for both.

Readers stream: they hold one line at a time plus the ids seen so far (to reject
duplicates); every problem is a :class:`formats.text.FormatError` naming file and line.
Pure core: no Django, plain records in, frozen dataclasses out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from formats.text import (
    WHITESPACE_RE,
    FormatError,
    OnProgress,
    check_no_nul,
    check_unique,
    check_writable_id,
    lines,
)
from formats.topics import iter_topics_xml, join_notes, looks_like_xml, write_topics_xml

__all__ = [
    "QUERY_FORMATS",
    "CorpusDoc",
    "FormatError",
    "QueryRow",
    "iter_corpus",
    "iter_queries",
    "write_queries",
    "write_queries_jsonl",
    "write_queries_tsv",
]

_DOC_ID_KEYS = ("_id", "docid", "id", "doc_id")
_DOC_TEXT_KEYS = ("text", "contents", "doc", "body")
_QUERY_ID_KEYS = ("_id", "qid", "query_id")
_QUERY_TEXT_KEYS = ("text", "query")
_QUERY_NOTE_KEYS = ("description", "narrative", "notes")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    docid: str
    title: str
    text: str
    # BEIR's optional "metadata" object (dates, urls, sources), as JSON text: what the
    # corpus import stores, and "{}" without one.
    metadata: str = "{}"


@dataclass(frozen=True, slots=True)
class QueryRow:
    qid: str
    text: str
    description: str = ""
    stratum: str = ""  # the sampling stratum (JSONL only), "" when the query was not sampled


# --------------------------------------------------------------------------- JSONL / TSV

# A parser turns one non-blank line into (id, title, text), or for queries (id, description,
# text, stratum).
_LineParser = Callable[[str | Path, int, str], tuple[str, ...]]


def _iter_records(
    path: str | Path,
    kind: str,
    json_parser: _LineParser,
    tsv_parser: _LineParser,
    max_id_length: int | None = None,
    fields: tuple[str, ...] = ("the id", "the title", "the text"),
    on_progress: OnProgress | None = None,
) -> Iterator[tuple[str, ...]]:
    """Shared loop of the corpus and query readers: detect the format, check ids."""
    numbered = lines(path, on_progress=on_progress)
    first = next(numbered, None)
    if first is None:
        return
    parse = json_parser if first[1].lstrip().startswith("{") else tsv_parser
    seen: dict[str, int] = {}
    for number, line in chain([first], numbered):
        record = parse(path, number, line)
        check_writable_id(path, number, kind, record[0], max_id_length)
        for where, value in zip(fields, record, strict=True):
            check_no_nul(path, number, value, where)
        check_unique(path, number, seen, kind, record[0])
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


def _corpus_json(path: str | Path, number: int, line: str) -> tuple[str, str, str, str]:
    obj = _json_object(path, number, line)
    docid = _json_id(path, number, obj, _DOC_ID_KEYS)
    title = _json_str(path, number, obj, ("title",), required=False)
    text = _json_str(path, number, obj, _DOC_TEXT_KEYS, required=True)
    return docid, title, text, _json_metadata(path, number, obj)


def _json_metadata(path: str | Path, number: int, obj: dict[str, Any]) -> str:
    """The document's ``metadata`` object as compact JSON text ("{}" when absent or null)."""
    value = obj.get("metadata")
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise FormatError(path, number, "'metadata' must be a JSON object")
    if _holds_nul(value):
        raise FormatError(path, number, "the metadata holds a NUL character (U+0000)")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _holds_nul(value: object) -> bool:
    # PostgreSQL's jsonb refuses \u0000 in a string, and json.dumps writes a NUL that way.
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


def _corpus_tsv_parser() -> _LineParser:
    """A TSV parser that holds every line to the column count of the first one.

    Mixing 2 and 3 columns is how a tab inside a passage shows up; without this check such
    a line would silently turn its first sentence into a title.
    """
    width: list[int] = []

    def parse(path: str | Path, number: int, line: str) -> tuple[str, str, str, str]:
        fields = _tsv_fields(path, number, line, tuple(width) or (2, 3))
        width[:] = [len(fields)]
        if len(fields) == 2:
            return fields[0], "", fields[1], "{}"
        return fields[0], fields[1], fields[2], "{}"

    return parse


def iter_corpus(
    path: str | Path, *, max_id_length: int | None = None, on_progress: OnProgress | None = None
) -> Iterator[CorpusDoc]:
    """Stream documents from BEIR ``corpus.jsonl`` or a TSV ``docid<TAB>[title<TAB>]text``.

    JSONL when the first non-blank line starts with ``{``. JSON id keys: ``_id``, ``docid``,
    ``id``, ``doc_id`` (numbers become strings); text keys: ``text``, ``contents``, ``doc``,
    ``body``; ``title`` is optional; an optional ``metadata`` object (BEIR's) is kept as JSON
    text in ``CorpusDoc.metadata``. In TSV every line has the column count of the first.
    Ids must be non-empty, unique, and free of whitespace (TREC files could not hold them), and
    no longer than ``max_id_length`` when it is given; no field may hold a NUL character.
    ``on_progress`` follows the reading (see :func:`formats.text.lines`).
    """
    parse_tsv = _corpus_tsv_parser()
    records = _iter_records(
        path,
        "document",
        _corpus_json,
        parse_tsv,
        max_id_length,
        fields=("the id", "the title", "the text", "the metadata"),
        on_progress=on_progress,
    )
    for docid, title, text, metadata in records:
        yield CorpusDoc(docid=docid, title=title, text=text, metadata=metadata)


# --------------------------------------------------------------------------- queries


def _query_json_parser(max_stratum_length: int | None) -> _LineParser:
    def parse(path: str | Path, number: int, line: str) -> tuple[str, str, str, str]:
        obj = _json_object(path, number, line)
        qid = _json_id(path, number, obj, _QUERY_ID_KEYS)
        text = _json_str(path, number, obj, _QUERY_TEXT_KEYS, required=True)
        # TREC topics carry a description and a narrative: what the judge needs to read.
        notes = [_json_str(path, number, obj, (key,), required=False) for key in _QUERY_NOTE_KEYS]
        stratum = _json_str(path, number, obj, ("stratum",), required=False)
        if max_stratum_length is not None and len(stratum) > max_stratum_length:
            reason = f"stratum {stratum[:40]!r} is longer than {max_stratum_length} characters"
            raise FormatError(path, number, reason)
        return qid, join_notes(notes), text, stratum

    return parse


def _query_tsv(path: str | Path, number: int, line: str) -> tuple[str, str, str, str]:
    qid, text = _tsv_fields(path, number, line, (2,))
    return qid, "", text, ""


def iter_queries(
    path: str | Path,
    *,
    max_id_length: int | None = None,
    max_stratum_length: int | None = None,
    on_progress: OnProgress | None = None,
) -> Iterator[QueryRow]:
    """Stream queries from BEIR ``queries.jsonl``, TSV ``qid<TAB>text`` (the TREC DL topics) or
    TREC topics XML (:mod:`formats.topics`; when the first non-blank line starts with ``<``).

    JSON id keys: ``_id``, ``qid``, ``query_id``; text keys: ``text``, ``query``; optional
    ``description``, ``narrative`` and ``notes`` become the query's description (trimmed, joined
    by a blank line), shown to judges beside the query; optional ``stratum`` is the sampling
    stratum, at most ``max_stratum_length`` characters when given. TSV lines have exactly 2
    columns. Qids must be non-empty, unique, free of whitespace and no longer than
    ``max_id_length`` when it is given; no field may hold a NUL character. ``on_progress``
    follows the reading of JSONL and TSV (see :func:`formats.text.lines`); XML topics files are
    small and report none.
    """
    first = next(lines(path), None)
    if first is not None and looks_like_xml(first[1]):
        yield from _xml_queries(path, max_id_length)
        return
    fields = ("the id", "the description", "the text", "the stratum")
    parse_json = _query_json_parser(max_stratum_length)
    records = _iter_records(
        path, "query", parse_json, _query_tsv, max_id_length, fields, on_progress
    )
    for qid, description, text, stratum in records:
        yield QueryRow(qid=qid, text=text, description=description, stratum=stratum)


def _xml_queries(path: str | Path, max_id_length: int | None) -> Iterator[QueryRow]:
    seen: dict[str, int] = {}
    for number, qid, description, text in iter_topics_xml(path):
        check_writable_id(path, number, "query", qid, max_id_length)
        check_unique(path, number, seen, "query", qid)
        yield QueryRow(qid=qid, text=text, description=description)


# --------------------------------------------------------------------------- writing queries

_LINE_BREAKS = re.compile("[\t\r\n]")


def write_queries_tsv(queries: Iterable[QueryRow]) -> Iterator[str]:
    """``qid<TAB>text`` lines. TSV carries neither description nor stratum, and each query on
    one line: tabs and line breaks in a text are written as spaces (JSONL keeps everything)."""
    for number, query in enumerate(queries, start=1):
        _check_written_qid(query.qid)
        if number == 1 and (query.qid.startswith("{") or looks_like_xml(query.qid)):
            # The readers tell JSONL and XML from TSV by the first character of the file.
            raise ValueError(
                f"query id {query.qid!r} starts with {query.qid[0]!r}: a TSV file starting so "
                "would be read as JSONL or XML; download JSONL instead"
            )
        yield f"{query.qid}\t{_LINE_BREAKS.sub(' ', query.text)}\n"


def write_queries_jsonl(queries: Iterable[QueryRow]) -> Iterator[str]:
    """``{"qid", "text", "description"?, "stratum"?}`` lines (empty fields left out), read back
    unchanged by :func:`iter_queries` (a description is read back trimmed)."""
    for query in queries:
        _check_written_qid(query.qid)
        record = {"qid": query.qid, "text": query.text}
        if query.description:
            record["description"] = query.description
        if query.stratum:
            record["stratum"] = query.stratum
        yield json.dumps(record, ensure_ascii=False) + "\n"


QUERY_FORMATS: dict[str, Callable[[Iterable[QueryRow]], Iterator[str]]] = {
    "tsv": write_queries_tsv,
    "jsonl": write_queries_jsonl,
    "xml": write_topics_xml,
}


def write_queries(queries: Iterable[QueryRow], fmt: str) -> Iterator[str]:
    """The queries in one of :data:`QUERY_FORMATS`, as pieces of text to write or stream."""
    return QUERY_FORMATS[fmt](queries)


def _check_written_qid(qid: str) -> None:
    # What the readers refuse is never written: a file that would not read back.
    if not qid or WHITESPACE_RE.search(qid) or "\x00" in qid:
        raise ValueError(f"query id {qid!r} is empty or holds whitespace or a NUL character")
