"""The seed's worked examples not already reproduced by the other core tests.

Each test feeds the numbers the book states to the product's pure core and asserts the number
the book prints, to the precision it prints. The book's display tables and formulas were lost
from the text; where a test has to restore an input the comment says which and why.
The examples covered elsewhere: nDCG of systems A and B, IDCG 11.567, recall, p@10, MRR, AP,
binary nDCG, hit rate (test_measures); kappa 0.70 and 0.52, 82 % chance agreement
(test_kappa); noise floor, sample size, sign tests, bootstrap, gate, 56 datasets
(test_stats); the BM25 scores, K and idf (test_baselines); the judging budget
(test_pooling_core).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from evaluation.measures import Contract, RunScores, evaluate
from formats.trec import RunRow
from pooling.baselines import BM25_K1, bm25_length_factor, bm25_term_score
from pooling.pooling import depth_pool, judging_budget
from sampling.draw import DEFAULT_QUOTAS, inclusion_probabilities

ALL = ["ndcg@10", "ndcg@5", "recall@5", "recall@10", "p@5", "p@10", "hit@5", "mrr", "map"]
ALL += ["judged@10"]

# Chapter 3's systems: the grades of the documents at ranks 1..10.
SYSTEM_A = [2, 0, 3, 1, 0, 2, 0, 1, 0, 1]


def ranked(qid: str, docids: Sequence[str]) -> list[RunRow]:
    """Rows whose scores fall with rank: docids[0] first."""
    return [RunRow(qid, d, r, float(len(docids) - r), "t") for r, d in enumerate(docids, 1)]


def score(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[RunRow]],
    measures: Sequence[str] = ALL,
    /,
    **contract: Any,
) -> RunScores:
    return evaluate(qrels, run, measures, Contract(**contract))


def one_query(grades: Sequence[int]) -> tuple[dict, dict]:
    """One query whose run lists d0, d1, ... with these grades (grade-0 documents judged)."""
    docids = [f"d{i}" for i in range(len(grades))]
    return {"q": dict(zip(docids, grades, strict=True))}, {"q": ranked("q", docids)}


def ndcg(grades: Sequence[int], measure: str = "ndcg@10", **contract: Any) -> float:
    return score(*one_query(grades), [measure], **contract).mean[measure]


# --------------------------------------------------------------------------- chapter 2, BM25


def test_it_saturates_repetition_like_chapter_2_idea_2() -> None:
    # Lines 190-192: at average length K = k1 = 1.2, and the term factor
    # tf (k1 + 1) / (tf + k1) is 1.000 for one occurrence; the second buys 0.375 more
    # (4.4 / 3.2 = 1.375) and the tenth about 0.02 (22 / 11.2 - 19.8 / 10.2 = 0.0231).
    K = bm25_length_factor(220, 220)
    assert pytest.approx(BM25_K1) == K

    def factor(tf: int) -> float:
        return bm25_term_score(tf, 1.0, K)  # idf 1 leaves the term factor alone

    assert round(factor(1), 3) == 1.000
    assert round(factor(2) - factor(1), 3) == 0.375
    assert round(factor(10) - factor(9), 2) == 0.02


def test_it_discounts_a_document_twice_the_average_length() -> None:
    # Lines 194-196: |d| = 2 avgdl gives K = 1.2 (0.25 + 0.75 * 2) = 2.1, so two mentions
    # score 4.4 / 4.1 = 1.073 "against 1.375 in an average-length document". The 1.073 itself
    # was in a lost display; the 1.375 survives.
    long = bm25_term_score(2, 1.0, bm25_length_factor(440, 220))
    average = bm25_term_score(2, 1.0, bm25_length_factor(220, 220))
    assert round(bm25_length_factor(440, 220), 2) == 2.10
    assert (round(long, 3), round(average, 3)) == (1.073, 1.375)


# --------------------------------------------------------------------------- chapter 3


def test_it_discounts_rank_10_to_0_2891() -> None:
    # Step 3 (lines 268-270): the logarithmic discount 1 / log2(i + 1); rank 10 is worth
    # 0.2891 of rank 1. A lone grade-1 document at rank r scores nDCG = its discount (IDCG 1).
    table = [round(ndcg([0] * (r - 1) + [1]), 4) for r in range(1, 11)]
    expected = [1.0, 0.6309, 0.5, 0.4307, 0.3869, 0.3562, 0.3333, 0.3155, 0.301, 0.2891]
    assert table == expected


@pytest.mark.parametrize(
    ("gain", "single", "ratio"), [("exponential", 7.0, 3.285), ("linear", 3.0, 1.408)]
)
def test_it_values_one_perfect_document_against_three_marginal_ones(
    gain: str, single: float, ratio: float
) -> None:
    # Step 4 (lines 276-280): one grade-3 document at rank 1 is worth 2^3 - 1 = 7 (3 under
    # linear gain); three grade-1 documents at ranks 1-3 are worth 1 + 1/log2 3 + 1/2 =
    # 2.131 under either gain. Same judgments, same IDCG: the nDCG ratio is the DCG ratio.
    qrels = {"q": {"perfect": 3, "m1": 1, "m2": 1, "m3": 1}}
    one = score(qrels, {"q": ranked("q", ["perfect", "x1", "x2"])}, ["ndcg@10"], gain=gain)
    trio = score(qrels, {"q": ranked("q", ["m1", "m2", "m3"])}, ["ndcg@10"], gain=gain)
    measured = one.mean["ndcg@10"] / trio.mean["ndcg@10"]
    assert round(measured, 3) == ratio
    assert round(single / measured, 3) == 2.131  # the trio's DCG
    # "Under exponential gain the single perfect document is worth more than three times
    # the trio"; under linear gain "a far closer call".
    assert (measured > 3) == (gain == "exponential")


def test_it_checks_the_division_of_step_a5_the_slow_way() -> None:
    # Line 310: 11.56653 x 0.74 = 8.55923, leaving 0.04460; 0.04460 / 11.56653 = 0.00386.
    value = ndcg(SYSTEM_A)
    dcg = sum((2**g - 1) / math.log2(r + 1) for r, g in enumerate(SYSTEM_A, 1))
    idcg = dcg / value
    assert round(idcg, 5) == 11.56653
    assert round(idcg * 0.74, 5) == 8.55923
    assert round(dcg - idcg * 0.74, 5) == 0.04460
    assert round(0.74 + round(dcg - idcg * 0.74, 5) / idcg, 5) == 0.74386


# --------------------------------------------------------------------------- chapter 4


def test_it_caps_precision_at_0_1_when_one_document_is_relevant() -> None:
    # Line 369: one relevant document in the collection, so "the best achievable
    # precision@10 is 1 / 10 = 0.100 -- a perfect system scores 0.1".
    mean = score(*one_query([1] + [0] * 9), ["p@10", "ndcg@10", "recall@10"]).mean
    assert round(mean["p@10"], 3) == 0.100
    assert mean["ndcg@10"] == mean["recall@10"] == 1.0  # and it is perfect


def test_it_computes_ap_as_the_area_under_the_precision_recall_steps() -> None:
    # Lines 435-437: AP is the Riemann sum of precision over recall steps of 1/R. With every
    # relevant document retrieved, scikit-learn's step-wise area is the same number: 0.7181.
    ours = score(*one_query(SYSTEM_A), ["map"]).mean["map"]
    relevant = [g >= 1 for g in SYSTEM_A]
    reference = average_precision_score(relevant, np.arange(10, 0, -1))
    assert round(ours, 4) == round(float(reference), 4) == 0.7181


# --------------------------------------------------------------------------- chapter 7


def test_it_puts_90_of_300_proportional_slots_on_100_head_queries() -> None:
    # Step 1 (lines 680-682): sampling 300 queries proportionally to volume puts 90 of them
    # on the 100 distinct head queries, "30% of your budget". The traffic table was lost;
    # what the prose keeps is 100 head queries carrying 30 % of the volume. Restored with
    # 100 head queries of 30 searches each and 7,000 single searches for the rest.
    volume = np.array([30] * 100 + [1] * 7_000)
    pi = inclusion_probabilities(volume, 300)
    assert pi.sum() == pytest.approx(300)
    assert pi[:100].sum() == pytest.approx(90)  # expected head queries in the sample
    assert round(pi[:100].sum() / 300, 2) == 0.30


def test_it_defaults_to_three_hundred_queries_with_thirty_known_failures() -> None:
    # Lines 672 and 684: "roughly three hundred queries", and thirty known failures "worth
    # three hundred head queries".
    assert sum(DEFAULT_QUOTAS.values()) == 300
    assert DEFAULT_QUOTAS["failures"] == 30


@pytest.mark.parametrize(("overlap", "pairs"), [(False, 9_000), (True, 3_000)])
def test_it_pools_three_systems_top_10_over_300_queries(overlap: bool, pairs: int) -> None:
    # Step 2 (lines 688-694): three systems (BM25, the current model, the candidate), each
    # one's top k = 10, judge the union: at most 3 x 10 x 300 = 9,000 pairs (no overlap),
    # at least 3,000 (all three agree); 20 % more for the double-judged subset.
    systems = ("bm25", "current", "candidate")
    runs = {
        name: {
            f"q{q}": ranked(f"q{q}", [f"{'' if overlap else name}-{q}-{i}" for i in range(20)])
            for q in range(300)
        }
        for name in systems
    }
    pool = depth_pool(runs, depth=10)
    assert len(pool) == pairs
    budget = judging_budget(len(pool))
    assert budget.total_judgments == round(pairs * 1.2)


def test_it_shows_the_28_percent_the_generator_cannot_answer() -> None:
    # Step 6 (line 734): recall@5 of 0.72 means 28 % of the queries never had the evidence
    # in the context. One relevant document per query, in the top 5 for 72 of 100.
    qrels, run = {}, {}
    for q in range(100):
        qid, docs = f"q{q}", [f"d{i}" for i in range(10)]
        run[qid] = ranked(qid, docs)
        qrels[qid] = {docs[1] if q < 72 else docs[7]: 1}
    result = score(qrels, run, ["recall@5", "hit@5"])
    assert round(result.mean["recall@5"], 2) == round(result.mean["hit@5"], 2) == 0.72
    missed = sum(values["recall@5"] == 0 for values in result.per_query.values())
    assert missed / len(result.per_query) == 0.28


# --------------------------------------------------------------------------- chapter 8


def test_it_scores_the_ideal_order_exactly_one() -> None:
    # Experiment 1 (line 780): "ideal order" reads exactly 1.000.
    assert ndcg(sorted(SYSTEM_A, reverse=True)) == pytest.approx(1.0, abs=1e-15)
    assert round(ndcg(sorted(SYSTEM_A, reverse=True)), 3) == 1.000


def test_it_charges_52_percent_of_the_penalty_for_one_position() -> None:
    # Experiment 2 (line 784): a lone grade-3 document at rank 1 vs 2 costs 7 (1 - 1/log2 3)
    # = 2.58 of the 7 (1 - 1/log2 11) = 4.98 possible: 52 %.
    def dcg_at(rank: int) -> float:
        return 7 * ndcg([0] * (rank - 1) + [3])

    step, total = dcg_at(1) - dcg_at(2), dcg_at(1) - dcg_at(10)
    assert (round(step, 2), round(total, 2)) == (2.58, 4.98)
    assert round(step / total, 2) == 0.52


def test_it_keeps_the_worst_order_well_above_zero() -> None:
    # Experiment 5 (line 790): the widget's ten documents (system A's) in "worst order" still
    # score "near 0.4" (4.9494 / 11.56653 = 0.428), because rank 10's discount is 0.289.
    worst = ndcg(sorted(SYSTEM_A))
    assert round(worst, 1) == 0.4
    assert round(worst, 3) == 0.428
    assert round(ndcg([0] * 9 + [1]), 3) == 0.289


def test_it_ignores_swapping_two_irrelevant_documents() -> None:
    # Experiment 6 (line 792): every metric is blind to the order of grade-0 documents.
    # System A holds zeros at ranks 5 and 7; the two trade places.
    qrels, run = one_query(SYSTEM_A)
    assert SYSTEM_A[4] == SYSTEM_A[6] == 0
    order = [f"d{i}" for i in range(10)]
    order[4], order[6] = order[6], order[4]
    assert score(qrels, {"q": ranked("q", order)}).per_query == score(qrels, run).per_query
