"""Baseline systems: tokenizer, the BM25 formula's worked example, and the runs they produce."""

from __future__ import annotations

from collections import Counter

import pytest

from formats.beir import CorpusDoc, QueryRow
from formats.trec import RunRow
from pooling.baselines import (
    STOPWORDS,
    bm25_idf,
    bm25_length_factor,
    bm25_run,
    bm25_term_score,
    run_baselines,
    tfidf_run,
    tokenize,
)

HELP_CENTRE = [
    (
        "sync-basics",
        "How sync works: sync runs every minute. Sync quota and sync limits: each sync uses "
        "quota; when the quota is exceeded sync pauses.",
    ),
    ("quota", "Storage quota explained. Your quota covers notes and attachments. Upgrade."),
    ("err-code", "If you see ERR_SYNC_QUOTA_EXCEEDED the server refused the upload."),
    ("export", "Export your notes to PDF or Markdown."),
    ("qm", "Error QM-2043 means the notebook is locked by another device."),
    ("qm-other", "Errors QM-2044 and QM-2045 concern attachments larger than 2043 KB."),
]


# --------------------------------------------------------------------------- tokenize


def test_it_keeps_codes_whole_and_adds_their_parts() -> None:
    assert tokenize("Error QM-2043 and ERR_SYNC_QUOTA_EXCEEDED!") == [
        "error",
        "qm-2043",
        "qm",
        "2043",
        "err_sync_quota_exceeded",
        "err",
        "sync",
        "quota",
        "exceeded",
    ]


def test_it_normalises_width_and_case() -> None:
    # Full-width letters, digits and hyphen (NFKC) and the German sharp s (case folding).
    assert tokenize("\uff31\uff4d\uff0d\uff12\uff10\uff14\uff13 STRASSE Stra\u00dfe") == [
        "qm-2043",
        "qm",
        "2043",
        "strasse",
        "strasse",
    ]


def test_it_drops_stopwords_and_loose_punctuation() -> None:
    assert tokenize("What is the -x- of a__b, and why?") == ["x", "b"]
    assert {"the", "and", "is", "what"} <= STOPWORDS
    assert 100 <= len(STOPWORDS) <= 150


# --------------------------------------------------------------------------- BM25 formula

N_DOCS, AVGDL = 40_000, 220
DF = {"webhook": 320, "retry": 140, "policy": 900}


def candidate_score(doc_len: int, tfs: dict[str, int]) -> tuple[float, float]:
    K = bm25_length_factor(doc_len, AVGDL)
    total = sum(bm25_term_score(tf, bm25_idf(N_DOCS, DF[term]), K) for term, tf in tfs.items())
    return K, total


def test_it_reproduces_the_worked_bm25_example() -> None:
    k_short, short = candidate_score(180, {"webhook": 6, "retry": 9, "policy": 2})
    k_long, long = candidate_score(900, {"webhook": 8, "retry": 1, "policy": 3})
    assert (round(k_short, 2), round(short, 2)) == (1.04, 25.70)
    assert (round(k_long, 2), round(long, 2)) == (3.98, 13.17)


def test_it_weights_rare_terms_hundreds_of_times_more() -> None:
    rare, common = bm25_idf(N_DOCS, 3), bm25_idf(N_DOCS, 39_000)
    assert round(rare, 2) == 9.34
    assert round(common, 3) == 0.025
    assert round(rare / common) == 369


# --------------------------------------------------------------------------- bm25_run

TINY = [
    ("a", "webhook retry policy for webhook failures"),
    ("b", "retry the export later"),
    ("c", "policy on data retention and export of data and more data"),
    ("d", "nothing relevant here at all"),
]


def formula_score(docid: str, query: str) -> float:
    """Score a TINY document by hand: the sum over distinct query terms of the term score."""
    tokens = {d: tokenize(text) for d, text in TINY}
    avgdl = sum(map(len, tokens.values())) / len(tokens)
    K = bm25_length_factor(len(tokens[docid]), avgdl)
    tf = Counter(tokens[docid])
    total = 0.0
    for term in set(tokenize(query)):
        df = sum(term in doc for doc in tokens.values())
        if tf[term]:
            total += bm25_term_score(tf[term], bm25_idf(len(TINY), df), K)
    return total


def test_it_scores_bm25_exactly_as_the_formula() -> None:
    query = "webhook retry policy export"
    rows = bm25_run(TINY, [("q", query)])
    assert {row.docid for row in rows} == {"a", "b", "c"}
    for row in rows:
        assert row.score == pytest.approx(formula_score(row.docid, query), abs=1e-5)


def test_it_counts_a_repeated_query_term_once() -> None:
    once = bm25_run(TINY, [("q", "retry export")])
    twice = bm25_run(TINY, [("q", "retry retry export export")])
    assert once == twice


def test_it_ranks_the_document_with_the_exact_error_code_first() -> None:
    queries = [("q1", "what does ERR_SYNC_QUOTA_EXCEEDED mean"), ("q2", "error QM-2043")]
    for run in (bm25_run, tfidf_run):
        rows = run(HELP_CENTRE, queries)
        first = {row.qid: row.docid for row in rows if row.rank == 1}
        assert first == {"q1": "err-code", "q2": "qm"}, run.__name__


def test_it_lists_only_documents_sharing_a_term_ranked_one_to_n() -> None:
    rows = bm25_run(TINY, [("q", "export")], tag="mine")
    assert [(row.docid, row.rank, row.tag) for row in rows] == [
        ("b", 1, "mine"),  # the shorter document
        ("c", 2, "mine"),
    ]
    assert all(row.score > 0 for row in rows)


def test_it_returns_no_rows_for_a_query_of_unknown_terms() -> None:
    assert bm25_run(TINY, [("q", "zeppelin the of")]) == []
    assert tfidf_run(TINY, [("q", "zeppelin the of")]) == []


def test_it_cuts_at_k_breaking_ties_by_docid_descending() -> None:
    docs = [(docid, "same words here") for docid in ("d1", "d3", "d2", "d10")]
    for run in (bm25_run, tfidf_run):
        rows = run(docs, [("q", "words")], k=3)
        assert [row.docid for row in rows] == ["d3", "d2", "d10"], run.__name__
        assert [row.rank for row in rows] == [1, 2, 3]


def test_it_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="k must be"):
        bm25_run(TINY, [("q", "x")], k=0)
    with pytest.raises(ValueError, match="unique"):
        tfidf_run([("a", "x"), ("a", "y")], [("q", "x")])


def test_it_handles_corpora_without_terms() -> None:
    assert bm25_run([], [("q", "export")]) == []
    assert bm25_run([("a", "the of")], [("q", "export")]) == []
    assert tfidf_run([("a", "the of")], [("q", "export")]) == []


# --------------------------------------------------------------------------- tfidf_run


def test_it_returns_cosine_scores_in_the_unit_interval() -> None:
    rows = tfidf_run(TINY, [("q1", "webhook retry policy export"), ("q2", TINY[1][1])])
    assert rows
    assert all(0 < row.score <= 1 for row in rows)
    # A query identical to a document has cosine 1 with it.
    top_q2 = next(row for row in rows if row.qid == "q2" and row.rank == 1)
    assert (top_q2.docid, top_q2.score) == ("b", pytest.approx(1.0))


# --------------------------------------------------------------------------- run_baselines


def test_it_runs_every_baseline() -> None:
    docs = [
        CorpusDoc("d1", "Reset your password", "Open settings and choose a new one."),
        CorpusDoc("d2", "", "Your password must have twelve characters."),
    ]
    runs = run_baselines(docs, [QueryRow("q", "password")], k=10)
    assert list(runs) == ["bm25", "tfidf", "bm25-title"]
    for name, rows in runs.items():
        assert {row.tag for row in rows} == {name}
    assert {row.docid for row in runs["bm25"]} == {"d1", "d2"}
    assert {row.docid for row in runs["tfidf"]} == {"d1", "d2"}
    assert runs["bm25-title"] == [RunRow("q", "d1", 1, runs["bm25-title"][0].score, "bm25-title")]
