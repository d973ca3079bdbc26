"""One query's ranking taken apart: the per-rank table of the inspector page (chapter 8).

For one query of one run, under a metric contract (see :mod:`evaluation.measures` for the
notation): each rank's grade, gain, discount 1/log2(r + 1), DCG contribution and cumulative
DCG; the ideal ranking (the query's judged grades sorted descending); nDCG@10, recall@100,
MRR, AP and judged@10, equal to ``measures.evaluate``'s per-query values for the same
ranking; what moving the best-graded document of the top 100 to rank 1 would gain; and the
split of the nDCG@10 lost between ranking (a relevant document in the top 100, ranked low)
and retrieval (a relevant document not in the top 100 at all).

:func:`order_values` gives the five numbers of any order through ``measures.evaluate``, the
one implementation of the measures; the page's script (``static/js/inspector.js``) recomputes
them in the browser for a dragged ranking, and the browser test holds its numbers to
``order_values``'s for the same order.

Pure core: no Django import.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from evaluation.measures import Contract, evaluate
from evaluation.rescore import STORED_CONTRACT
from formats.trec import RunRow

__all__ = [
    "DEFAULT_CONTRACT",
    "DEPTH",
    "INSPECTED",
    "Diagnosis",
    "Headroom",
    "IdealRow",
    "Inspection",
    "K",
    "RankRow",
    "discount",
    "gain",
    "inspect_query",
    "order_values",
    "window_ndcg",
]

K = 10  # the nDCG and judged cut-off
DEPTH = 100  # the recall cut-off, and the window a reranker reorders
INSPECTED = ("ndcg@10", "recall@100", "mrr", "map", "judged@10")
QID = "q"  # the one query of the run `order_values` scores

# The product default (exponential gain, threshold 1, queries without a relevant document
# skipped): the contract of the scores stored for releases.
DEFAULT_CONTRACT = STORED_CONTRACT  # the contract the release's stored scores are made under

Failure = Literal["none", "ranking", "retrieval", "no_relevant"]


def gain(grade: int | None, contract: Contract) -> float:
    """2^g - 1 (exponential) or g (linear); an unjudged document or a negative grade gains 0."""
    if grade is None or grade <= 0:
        return 0.0
    return float(2**grade - 1) if contract.gain == "exponential" else float(grade)


def discount(rank: int) -> float:
    """1 / log2(r + 1): rank 1 counts whole, rank 10 about 0.289."""
    return 1.0 / math.log2(rank + 1)


def order_values(
    grades: Sequence[int | None], judged: Sequence[int], contract: Contract
) -> dict[str, float]:
    """nDCG@10, recall@100, MRR, AP and judged@10 of one ranking, computed by
    ``measures.evaluate`` itself (the one implementation of the measures).

    ``grades`` are the grades of the ranked documents in rank order (None: unjudged),
    ``judged`` every judged grade of the query (what R and the ideal DCG come from). The
    ranking becomes a one-query run whose scores fall with the rank, so trec_eval's order is
    this order; the judged documents it does not hold are added to the qrels. A query with
    no relevant document is scored, not skipped (every measure over R is then 0), so that a
    dragged order always has numbers.
    """
    ranked = [f"r{rank}" for rank in range(len(grades))]
    rows = [RunRow(QID, d, r + 1, float(len(grades) - r), "") for r, d in enumerate(ranked)]
    labels = {d: g for d, g in zip(ranked, grades, strict=True) if g is not None}
    unranked = Counter(judged) - Counter(labels.values())
    for n, grade in enumerate(unranked.elements()):
        labels[f"u{n}"] = grade
    scores = evaluate({QID: labels}, {QID: rows}, INSPECTED, replace(contract, empty="zero"))
    return dict(scores.per_query[QID]) if QID in scores.per_query else dict.fromkeys(INSPECTED, 0.0)


@dataclass(frozen=True)
class RankRow:
    """One rank of the run's ranking. ``cumulative`` is DCG@rank."""

    rank: int
    docid: str
    grade: int | None
    gain: float
    discount: float
    contribution: float
    cumulative: float
    relevant: bool


@dataclass(frozen=True)
class IdealRow:
    """One rank of the ideal ranking, and where the run put that document (None: nowhere)."""

    rank: int
    docid: str
    grade: int
    gain: float
    discount: float
    contribution: float
    cumulative: float
    run_rank: int | None


@dataclass(frozen=True)
class Headroom:
    """Moving the best-graded document of the top 100 (the earliest of equals) to rank 1.

    ``window_ndcg`` is the nDCG@10 of the best order of the top 100: all a reranker of that
    window could reach."""

    docid: str | None
    grade: int | None
    from_rank: int | None
    ndcg_now: float
    ndcg_after: float
    window_ndcg: float

    @property
    def gain(self) -> float:
        return self.ndcg_after - self.ndcg_now


@dataclass(frozen=True)
class Diagnosis:
    """recall@100 against nDCG@10: of the nDCG@10 lost (1 - nDCG@10), how much a perfect
    reordering of the top 100 would win back (ranking) and how much it could not, because
    the documents are not in the top 100 (retrieval)."""

    failure: Failure
    sentence: str
    ranking_loss: float
    retrieval_loss: float
    missing: int  # relevant documents not in the top 100
    buried: int  # relevant documents in the top 100 but below rank 10


@dataclass(frozen=True)
class Inspection:
    rows: tuple[RankRow, ...]
    ideal: tuple[IdealRow, ...]
    values: dict[str, float]
    judged: tuple[int, ...]  # every judged grade of the query, descending
    n_relevant: int
    idcg: float
    counted: bool  # does the query count under the contract (R > 0 or empty="zero")
    headroom: Headroom
    diagnosis: Diagnosis

    @property
    def n_judged(self) -> int:
        return len(self.judged)

    @property
    def dcg(self) -> float:
        """DCG@10 of the run's ranking."""
        return self.rows[min(K, len(self.rows)) - 1].cumulative if self.rows else 0.0


def inspect_query(
    ranking: Sequence[str], grades: Mapping[str, int], contract: Contract = DEFAULT_CONTRACT
) -> Inspection:
    """The inspector's table for one query: ``ranking`` the run's documents in trec_eval
    order, ``grades`` the query's judged documents (docid -> grade) in the release."""
    row_grades = [grades.get(docid) for docid in ranking]
    judged = list(grades.values())
    values = order_values(row_grades, judged, contract)
    n_rel = sum(1 for g in judged if g >= contract.rel_threshold)
    best = window_ndcg(row_grades, judged, contract)
    ideal = _ideal(ranking, grades, contract)
    return Inspection(
        rows=_rows(ranking, row_grades, contract),
        ideal=ideal,
        values=values,
        judged=tuple(sorted(judged, reverse=True)),
        n_relevant=n_rel,
        idcg=ideal[-1].cumulative if ideal else 0.0,
        counted=n_rel > 0 or contract.empty == "zero",
        headroom=_headroom(ranking, row_grades, judged, contract, values["ndcg@10"], best),
        diagnosis=_diagnose(row_grades, values["ndcg@10"], best, n_rel, contract),
    )


def _rows(
    ranking: Sequence[str], grades: Sequence[int | None], contract: Contract
) -> tuple[RankRow, ...]:
    rows = []
    cumulative = 0.0
    for rank, (docid, grade) in enumerate(zip(ranking, grades, strict=True), start=1):
        g = gain(grade, contract)
        contribution = g / math.log2(rank + 1)
        cumulative += contribution
        relevant = grade is not None and grade >= contract.rel_threshold
        rows.append(
            RankRow(rank, docid, grade, g, discount(rank), contribution, cumulative, relevant)
        )
    return tuple(rows)


def _ideal(
    ranking: Sequence[str], grades: Mapping[str, int], contract: Contract
) -> tuple[IdealRow, ...]:
    """The judged documents sorted by grade (then docid, for a stable page), cut at K."""
    where = {docid: rank for rank, docid in enumerate(ranking, start=1)}
    best = sorted(grades.items(), key=lambda item: (-item[1], item[0]))[:K]
    rows = []
    cumulative = 0.0
    for rank, (docid, grade) in enumerate(best, start=1):
        g = gain(grade, contract)
        contribution = g / math.log2(rank + 1)
        cumulative += contribution
        rows.append(
            IdealRow(
                rank, docid, grade, g, discount(rank), contribution, cumulative, where.get(docid)
            )
        )
    return tuple(rows)


def window_ndcg(grades: Sequence[int | None], judged: Sequence[int], contract: Contract) -> float:
    """The nDCG@10 of the best order of the run's top 100 (what a perfect reranker reaches)."""
    best_order = sorted((g for g in grades[:DEPTH] if g is not None), reverse=True)
    return order_values(best_order, judged, contract)["ndcg@10"]


def _headroom(
    ranking: Sequence[str],
    grades: Sequence[int | None],
    judged: Sequence[int],
    contract: Contract,
    ndcg_now: float,
    best: float,
) -> Headroom:
    window = [g if g is not None else -1 for g in grades[:DEPTH]]
    top = max(window, default=-1)
    if top <= 0:  # nothing in the window gains anything: no move helps
        return Headroom(None, None, None, ndcg_now, ndcg_now, best)
    at = window.index(top)  # the earliest of the best: the smallest move
    moved = [grades[at], *grades[:at], *grades[at + 1 :]]
    after = order_values(moved, judged, contract)["ndcg@10"]
    return Headroom(ranking[at], top, at + 1, ndcg_now, after, best)


def _diagnose(
    grades: Sequence[int | None], ndcg: float, best: float, n_rel: int, contract: Contract
) -> Diagnosis:
    threshold = contract.rel_threshold
    relevant_ranks = [r for r, g in enumerate(grades, 1) if g is not None and g >= threshold]
    in_depth = sum(1 for r in relevant_ranks if r <= DEPTH)
    buried = sum(1 for r in relevant_ranks if K < r <= DEPTH)
    missing = n_rel - in_depth
    if n_rel == 0:
        sentence = (
            "No document of this query is judged relevant in this release: nDCG@10, "
            "recall@100, MRR and AP are 0 and tell nothing about the run."
        )
        return Diagnosis("no_relevant", sentence, 0.0, 0.0, 0, 0)
    ranking_loss = max(best - ndcg, 0.0)
    retrieval_loss = max(1.0 - best, 0.0)
    failure = _failure(ranking_loss, retrieval_loss)
    sentence = _sentence(failure, n_rel, missing, buried, ranking_loss, retrieval_loss)
    return Diagnosis(failure, sentence, ranking_loss, retrieval_loss, missing, buried)


_NEGLIGIBLE = 0.005  # below half a point of nDCG@10 a loss is not worth naming


def _failure(ranking_loss: float, retrieval_loss: float) -> Failure:
    if max(ranking_loss, retrieval_loss) < _NEGLIGIBLE:
        return "none"
    return "ranking" if ranking_loss >= retrieval_loss else "retrieval"


def _sentence(
    failure: Failure, n_rel: int, missing: int, buried: int, ranking: float, retrieval: float
) -> str:
    counts = (
        f"{n_rel - missing} of the {n_rel} relevant documents are in the top {DEPTH} "
        f"({buried} of them below rank {K}); {missing} are not."
    )
    if failure == "none":
        return f"Neither a ranking nor a retrieval failure: nDCG@10 is at its best. {counts}"
    split = (
        f"Of the nDCG@10 lost, {ranking:.3f} is ranking (a perfect reordering of the top "
        f"{DEPTH} wins it back) and {retrieval:.3f} retrieval (it needs documents the top "
        f"{DEPTH} does not hold)."
    )
    if failure == "ranking":
        lead = "A ranking failure: the relevant documents were retrieved but ranked low, "
        lead += "so a reranker can fix it."
    else:
        lead = "A retrieval failure: relevant documents are not in the top 100, so no "
        lead += "reranker can bring them back; the first stage must find them."
    return f"{lead} {counts} {split}"
