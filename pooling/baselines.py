"""Built-in baseline retrieval systems: BM25, TF-IDF and titles-only BM25.

They give a new evaluation set runs to pool before any production system is wired in,
and a floor every real system should beat. All of them share :func:`tokenize`, so that an
error code or a part number typed in a query matches the same string in a document.

Output rules, common to every baseline: at most ``k`` rows per query, only documents with
a score above zero (a document sharing no term with the query is not retrieved, however
short the list), ranks 1..n in trec_eval order (score descending, then docid descending,
see :func:`formats.trec.rank_run`), so the written run means the same thing to trec_eval.

This module is a pure core: no Django, plain records in, frozen dataclasses out.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence

import bm25s
import numpy as np
import numpy.typing as npt

from formats.beir import CorpusDoc, QueryRow
from formats.trec import RunRow

__all__ = [
    "BASELINES",
    "BM25_B",
    "BM25_K1",
    "STOPWORDS",
    "baseline_names",
    "bm25_idf",
    "bm25_length_factor",
    "bm25_run",
    "bm25_term_score",
    "run_baselines",
    "tfidf_run",
    "tokenize",
]

BM25_K1 = 1.2
BM25_B = 0.75

# Function words only: nothing a support ticket or a product name could hinge on.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

# A word is a run of letters/digits ([^\W_]); words joined by single '-' or '_' form one
# compound token, so "QM-2043" or "ERR_SYNC_QUOTA_EXCEEDED" survive as written.
_TOKEN_RE = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_JOINER_RE = re.compile(r"[-_]")


def tokenize(text: str) -> list[str]:
    """Split text into index terms.

    Steps: NFKC normalisation (full-width digits, ligatures) then case folding; tokens are
    maximal runs of letters/digits, joined through internal ``-`` or ``_``. A compound token
    is emitted whole and then part by part ("qm-2043", "qm", "2043"), so an exact code
    matches best while a partial one still counts. Stopwords are dropped (a compound is
    never a stopword; its parts may be).
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    return [term for term in _expand(_TOKEN_RE.findall(text)) if term not in STOPWORDS]


def _expand(tokens: list[str]) -> Iterator[str]:
    for token in tokens:
        yield token
        # Most tokens hold no joiner: two substring tests cost less than a regex search.
        if "-" in token or "_" in token:
            yield from _JOINER_RE.split(token)


# --------------------------------------------------------------------------- BM25 formula


def bm25_idf(n_docs: int, df: int) -> float:
    """Lucene's BM25 idf: ``ln(1 + (N - df + 0.5) / (df + 0.5))``, always positive."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_length_factor(
    doc_len: float, avgdl: float, k1: float = BM25_K1, b: float = BM25_B
) -> float:
    """Length normalisation ``K = k1 * (1 - b + b * |d| / avgdl)``."""
    return k1 * (1 - b + b * doc_len / avgdl)


def bm25_term_score(tf: float, idf: float, K: float, k1: float = BM25_K1) -> float:
    """One term's contribution: ``idf * tf * (k1 + 1) / (tf + K)``.

    A document's BM25 score is the sum of this over the distinct query terms it contains.
    """
    return idf * tf * (k1 + 1) / (tf + K)


# --------------------------------------------------------------------------- runs


def bm25_run(
    docs: Sequence[tuple[str, str]],
    queries: Sequence[tuple[str, str]],
    *,
    k: int = 100,
    tag: str = "bm25",
) -> list[RunRow]:
    """Rank ``docs`` (docid, text) for each of ``queries`` (qid, text) with BM25.

    Scoring is bm25s with ``method="lucene"``, k1 = 1.2, b = 0.75 over :func:`tokenize`
    terms. A row's score is the sum of :func:`bm25_term_score` over the *distinct* query
    terms (a term repeated in the query counts once), with N = ``len(docs)`` and avgdl the
    mean token count of ``docs``. bm25s leaves out the constant factor (k1 + 1) and stores
    float32; scores are multiplied back by (k1 + 1), so they match the formula to ~1e-6
    relative. Queries whose terms are all absent from the corpus get no rows.

    A titles-only BM25 is this function called with the titles as the text
    (:func:`run_baselines` does it under the name "bm25-title").
    """
    _check_inputs(docs, k)
    corpus_tokens = [tokenize(text) for _, text in docs]
    if not any(corpus_tokens):
        return []
    model = bm25s.BM25(method="lucene", k1=BM25_K1, b=BM25_B)
    model.index(corpus_tokens, show_progress=False)
    docids = [docid for docid, _ in docs]
    rows: list[RunRow] = []
    for qid, text in queries:
        term_ids = model.get_tokens_ids(sorted(set(tokenize(text))))
        if term_ids:
            raw = np.asarray(model.get_scores_from_ids(term_ids), dtype=np.float64)
            # bm25s "lucene" drops the constant (k1 + 1) factor, as Lucene 8+ does; putting
            # it back makes scores equal the textbook formula without changing any ranking.
            scores = raw * (BM25_K1 + 1)
            rows.extend(_top_rows(qid, docids, scores, k, tag))
    return rows


def tfidf_run(
    docs: Sequence[tuple[str, str]],
    queries: Sequence[tuple[str, str]],
    *,
    k: int = 100,
    tag: str = "tfidf",
) -> list[RunRow]:
    """Rank ``docs`` for each query by TF-IDF cosine similarity, scores in (0, 1].

    scikit-learn's TfidfVectorizer over :func:`tokenize` terms: tf = 1 + ln(count)
    (``sublinear_tf``), idf = ln((1 + N) / (1 + df)) + 1 (smoothed), vectors L2-normalised,
    so the dot product of a query and a document vector is their cosine.
    """
    # Imported here: scikit-learn takes a second or two to import, which every process that
    # imports this module (the web server, a BM25-only run) would otherwise pay for nothing.
    from sklearn.feature_extraction.text import TfidfVectorizer

    _check_inputs(docs, k)
    if not docs:
        return []
    vectorizer = TfidfVectorizer(
        tokenizer=tokenize, lowercase=False, token_pattern=None, sublinear_tf=True, norm="l2"
    )
    try:
        doc_matrix = vectorizer.fit_transform([text for _, text in docs])
    except ValueError:  # raised when no document has a single term
        return []
    query_matrix = vectorizer.transform([text for _, text in queries])
    docids = [docid for docid, _ in docs]
    rows: list[RunRow] = []
    for i, (qid, _) in enumerate(queries):
        scores = (doc_matrix @ query_matrix[i].T).toarray().ravel()
        # Rounding can push the cosine of identical vectors a hair above 1.
        rows.extend(_top_rows(qid, docids, np.minimum(scores, 1.0), k, tag))
    return rows


def _full_texts(docs: Sequence[CorpusDoc]) -> list[tuple[str, str]]:
    return [(doc.docid, f"{doc.title}\n{doc.text}") for doc in docs]


def _pairs(queries: Sequence[QueryRow]) -> list[tuple[str, str]]:
    return [(query.qid, query.text) for query in queries]


def _bm25(docs: Sequence[CorpusDoc], queries: Sequence[QueryRow], k: int) -> list[RunRow]:
    return bm25_run(_full_texts(docs), _pairs(queries), k=k, tag="bm25")


def _tfidf(docs: Sequence[CorpusDoc], queries: Sequence[QueryRow], k: int) -> list[RunRow]:
    return tfidf_run(_full_texts(docs), _pairs(queries), k=k, tag="tfidf")


def _bm25_title(docs: Sequence[CorpusDoc], queries: Sequence[QueryRow], k: int) -> list[RunRow]:
    titles = [(doc.docid, doc.title) for doc in docs]
    return bm25_run(titles, _pairs(queries), k=k, tag="bm25-title")


Baseline = Callable[[Sequence[CorpusDoc], Sequence[QueryRow], int], list[RunRow]]

# Each baseline by the name its run carries; every one is run by default, in this order.
BASELINES: dict[str, Baseline] = {"bm25": _bm25, "tfidf": _tfidf, "bm25-title": _bm25_title}


def run_baselines(
    docs: Sequence[CorpusDoc],
    queries: Sequence[QueryRow],
    k: int = 100,
    only: Sequence[str] | None = None,
) -> dict[str, list[RunRow]]:
    """Run the baselines named in ``only`` (default: all of :data:`BASELINES`):
    ``{"bm25": ..., "tfidf": ..., "bm25-title": ...}``, each row tagged with its name.

    bm25 and tfidf index ``title + "\\n" + text``; bm25-title indexes the titles alone
    (documents without a title are then never retrieved by it).
    """
    names = baseline_names(only)
    return {name: BASELINES[name](docs, queries, k) for name in names}


def baseline_names(only: Sequence[str] | None) -> list[str]:
    """The baselines asked for, in :data:`BASELINES` order; an unknown name is a ValueError."""
    if only is None:
        return list(BASELINES)
    known = ", ".join(BASELINES)
    unknown = [name for name in only if name not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baseline {', '.join(unknown)}; known: {known}")
    if not only:
        raise ValueError(f"no baseline chosen; known: {known}")
    return [name for name in BASELINES if name in only]


def _check_inputs(docs: Sequence[tuple[str, str]], k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    # Duplicate docids would make two rows of one run name the same document.
    if len({docid for docid, _ in docs}) != len(docs):
        raise ValueError("document ids must be unique")


def _top_rows(
    qid: str, docids: Sequence[str], scores: npt.NDArray[np.float64], k: int, tag: str
) -> list[RunRow]:
    """The best ``k`` documents with a positive score, in trec_eval order, ranked 1..n."""
    hits = np.flatnonzero(scores > 0)
    if len(hits) > k:
        # Keep everything scoring at least the k-th best score: a tie at the cut-off must be
        # settled by docid, exactly as trec_eval would order the written run.
        kth_best = np.partition(scores[hits], len(hits) - k)[len(hits) - k]
        hits = hits[scores[hits] >= kth_best]
    best = sorted(hits.tolist(), key=lambda i: (float(scores[i]), docids[i]), reverse=True)[:k]
    return [
        RunRow(qid=qid, docid=docids[i], rank=rank, score=float(scores[i]), tag=tag)
        for rank, i in enumerate(best, start=1)
    ]
