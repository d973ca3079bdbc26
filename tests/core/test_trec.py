"""File formats: runs, qrels, corpora, queries; plain and gzip; every error names file:line."""

from __future__ import annotations

import gzip
import io
import pickle
import re
from array import array
from pathlib import Path

import pytest

from formats.beir import CorpusDoc, QueryRow, iter_corpus, iter_queries
from formats.trec import (
    FormatError,
    QrelRow,
    RunRow,
    format_qrels_line,
    iter_qrels,
    iter_run,
    open_text,
    rank_run,
    read_qrels,
    read_run,
    write_run,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DL19 = DATA / "trec-dl-2019-passage"
needs_data = pytest.mark.skipif(
    not DATA.exists(), reason="real TREC data (../shared/data) not present"
)


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def compressed(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def write(tmp_path: Path, name: str, text: str | bytes, compressed: bool = False) -> Path:
    """Write a test file; compressed files keep the plain name (detection is by content)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if compressed else data)
    return path


def raises_at(path: Path, line: int, fragment: str) -> pytest.RaisesExc[FormatError]:
    """Expect a FormatError about ``path`` at ``line`` whose message contains ``fragment``."""
    return pytest.raises(
        FormatError, match=f"^{re.escape(str(path))}:{line}: .*{re.escape(fragment)}"
    )


# --------------------------------------------------------------------------- FormatError


def test_it_formats_errors_as_path_line_reason() -> None:
    error = FormatError("runs/a.run", 12, "bad things")
    assert (error.path, error.line, error.reason) == ("runs/a.run", 12, "bad things")
    assert str(error) == "runs/a.run:12: bad things"
    assert str(FormatError(Path("x.tsv"), 0, "empty")) == "x.tsv: empty"
    assert isinstance(error, ValueError)


def test_it_pickles_format_errors() -> None:
    error = pickle.loads(pickle.dumps(FormatError("a.run", 3, "oops")))
    assert (error.path, error.line, error.reason, str(error)) == (
        "a.run",
        3,
        "oops",
        "a.run:3: oops",
    )


# --------------------------------------------------------------------------- open_text


def test_it_gunzips_by_magic_bytes_not_by_extension(tmp_path: Path) -> None:
    gz_named_txt = write(tmp_path, "looks-plain.txt", "héllo\nworld\n", compressed=True)
    txt_named_gz = write(tmp_path, "looks-compressed.gz", "héllo\nworld\n")
    for path in (gz_named_txt, txt_named_gz):
        with open_text(path) as fh:
            assert list(fh) == ["héllo\n", "world\n"]


def test_it_reads_text_in_arbitrary_pieces(tmp_path: Path) -> None:
    path = write(tmp_path, "t.txt", "ab\ncdé\n\nlast")
    with open_text(path) as fh:
        assert fh.read(1) == "a"
        assert fh.readline() == "b\n"
        assert fh.read(4) == "cdé\n"
        assert fh.read() == "\nlast"
        assert fh.read() == ""


def test_it_reports_invalid_utf8_with_its_line(tmp_path: Path, compressed: bool) -> None:
    path = write(tmp_path, "bad.run", b"q1 Q0 d1 1 2.0 t\nq1 Q0 d\xff2 2 1.0 t\n", compressed)
    with raises_at(path, 2, "invalid UTF-8"):
        list(iter_run(path))


def test_it_reports_corrupt_gzip_as_a_format_error(tmp_path: Path) -> None:
    data = gzip.compress("".join(f"q1 Q0 d{i} {i} 1.0 t\n" for i in range(5000)).encode())
    path = write(tmp_path, "cut.run.gz", data[: len(data) // 2])
    with pytest.raises(FormatError, match="corrupt gzip data"):
        list(iter_run(path))


def test_it_ignores_a_byte_order_mark(tmp_path: Path) -> None:
    path = write(tmp_path, "q.tsv", "\ufeff1\tfirst query\n")
    assert list(iter_queries(path)) == [QueryRow("1", "first query")]


# --------------------------------------------------------------------------- runs


def test_it_reads_run_lines_split_on_any_blanks(tmp_path: Path, compressed: bool) -> None:
    text = "q1 Q0 d1 1 2.5 sys\n\n  \nq1\tQ0\t d2  2\t-1e-3 sys\r\nq2 0 d1 1 7 sys"
    path = write(tmp_path, "a.run", text, compressed)
    assert list(iter_run(path)) == [
        RunRow("q1", "d1", 1, 2.5, "sys"),
        RunRow("q1", "d2", 2, -0.001, "sys"),
        RunRow("q2", "d1", 1, 7.0, "sys"),
    ]


@pytest.mark.parametrize(
    ("bad_line", "fragment"),
    [
        ("q1 Q0 d2 2 1.0", "expected 6 columns (qid Q0 docid rank score tag), found 5"),
        ("q1 Q0 d2 2 1.0 sys extra", "found 7"),
        ("q1 Q0 d2 two 1.0 sys", "rank 'two' is not an integer"),
        ("q1 Q0 d2 2.0 1.0 sys", "rank '2.0' is not an integer"),
        ("q1 Q0 d2 2 high sys", "score 'high' is not a number"),
        ("q1 Q0 d2 2 nan sys", "score 'nan' is not a finite number"),
        ("q1 Q0 d2 2 -inf sys", "score '-inf' is not a finite number"),
    ],
)
def test_it_rejects_malformed_run_lines(
    tmp_path: Path, compressed: bool, bad_line: str, fragment: str
) -> None:
    # The blank line 2 checks that line numbers count physical lines.
    path = write(tmp_path, "bad.run", f"q1 Q0 d1 1 2.0 sys\n\n{bad_line}\n", compressed)
    with raises_at(path, 3, fragment):
        list(iter_run(path))


def test_it_rejects_a_document_twice_for_one_query_even_when_queries_interleave(
    tmp_path: Path, compressed: bool
) -> None:
    text = "q1 Q0 d1 1 3 s\nq2 Q0 d1 1 3 s\nq1 Q0 d2 2 2 s\nq1 Q0 d1 3 1 s\n"
    path = write(tmp_path, "dup.run", text, compressed)
    with raises_at(path, 4, "document d1 appears twice for query q1 (first at line 1)"):
        list(iter_run(path))


def test_it_orders_runs_by_score_then_docid_descending_whatever_the_rank_says(
    tmp_path: Path, compressed: bool
) -> None:
    text = "\n".join(
        [
            "q1 Q0 d10 1 0.5 s",  # rank column claims first, score says last
            "q1 Q0 d2 2 0.9 s",
            "q1 Q0 d3 3 0.9 s",  # ties with d2: "d3" > "d2", so d3 first
            "q1 Q0 d1 4 1.0 s",
            "q1 Q0 d20 5 0.9 s",  # string order: "d3" > "d20" > "d2"
            "q0 Q0 x 1 1 s",
        ]
    )
    ranked = read_run(write(tmp_path, "lying.run", text, compressed))
    assert list(ranked) == ["q1", "q0"]
    assert [row.docid for row in ranked["q1"]] == ["d1", "d3", "d20", "d2", "d10"]
    assert ranked["q1"][0].rank == 4  # rows are kept as written


def test_it_ranks_one_query_like_trec_eval() -> None:
    rows = [RunRow("q", d, 1, s, "t") for d, s in [("a", 1.0), ("b", 1.0), ("c", 2.0)]]
    assert [row.docid for row in rank_run(rows)] == ["c", "b", "a"]


def test_it_writes_runs_that_read_back_identically(tmp_path: Path) -> None:
    rows = [RunRow("q1", "d1", 1, 0.1 + 0.2, "sys"), RunRow("q1", "d2", 2, -3e-12, "sys")]
    out = io.StringIO()
    write_run(rows, out)
    assert out.getvalue().splitlines()[0] == "q1 Q0 d1 1 0.30000000000000004 sys"
    assert list(iter_run(write(tmp_path, "back.run", out.getvalue()))) == rows


def test_it_refuses_to_write_ids_with_whitespace() -> None:
    with pytest.raises(ValueError, match="whitespace"):
        write_run([RunRow("q 1", "d1", 1, 1.0, "sys")], io.StringIO())
    with pytest.raises(ValueError, match="whitespace"):
        format_qrels_line("q1", "d\t1", 1)


# --------------------------------------------------------------------------- qrels


def test_it_reads_trec_qrels_with_any_iteration_column(tmp_path: Path, compressed: bool) -> None:
    path = write(tmp_path, "q.txt", "1 0 d1 3\n1 Q0 d2 0\n\n2 0 d1 -1\n", compressed)
    assert list(iter_qrels(path)) == [
        QrelRow("1", "d1", 3),
        QrelRow("1", "d2", 0),
        QrelRow("2", "d1", -1),
    ]
    assert read_qrels(path) == {"1": {"d1": 3, "d2": 0}, "2": {"d1": -1}}


def test_it_reads_beir_qrels_with_a_header(tmp_path: Path, compressed: bool) -> None:
    text = "query-id\tcorpus-id\tscore\nq1\t10\t1\nq1\t11\t2\n"
    path = write(tmp_path, "test.tsv", text, compressed)
    assert read_qrels(path) == {"q1": {"10": 1, "11": 2}}


def test_it_reads_beir_qrels_without_a_header(tmp_path: Path) -> None:
    path = write(tmp_path, "test.tsv", "q1\t10\t1\nq2\t10\t0\n")
    assert read_qrels(path) == {"q1": {"10": 1}, "q2": {"10": 0}}


def test_it_formats_qrels_lines() -> None:
    assert format_qrels_line("19335", "1017759", 2) == "19335 0 1017759 2"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("1 0 d1 2 extra\n", 1, "expected 4 columns (qid iteration docid grade) or 3"),
        ("1 0 d1 2\n1 0 d2\n", 2, "expected 4 columns (qid iteration docid grade), found 3"),
        ("q\td\tscore\nq1\td1\t1\nq1\td2\t1\t0\n", 3, "expected 3 columns"),
        ("1 0 d1 2\n1 0 d2 high\n", 2, "grade 'high' is not an integer"),
        ("1 0 d1 2\n1 0 d2 1.5\n", 2, "grade '1.5' is not an integer"),
        ("1 0 d1 2\n2 0 d1 2\n\n1 Q0 d1 0\n", 4, "document d1 is judged twice for query 1"),
    ],
)
def test_it_rejects_malformed_qrels(
    tmp_path: Path, compressed: bool, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, "bad.qrels", text, compressed)
    with raises_at(path, line, fragment):
        list(iter_qrels(path))


# --------------------------------------------------------------------------- corpus


def test_it_reads_a_beir_corpus_with_key_variants(tmp_path: Path, compressed: bool) -> None:
    lines = [
        '{"_id": "d1", "title": "Sync", "text": "How sync works", "metadata": {}}',
        '{"_id": 42, "text": "numeric id"}',
        "",
        '{"docid": "d3", "doc": "msmarco style", "title": null}',
        '{"id": "d4", "contents": "pyserini style"}',
        '{"doc_id": "d5", "body": "body key"}',
    ]
    path = write(tmp_path, "corpus.jsonl", "\n".join(lines), compressed)
    assert list(iter_corpus(path)) == [
        CorpusDoc("d1", "Sync", "How sync works"),
        CorpusDoc("42", "", "numeric id"),
        CorpusDoc("d3", "", "msmarco style"),
        CorpusDoc("d4", "", "pyserini style"),
        CorpusDoc("d5", "", "body key"),
    ]


def test_it_reads_a_tsv_corpus_with_or_without_titles(tmp_path: Path, compressed: bool) -> None:
    three = write(tmp_path, "three.tsv", "d1\tTitle\tSome text\nd2\t\tNo title\n", compressed)
    two = write(tmp_path, "two.tsv", "d1\tSome text\r\nd2\tMore\n", compressed)
    assert list(iter_corpus(three)) == [
        CorpusDoc("d1", "Title", "Some text"),
        CorpusDoc("d2", "", "No title"),
    ]
    assert list(iter_corpus(two)) == [CorpusDoc("d1", "", "Some text"), CorpusDoc("d2", "", "More")]


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        (['{"_id": "d2", "text": "x"'], "invalid JSON"),
        (['["d2", "x"]'], "expected a JSON object, found list"),
        (['{"title": "t", "text": "x"}'], "missing id (one of _id, docid, id, doc_id)"),
        (['{"_id": "", "text": "x"}'], "empty document id"),
        (['{"_id": true, "text": "x"}'], "must be a string or an integer"),
        (['{"_id": "d2", "title": "t"}'], "missing text (one of text, contents, doc, body)"),
        (['{"_id": "d2", "text": 7}'], "'text' must be a string"),
        (['{"_id": "d 2", "text": "x"}'], "document id 'd 2' contains whitespace"),
        (['{"_id": "d1", "text": "again"}'], "document d1 appears twice (first at line 1)"),
    ],
)
def test_it_rejects_malformed_jsonl_corpora(
    tmp_path: Path, compressed: bool, lines: list[str], fragment: str
) -> None:
    text = "\n".join(['{"_id": "d1", "text": "fine"}', "", *lines])
    path = write(tmp_path, "corpus.jsonl", text, compressed)
    with raises_at(path, 3, fragment):
        list(iter_corpus(path))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("d1\n", 1, "expected 2 or 3 tab-separated columns, found 1"),
        ("d1\tt\tx\textra\n", 1, "found 4"),
        ("d1\tt\tx\nd2\tonly text\n", 2, "expected 3 tab-separated columns, found 2"),
        ("d1\tx\nd2\ttitle\twith\ttabs\n", 2, "expected 2 tab-separated columns, found 4"),
        ("d1\tx\nd1\ty\n", 2, "document d1 appears twice (first at line 1)"),
        ("d1\tx\n\tempty id\n", 2, "empty document id"),
    ],
)
def test_it_rejects_malformed_tsv_corpora(
    tmp_path: Path, compressed: bool, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, "corpus.tsv", text, compressed)
    with raises_at(path, line, fragment):
        list(iter_corpus(path))


# --------------------------------------------------------------------------- queries


def test_it_reads_queries_from_jsonl_and_tsv(tmp_path: Path, compressed: bool) -> None:
    jsonl = "\n".join(
        [
            '{"_id": "q1", "text": "sync fails", "metadata": {}}',
            '{"qid": 2, "query": "export notes"}',
            '{"query_id": "q3", "text": "dark mode"}',
        ]
    )
    json_path = write(tmp_path, "queries.jsonl", jsonl, compressed)
    tsv_path = write(tmp_path, "topics.txt", "156493\tdo goldfish grow\n\n19335\tanthropology\n")
    assert list(iter_queries(json_path)) == [
        QueryRow("q1", "sync fails"),
        QueryRow("2", "export notes"),
        QueryRow("q3", "dark mode"),
    ]
    assert list(iter_queries(tsv_path)) == [
        QueryRow("156493", "do goldfish grow"),
        QueryRow("19335", "anthropology"),
    ]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("q1\ta\nq2\tb\tc\n", 2, "expected 2 tab-separated columns, found 3"),
        ("q1\ta\nq2 b\n", 2, "expected 2 tab-separated columns, found 1"),
        ("q1\ta\n\nq1\tb\n", 3, "query q1 appears twice (first at line 1)"),
        ("q1\ta\nq 2\tb\n", 2, "query id 'q 2' contains whitespace"),
        ('{"_id": "q1", "text": "a"}\n{"_id": "q2"}\n', 2, "missing text (one of text, query)"),
        (
            '{"_id": "q1", "text": "a"}\n{"text": "b"}\n',
            2,
            "missing id (one of _id, qid, query_id)",
        ),
        ('{"_id": "q1", "text": "a"}\nq2\tb\n', 2, "invalid JSON"),
    ],
)
def test_it_rejects_malformed_queries(
    tmp_path: Path, compressed: bool, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, "queries.txt", text, compressed)
    with raises_at(path, line, fragment):
        list(iter_queries(path))


def test_it_yields_nothing_for_empty_files(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.txt", "\n  \n")
    assert list(iter_run(path)) == []
    assert list(iter_qrels(path)) == []
    assert list(iter_corpus(path)) == []
    assert list(iter_queries(path)) == []


# --------------------------------------------------------------------------- real data


def _non_blank_lines(path: Path) -> int:
    with open_text(path) as fh:
        return sum(1 for line in fh if line.strip())


@pytest.mark.data
@needs_data
def test_it_reads_every_dl19_run() -> None:
    runs = sorted((DL19 / "runs").glob("*.run.gz"))
    assert runs
    for path in runs:
        ranked = read_run(path)
        assert sum(len(rows) for rows in ranked.values()) == _non_blank_lines(path)
        for rows in ranked.values():
            # trec_eval compares single-precision scores: equal float32 scores tie on docid.
            scores32 = array("f", (row.score for row in rows)).tolist()
            keys = [(score, row.docid) for score, row in zip(scores32, rows, strict=True)]
            assert keys == sorted(keys, reverse=True)


@pytest.mark.data
@needs_data
def test_it_reads_the_dl19_qrels_corpus_and_topics() -> None:
    qrels_path = DL19 / "qrels.dl19-passage.txt"
    corpus_path = DL19 / "dl2019_passages.jsonl"
    topics_path = DL19 / "topics.dl19-passage.txt"
    qrels = list(iter_qrels(qrels_path))
    corpus = list(iter_corpus(corpus_path))
    topics = list(iter_queries(topics_path))
    assert len(qrels) == _non_blank_lines(qrels_path)
    assert len(corpus) == _non_blank_lines(corpus_path)
    assert len(topics) == _non_blank_lines(topics_path)
    # Every judged query is a topic, and every judged passage is in the passage file.
    assert {row.qid for row in qrels} == {topic.qid for topic in topics}
    assert {row.docid for row in qrels} <= {doc.docid for doc in corpus}
    assert all(doc.text for doc in corpus)


def test_it_ties_scores_that_are_equal_in_single_precision_as_trec_eval_does() -> None:
    from formats.trec import rank_run

    # 0.1 and 0.1 + 1e-12 differ as doubles but are the same C float: docid decides.
    rows = [RunRow("q", "a", 1, 0.1 + 1e-12, "t"), RunRow("q", "b", 2, 0.1, "t")]
    assert [r.docid for r in rank_run(rows)] == ["b", "a"]
    rows = [RunRow("q", "a", 1, 0.2, "t"), RunRow("q", "b", 2, 0.1, "t")]
    assert [r.docid for r in rank_run(rows)] == ["a", "b"]
