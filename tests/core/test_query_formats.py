"""Queries out and back in: every written format reads back unchanged; TREC topics XML is
read with its problems named by file and line."""

from __future__ import annotations

import gzip
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.beir import (
    QueryRow,
    iter_queries,
    write_queries,
    write_queries_tsv,
)
from formats.text import FormatError
from formats.topics import write_topics_xml

TRICKY = [
    QueryRow("q1", 'what is "R&D" <tax> credit?', "Find the credit's rules.\n\nNot news.", "head"),
    QueryRow("2", "  leading and trailing spaces  ", "", "tail"),
    QueryRow("q-3", "tab\there, CR\rthere, ünïcödé ☃, line\u2028separator", "", ""),
    QueryRow("q_4", "]]> and &amp; written literally", "a < b > c & d", "failures"),
]
# What each format carries: TSV the id and a one-line text, XML no stratum, JSONL everything.
CARRIED = {
    "tsv": lambda q: (q.qid, q.text.replace("\t", " ").replace("\r", " ").replace("\n", " ")),
    "xml": lambda q: (q.qid, q.text, q.description),
    "jsonl": lambda q: (q.qid, q.text, q.description, q.stratum),
}


def write(path: Path, pieces: Iterable[str], compressed: bool = False) -> Path:
    text = "".join(pieces)
    if compressed:
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "xml"])
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_it_reads_back_what_it_wrote(fmt: str, compressed: bool, tmp_path: Path) -> None:
    path = write(tmp_path / f"q.{fmt}", write_queries(TRICKY, fmt), compressed)
    back = list(iter_queries(path))
    assert [CARRIED[fmt](q) for q in back] == [CARRIED[fmt](q) for q in TRICKY]


text_strategy = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
qid_strategy = st.text(
    st.characters(categories=["L", "N"], include_characters="-_.:"),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(qid_strategy, text_strategy, text_strategy, st.text("abcxyz", max_size=8)),
        max_size=6,
        unique_by=lambda row: row[0],
    )
)
def test_jsonl_carries_any_text_unchanged(rows: list[tuple[str, str, str, str]]) -> None:
    queries = [QueryRow(qid, text, desc.strip(), stratum) for qid, text, desc, stratum in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / "q.jsonl", write_queries(queries, "jsonl"))
        assert list(iter_queries(path)) == queries


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(qid_strategy, text_strategy), max_size=6, unique_by=lambda r: r[0]))
def test_xml_carries_every_character_it_can_hold(rows: list[tuple[str, str]]) -> None:
    # XML 1.0 holds no C0 control but tab and line ends (written as U+FFFD instead).
    cannot = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
    queries = [QueryRow(qid, text) for qid, text in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / "q.xml", write_topics_xml(queries))
        back = list(iter_queries(path))
    assert back == [QueryRow(q.qid, cannot.sub("\ufffd", q.text)) for q in queries]


def test_tsv_puts_each_query_on_one_line() -> None:
    pieces = list(write_queries_tsv([QueryRow("a", "one\ttwo\nthree\r\nfour")]))
    assert pieces == ["a\tone two three  four\n"]


@pytest.mark.parametrize("qid", ["{x", "<x"])
def test_tsv_refuses_a_first_id_the_readers_would_take_for_json_or_xml(qid: str) -> None:
    with pytest.raises(ValueError, match="download JSONL instead"):
        list(write_queries_tsv([QueryRow(qid, "text")]))
    # Later lines do not decide the format.
    assert len(list(write_queries_tsv([QueryRow("a", "t"), QueryRow(qid, "t")]))) == 2


def test_it_reads_trec_topics_with_narrative_and_subtopics(tmp_path: Path) -> None:
    path = tmp_path / "topics.xml"
    path.write_text(
        """<?xml version="1.0" encoding="UTF-8"?>
<topics>
  <topic number="51" type="faceted">
    <query>horse hooves</query>
    <description>
      Find information about horse hooves.
    </description>
    <narrative>Care and injuries are relevant.</narrative>
    <subtopic number="1" type="inf">Find pictures of <query>not this</query></subtopic>
  </topic>
  <topic number="52"><query>avp</query></topic>
</topics>
""",
        encoding="utf-8",
    )
    assert list(iter_queries(path)) == [
        QueryRow(
            "51",
            "horse hooves",
            "Find information about horse hooves.\n\nCare and injuries are relevant.",
        ),
        QueryRow("52", "avp"),
    ]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            '<!DOCTYPE t [<!ENTITY x "y">]>\n<topics/>',
            "q.xml:1: a DOCTYPE is not accepted",
        ),
        ("<topics>\n<topic><query>a</query></topic>\n</topics>",
         "q.xml:2: the <topic> has no number"),
        ('<topics>\n\n<topic number="1">\n</topic></topics>',
         "q.xml:3: the <topic> has no <query>"),
        ("<queries/>", "q.xml:1: the root element must be <topics>"),
        ('<topics><topic number="1"><query>a</query>\n<query>b</query></topic></topics>',
         "q.xml:2: <query> appears twice"),
        ('<topics>\n<topic number="1"><query>a <b>c</b></query></topic></topics>',
         "q.xml:2: <query> holds an element <b>"),
        ('<topics>\n<topic number="1"><query>a & b</query></topic></topics>',
         "q.xml:2: invalid XML: not well-formed (invalid token)"),
        ('<topics>\n<topic number="1"><query>a</query></topic>\n<topic number="1"><query>b'
         "</query></topic></topics>", "q.xml:3: query 1 appears twice (first at line 2)"),
        ('<topics>\n<topic number="a b"><query>a</query></topic></topics>',
         "q.xml:2: query id 'a b' contains whitespace"),
        ('<topics>\n<topic number="1"><query>a</query></topic>',
         "q.xml:2: invalid XML: no element"),
        ("<topics>\n<other/></topics>", "q.xml:2: expected <topic> inside <topics>, found <other>"),
    ],
)  # fmt: skip
def test_it_names_the_line_of_a_problem_in_a_topics_file(
    text: str, where: str, tmp_path: Path
) -> None:
    path = tmp_path / "q.xml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as error:
        list(iter_queries(path))
    assert str(error.value).replace(str(tmp_path) + "/", "").startswith(where), str(error.value)


def test_it_reads_a_stratum_from_jsonl_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": "1", "text": "a", "stratum": "torso"}\n', encoding="utf-8")
    assert list(iter_queries(path, max_stratum_length=5)) == [QueryRow("1", "a", "", "torso")]
    with pytest.raises(FormatError, match=r"q.jsonl:1: stratum 'torso' is longer than 4"):
        list(iter_queries(path, max_stratum_length=4))
