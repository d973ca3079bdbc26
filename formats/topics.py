"""TREC topics as XML, read and written::

    <topics>
      <topic number="1037798"><query>who is robert gray</query>
        <description>Find out who Robert Gray was.</description></topic>
    </topics>

The reader streams (one line of the file at a time through expat) and, like every reader of
:mod:`formats`, reports a problem as a :class:`~formats.text.FormatError` naming file and line.
It refuses a DOCTYPE, so no entity can be declared: nothing is fetched and nothing expands.
Other elements inside a ``<topic>`` (TREC Web track ``<subtopic>``, say) are ignored.

The query text is taken exactly as written between the tags, as the TSV and JSONL readers take
theirs, so a written file reads back unchanged; ``<description>`` and ``<narrative>`` are
trimmed and joined by a blank line, as the JSONL reader joins its notes (:func:`join_notes`).

Pure core: no Django import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol
from xml.parsers import expat

from formats.text import FormatError, open_text

__all__ = ["Topic", "iter_topics_xml", "join_notes", "looks_like_xml", "write_topics_xml"]

_TEXT_ELEMENTS = ("query", "description", "narrative")
# XML 1.0 cannot carry these even as character references: C0 controls other than tab, line
# feed and carriage return, lone surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;"})


class Topic(Protocol):
    """What the writer needs of a query (``formats.beir.QueryRow`` is one)."""

    @property
    def qid(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def description(self) -> str: ...


def join_notes(notes: Iterable[str]) -> str:
    """A query's description from its notes (TREC description, narrative): trimmed, the empty
    ones dropped, joined by a blank line."""
    return "\n\n".join(note.strip() for note in notes if note.strip())


def looks_like_xml(first_line: str) -> bool:
    """Whether a file whose first non-blank line is this is XML (a qid never starts a TSV
    line with ``<``: :func:`formats.beir.write_queries_tsv` refuses to write one first)."""
    return first_line.lstrip("\ufeff \t").startswith("<")


# --------------------------------------------------------------------------- writing


def _escape(text: str) -> str:
    # A carriage return is written as a reference: a parser turns a literal one into \n.
    return _NOT_XML.sub("\ufffd", text).translate(_ESCAPES)


def write_topics_xml(topics: Iterable[Topic]) -> Iterator[str]:
    """The topics as XML text, in pieces (a header, one piece per topic, a footer).

    Characters XML 1.0 cannot hold (control characters other than tab and line ends) are
    written as U+FFFD; the JSONL writer keeps every character.
    """
    yield '<?xml version="1.0" encoding="UTF-8"?>\n<topics>\n'
    for topic in topics:
        parts = [f'<topic number="{_escape(topic.qid)}">', f"<query>{_escape(topic.text)}</query>"]
        if topic.description:
            parts.append(f"<description>{_escape(topic.description)}</description>")
        yield "  " + "".join(parts) + "</topic>\n"
    yield "</topics>\n"


# --------------------------------------------------------------------------- reading


class _TopicsHandler:
    """expat callbacks building (qid, description, text) records, with their lines."""

    def __init__(self, path: str | Path, parser: expat.XMLParserType) -> None:
        self.path, self.parser = path, parser
        self.done: list[tuple[int, str, str, str]] = []  # (line, qid, description, text)
        self.stack: list[str] = []
        self.fields: dict[str, str] = {}
        self.capturing: str | None = None
        self.topic_line = 0
        self.number: str | None = None

    def fail(self, reason: str, line: int | None = None) -> FormatError:
        return FormatError(self.path, line or self.parser.CurrentLineNumber, reason)

    def doctype(self, *_: object) -> None:
        raise self.fail("a DOCTYPE is not accepted in a topics file")

    def start(self, name: str, attrs: dict[str, str]) -> None:
        depth = len(self.stack)
        self.stack.append(name)
        if depth == 0 and name != "topics":
            raise self.fail(f"the root element must be <topics>, found <{name}>")
        if depth == 1:
            if name != "topic":
                raise self.fail(f"expected <topic> inside <topics>, found <{name}>")
            self.topic_line, self.number, self.fields = self.parser.CurrentLineNumber, None, {}
            self.number = attrs.get("number")
        elif self.capturing is not None:
            raise self.fail(f"<{self.capturing}> holds an element <{name}>; only text is read")
        elif depth == 2 and name in _TEXT_ELEMENTS:
            if name in self.fields:
                raise self.fail(f"<{name}> appears twice in one topic")
            self.capturing, self.fields[name] = name, ""

    def end(self, name: str) -> None:
        self.stack.pop()
        if name == self.capturing and len(self.stack) == 2:
            self.capturing = None
        elif len(self.stack) == 1:
            self._topic_done()

    def text(self, data: str) -> None:
        if self.capturing is not None:
            self.fields[self.capturing] += data

    def _topic_done(self) -> None:
        if self.number is None:
            raise self.fail('the <topic> has no number="..." attribute', self.topic_line)
        if "query" not in self.fields:
            raise self.fail("the <topic> has no <query>", self.topic_line)
        notes = (self.fields.get("description", ""), self.fields.get("narrative", ""))
        record = (self.topic_line, self.number, join_notes(notes), self.fields["query"])
        self.done.append(record)


def iter_topics_xml(path: str | Path) -> Iterator[tuple[int, str, str, str]]:
    """Stream ``(line, qid, description, text)`` from a TREC topics XML file; ``line`` is the
    line of the topic's start tag. Ids are not checked here (the caller's rule applies)."""
    parser = expat.ParserCreate()
    handler = _TopicsHandler(path, parser)
    parser.StartDoctypeDeclHandler = handler.doctype
    parser.StartElementHandler = handler.start
    parser.EndElementHandler = handler.end
    parser.CharacterDataHandler = handler.text
    parser.buffer_text = True  # one callback per text run, not one per line of it
    with open_text(path) as fh:
        for line in fh:
            _feed(parser, path, line, final=False)
            yield from handler.done
            handler.done.clear()
    _feed(parser, path, "", final=True)
    yield from handler.done


def _feed(parser: expat.XMLParserType, path: str | Path, data: str, *, final: bool) -> None:
    try:
        parser.Parse(data, final)
    except expat.ExpatError as error:
        reason = f"invalid XML: {expat.ErrorString(error.code)} (column {error.offset + 1})"
        raise FormatError(path, error.lineno, reason) from None
