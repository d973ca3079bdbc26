"""Measures: the seed's worked examples, the contract's semantics, properties, and parity with
trec_eval (through pytrec_eval), ranx and ir_measures; plus the fast file readers."""

from __future__ import annotations

import gzip
import math
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.measures import Contract, RunScores, evaluate, evaluate_files, parse_measures
from formats import blocks
from formats.trec import (
    FormatError,
    QrelsTable,
    RunRow,
    RunTable,
    read_qrels,
    read_qrels_table,
    read_run,
    read_run_table,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "trec-dl-2019-passage").exists(),
    reason="real TREC DL data (../shared/data) not present",
)

ALL = ["ndcg@10", "ndcg@3", "recall@5", "recall@10", "p@5", "p@10", "hit@1", "hit@5"]
ALL += ["judged@5", "judged@10", "mrr", "mrr@3", "map"]

# System A and B of the seed's chapter 3: grades of the documents at ranks 1..10; the six
# judged documents (one 3, two 2s, three 1s) sit at ranks 1, 3, 4, 6, 8, 10 in both.
SYSTEM_A = [2, 0, 3, 1, 0, 2, 0, 1, 0, 1]
SYSTEM_B = [3, 0, 2, 2, 0, 1, 0, 1, 0, 1]


def ranked(qid: str, docids: Sequence[str], tag: str = "t") -> list[RunRow]:
    """Rows whose scores fall with rank: docids[0] first."""
    return [RunRow(qid, d, r, float(len(docids) - r), tag) for r, d in enumerate(docids, 1)]


def one_query(grades: Sequence[int], judged_only: bool = True) -> tuple[dict, dict]:
    """A query whose run lists d0..d9 with the given grades; grade-0 docs unjudged if asked."""
    run = {"q": ranked("q", [f"d{i}" for i in range(len(grades))])}
    qrels = {"q": {f"d{i}": g for i, g in enumerate(grades) if g or not judged_only}}
    return qrels, run


def score(qrels: Mapping, run: Mapping, measures: Sequence[str] = ALL, **contract) -> RunScores:
    return evaluate(qrels, run, measures, Contract(**contract))


# --------------------------------------------------------------------------- chapter 3


def test_it_reproduces_the_ndcg_of_system_a_to_the_digit():
    qrels, run = one_query(SYSTEM_A)
    # DCG 8.60383 / IDCG 11.56653 = 0.74386 (the seed's step A5), 0.744 rounded.
    assert round(score(qrels, run).mean["ndcg@10"], 5) == 0.74386
    assert round(score(qrels, run).mean["ndcg@10"], 3) == 0.744


def test_it_reproduces_the_ndcg_of_system_b():
    qrels, run = one_query(SYSTEM_B)
    assert round(score(qrels, run).mean["ndcg@10"], 3) == 0.930


def test_it_takes_the_ideal_dcg_from_the_judgments_not_the_run():
    # Experiment 7: IDCG@10 = 11.567 whatever the ranking; A's DCG is 0.74386 of it.
    qrels, run = one_query(SYSTEM_A)
    ndcg = score(qrels, run).mean["ndcg@10"]
    dcg = sum((2**g - 1) / math.log2(r + 1) for r, g in enumerate(SYSTEM_A, 1))
    assert dcg / ndcg == pytest.approx(11.56653, abs=1e-5)


def test_it_scores_a_single_marginal_document_at_rank_one_as_perfect():
    qrels, run = one_query([1, 0, 0])
    assert score(qrels, run).mean["ndcg@10"] == 1.0


def test_it_charges_half_the_possible_loss_for_the_first_step_down():
    # Experiment 2: only a grade-3 document judged; moving it from rank 1 to 2 costs 2.58 of
    # the 4.98 DCG points it can lose within the top 10.
    def dcg_at(rank: int) -> float:
        grades = [0] * 10
        grades[rank - 1] = 3
        return 7 * score(*one_query(grades), ["ndcg@10"]).mean["ndcg@10"]

    assert dcg_at(1) - dcg_at(2) == pytest.approx(2.58, abs=0.005)
    assert dcg_at(1) - dcg_at(10) == pytest.approx(4.98, abs=0.005)


# --------------------------------------------------------------------------- chapter 4


@pytest.mark.parametrize("system", [SYSTEM_A, SYSTEM_B], ids=["A", "B"])
def test_it_gives_a_and_b_the_same_binary_measures(system):
    mean = score(*one_query(system)).mean
    assert mean["recall@10"] == 1.0  # all six relevant documents in the window
    assert mean["recall@5"] == 0.5  # ranks 1, 3, 4
    assert mean["p@10"] == 0.6
    assert mean["mrr"] == 1.0
    # AP = (1/1 + 2/3 + 3/4 + 4/6 + 5/8 + 6/10) / 6 = 0.7181
    assert round(mean["map"], 4) == 0.7181


def test_it_counts_the_relevant_documents_a_run_misses_in_average_precision():
    # The seed's q2 rule: four relevant documents, three found (ranks 1, 3, 6): three terms
    # in the sum, denominator 4.
    run = {"q2": ranked("q2", ["r1", "x", "r2", "y", "z", "r3"])}
    qrels = {"q2": {"r1": 1, "r2": 1, "r3": 1, "r4": 1}}
    assert score(qrels, run).mean["map"] == pytest.approx((1 / 1 + 2 / 3 + 3 / 6) / 4)


def test_it_makes_mrr_violently_nonlinear():
    def rr(rank: int) -> float:
        return score(*one_query([0] * (rank - 1) + [1]), ["mrr"]).mean["mrr"]

    assert rr(1) - rr(2) == 0.5
    assert rr(9) - rr(10) == pytest.approx(0.0111, abs=1e-4)


def test_it_reproduces_the_hit_rate_of_213_out_of_300_queries():
    run, qrels = {}, {}
    for i in range(300):
        qid = f"q{i}"
        # 213 queries have their answer at rank 3, the others at rank 8.
        docs = [f"d{j}" for j in range(10)]
        run[qid] = ranked(qid, docs)
        qrels[qid] = {docs[2] if i < 213 else docs[7]: 1}
    assert score(qrels, run, ["hit@5"]).mean["hit@5"] == pytest.approx(0.71)


def test_it_equals_recall_when_every_query_has_one_relevant_document():
    run = {f"q{i}": ranked(f"q{i}", [f"d{j}" for j in range(10)]) for i in range(20)}
    qrels = {f"q{i}": {f"d{i % 10}": 1} for i in range(20)}
    mean = score(qrels, run, ["hit@5", "recall@5"]).mean
    assert mean["hit@5"] == mean["recall@5"] == 0.5


# --------------------------------------------------------------------------- chapter 8


@pytest.mark.parametrize("system", [SYSTEM_A, SYSTEM_B], ids=["A", "B"])
def test_it_goes_blind_like_the_binary_measures_once_grades_collapse(system):
    # Experiment 9: every grade >= 1 becomes 1; A and B both score 0.8749.
    binary = [1 if g else 0 for g in system]
    assert round(score(*one_query(binary)).mean["ndcg@10"], 4) == 0.8749


def test_it_collapses_to_the_same_ndcg_with_linear_gain():
    # With grades 0/1, 2^g - 1 = g: the gain choice stops mattering.
    binary = one_query([1 if g else 0 for g in SYSTEM_A])
    assert score(*binary, gain="linear").mean == score(*binary).mean


# --------------------------------------------------------------------------- the contract


def test_it_uses_linear_gain_on_request():
    qrels, run = one_query(SYSTEM_A)
    dcg = sum(g / math.log2(r + 1) for r, g in enumerate(SYSTEM_A, 1))
    idcg = sum(g / math.log2(r + 1) for r, g in enumerate([3, 2, 2, 1, 1, 1], 1))
    assert score(qrels, run, gain="linear").mean["ndcg@10"] == pytest.approx(dcg / idcg)


def test_it_applies_the_threshold_to_binary_measures_but_not_to_ndcg():
    # Grades 2, 1, 3 at ranks 1-3. Threshold 2: relevant are ranks 1 and 3 (R = 2).
    qrels, run = one_query([2, 1, 3])
    at1, at2 = score(qrels, run), score(qrels, run, rel_threshold=2)
    assert at2.mean["ndcg@10"] == at1.mean["ndcg@10"]
    assert at2.mean["map"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert at1.mean["map"] == 1.0
    assert at2.mean["p@5"] == 2 / 5
    assert at2.mean["mrr"] == 1.0


def test_it_skips_queries_without_a_relevant_document_by_default():
    qrels = {"good": {"d0": 1}, "none": {"d0": 0, "d1": 0}}
    run = {q: ranked(q, ["d0", "d1"]) for q in qrels}
    result = score(qrels, run)
    assert (result.scored, result.skipped_no_relevant, result.no_relevant) == (1, 1, 1)
    assert set(result.per_query) == {"good"}
    assert result.mean["map"] == 1.0


def test_it_scores_queries_without_a_relevant_document_zero_on_request():
    qrels = {"good": {"d0": 1}, "none": {"d0": 0, "d1": 0}}
    run = {q: ranked(q, ["d0", "d1"]) for q in qrels}
    result = score(qrels, run, empty="zero")
    assert (result.scored, result.skipped_no_relevant, result.no_relevant) == (2, 0, 1)
    assert result.per_query["none"]["map"] == 0.0
    assert result.mean["map"] == 0.5
    # Judged documents, even all graded 0, are still judged.
    assert result.per_query["none"]["judged@10"] == 1.0


def test_it_keeps_the_graded_ndcg_of_a_query_without_relevant_documents():
    # Threshold 2, only a grade-1 document: no relevant document, but nDCG sees the grade
    # (trec_eval computes nDCG from the grades whatever the level).
    qrels, run = one_query([1, 0])
    result = score(qrels, run, rel_threshold=2, empty="zero")
    assert result.per_query["q"]["ndcg@10"] == 1.0
    assert result.per_query["q"]["map"] == 0.0


def test_it_scores_queries_missing_from_the_run_zero_and_counts_them():
    qrels = {"here": {"d0": 1}, "gone": {"d0": 1}}
    run = {"here": ranked("here", ["d0"])}
    result = score(qrels, run)
    assert (result.scored, result.missing_from_run) == (2, 1)
    assert all(v == 0.0 for v in result.per_query["gone"].values())
    assert result.mean["ndcg@10"] == 0.5


def test_it_ignores_queries_the_qrels_do_not_have():
    qrels = {"q": {"d0": 1}}
    run = {"q": ranked("q", ["d0"]), "stray": ranked("stray", ["d0"])}
    result = score(qrels, run)
    assert (result.scored, result.not_in_qrels) == (1, 1)
    assert set(result.per_query) == {"q"}


def test_it_treats_negative_grades_as_judged_and_not_relevant():
    qrels = {"q": {"d0": -2, "d1": 2}}
    run = {"q": ranked("q", ["d0", "d1"])}
    result = score(qrels, run)
    assert result.mean["mrr"] == 0.5
    assert result.mean["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert result.mean["judged@10"] == 1.0


def test_it_orders_ties_by_docid_descending_whatever_the_rank_column_says():
    qrels = {"q": {"a": 1}}
    rows = [RunRow("q", "a", 1, 5.0, "t"), RunRow("q", "b", 2, 5.0, "t")]
    assert score(qrels, {"q": rows}, ["mrr"]).mean["mrr"] == 0.5  # "b" > "a" goes first


def test_it_orders_by_score_not_by_the_rank_column():
    rows = [RunRow("q", "a", 1, 1.0, "t"), RunRow("q", "b", 2, 9.0, "t")]
    assert score({"q": {"a": 1}}, {"q": rows}, ["mrr"]).mean["mrr"] == 0.5


def test_it_compares_scores_in_single_precision_as_trec_eval_does():
    # 1.0 and 1.0 + 2**-40 differ as doubles but not as C floats: a tie, so docid decides.
    rows = [RunRow("q", "a", 1, 1.0 + 2**-40, "t"), RunRow("q", "b", 2, 1.0, "t")]
    assert score({"q": {"a": 1}}, {"q": rows}, ["mrr"]).mean["mrr"] == 0.5


def test_it_divides_precision_by_k_even_for_a_short_run():
    qrels, run = one_query([1, 1])
    assert score(qrels, run).mean["p@10"] == 0.2


def test_it_divides_judged_by_the_documents_retrieved_when_fewer_than_k():
    # ir_measures' Judged@k: 2 of the 3 retrieved documents are judged.
    qrels = {"q": {"a": 1, "c": 0}}
    run = {"q": ranked("q", ["a", "x", "c"])}
    mean = score(qrels, run).mean
    assert mean["judged@10"] == pytest.approx(2 / 3)
    assert mean["judged@5"] == pytest.approx(2 / 3)


def test_it_cuts_reciprocal_rank_at_k():
    qrels, run = one_query([0, 0, 0, 1])
    mean = score(qrels, run).mean
    assert (mean["mrr"], mean["mrr@3"]) == (0.25, 0.0)


def test_it_refuses_a_document_listed_twice_for_a_query():
    rows = [RunRow("q", "a", 1, 2.0, "t"), RunRow("q", "a", 2, 1.0, "t")]
    with pytest.raises(ValueError, match="twice"):
        score({"q": {"a": 1}}, {"q": rows})


def test_it_refuses_a_score_that_is_not_finite():
    with pytest.raises(ValueError, match="finite"):
        score({"q": {"a": 1}}, {"q": [RunRow("q", "a", 1, math.nan, "t")]})


def test_it_returns_nan_means_when_no_query_counts():
    result = score({"q": {"a": 0}}, {"q": ranked("q", ["a"])})
    assert result.scored == 0 and math.isnan(result.mean["map"])


# --------------------------------------------------------------------------- names, contract


def test_it_canonicalises_measure_names():
    assert parse_measures("NDCG@010, p@5,mrr,map,P@5") == ["ndcg@10", "p@5", "mrr", "map"]
    assert parse_measures(["hit@5,judged@10", "mrr@3"]) == ["hit@5", "judged@10", "mrr@3"]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("ndcg", "needs a cutoff"),
        ("ndcg@0", "positive integer"),
        ("recall@x", "positive integer"),
        ("map@10", "no cutoff"),
        ("bpref", "unknown measure 'bpref'"),
        ("", "no measure"),
    ],
)
def test_it_explains_bad_measure_names(spec, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_measures(spec)


def test_it_refuses_an_unknown_contract():
    with pytest.raises(ValueError, match="gain"):
        Contract(gain="cubic")
    with pytest.raises(ValueError, match="empty"):
        Contract(empty="drop")
    with pytest.raises(ValueError, match="integer"):
        Contract(rel_threshold=1.5)


def test_it_describes_the_contract():
    terms = Contract(gain="linear", rel_threshold=2, empty="zero").as_dict()
    assert {"gain": "linear", "rel_threshold": 2, "empty": "zero"}.items() <= terms.items()
    assert "log2(rank + 1)" in str(terms["discount"])


# --------------------------------------------------------------------------- a reference


def reference(qrels: Mapping, run: Mapping, measures: Sequence[str], c: Contract) -> dict:
    """Every measure straight from its formula, one query at a time, in plain Python."""

    def gain(g: int) -> float:
        g = max(g, 0)
        return 2.0**g - 1 if c.gain == "exponential" else float(g)

    def dcg(grades: Sequence[int], k: int) -> float:
        return sum(gain(g) / math.log2(r + 1) for r, g in enumerate(grades[:k], 1))

    out = {}
    for qid, judged in qrels.items():
        n_rel = sum(g >= c.rel_threshold for g in judged.values())
        if not n_rel and c.empty == "skip":
            continue
        rows = sorted(
            run.get(qid, []), key=lambda r: (float(np.float32(r.score)), r.docid), reverse=True
        )
        docs = [r.docid for r in rows]
        grades = [judged.get(d, 0) for d in docs]
        rel = [d in judged and judged[d] >= c.rel_threshold for d in docs]
        first = next((r for r, x in enumerate(rel, 1) if x), 0)
        values = {}
        for name in measures:
            kind, _, cut = name.partition("@")
            k = int(cut) if cut else 0
            if kind == "ndcg":
                ideal = dcg(sorted(judged.values(), reverse=True), k)
                values[name] = dcg(grades, k) / ideal if ideal else 0.0
            elif kind == "recall":
                values[name] = sum(rel[:k]) / n_rel if n_rel else 0.0
            elif kind == "p":
                values[name] = sum(rel[:k]) / k
            elif kind == "hit":
                values[name] = float(any(rel[:k]))
            elif kind == "judged":
                top = docs[:k]
                values[name] = sum(d in judged for d in top) / len(top) if top else 0.0
            elif kind == "mrr":
                values[name] = 1 / first if first and (not k or first <= k) else 0.0
            else:
                hits = [sum(rel[:r]) / r for r, x in enumerate(rel, 1) if x]
                values[name] = sum(hits) / n_rel if n_rel else 0.0
        out[qid] = values
    return out


DOCS = ["a", "b", "c", "d", "e", "f", "g", "h", "longer-than-eight", "longer-than-eightz"]
SCORES = [0.5, 1.0, 1.0, 2.0, 3.0, 3.0 + 2**-30]  # ties, and a near-tie only doubles tell apart


@st.composite
def cases(draw):
    n_queries = draw(st.integers(1, 4))
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(-1, 3), max_size=6))
        if judged or draw(st.booleans()):
            qrels[qid] = judged or {"a": 0}
        if draw(st.integers(0, 4)):
            docs = draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=len(DOCS)))
            rows = [RunRow(qid, d, 1, draw(st.sampled_from(SCORES)), "t") for d in docs]
            run[qid] = draw(st.permutations(rows))
    contract = Contract(
        gain=draw(st.sampled_from(["exponential", "linear"])),
        rel_threshold=draw(st.integers(1, 3)),
        empty=draw(st.sampled_from(["skip", "zero"])),
    )
    return qrels, run, contract


@settings(max_examples=300, deadline=None)
@given(cases())
def test_it_agrees_with_the_formulas_computed_one_query_at_a_time(case):
    qrels, run, contract = case
    result = evaluate(qrels, run, ALL, contract)
    expected = reference(qrels, run, ALL, contract)
    assert result.per_query.keys() == expected.keys()
    for qid, values in expected.items():
        assert result.per_query[qid] == pytest.approx(values, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(cases())
def test_it_keeps_every_measure_between_zero_and_one(case):
    qrels, run, contract = case
    for values in evaluate(qrels, run, ALL, contract).per_query.values():
        assert all(0.0 <= v <= 1.0 for v in values.values())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.sampled_from([1, 3, 5, 10]))
def test_it_scores_the_ideal_ordering_one(grades, k):
    if not any(grades):
        grades = [*grades, 1]
    docs = [f"d{i}" for i in range(len(grades))]
    order = sorted(range(len(grades)), key=lambda i: -grades[i])
    run = {"q": ranked("q", [docs[i] for i in order])}
    qrels = {"q": dict(zip(docs, grades, strict=True))}
    for gain in ("exponential", "linear"):
        assert score(qrels, run, [f"ndcg@{k}"], gain=gain).mean[f"ndcg@{k}"] == pytest.approx(1)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([None, 0, 1, 2, 3]), min_size=1, max_size=12), st.randoms())
def test_it_is_blind_to_the_order_of_unjudged_and_zero_grade_documents(labels, rnd):
    # labels[r]: the grade of the document at rank r + 1, None for unjudged.
    docs = [f"d{i:02}" for i in range(len(labels))]
    qrels = {"q": {d: g for d, g in zip(docs, labels, strict=True) if g is not None}}
    qrels["q"].setdefault("elsewhere", 1)  # a relevant document the run misses
    before = score(qrels, {"q": ranked("q", docs)})
    for kinds, measures in (([None], ALL), ([0], ALL), ([None, 0], _without_judged(ALL))):
        shuffled = _shuffle_among(docs, labels, kinds, rnd)
        after = score(qrels, {"q": ranked("q", shuffled)}, measures)
        assert after.mean == pytest.approx({m: before.mean[m] for m in measures}, abs=1e-12)


def _without_judged(measures: Sequence[str]) -> list[str]:
    # Swapping an unjudged document with a judged grade-0 one moves a judgment in or out
    # of the top k: only judged@k sees that.
    return [m for m in measures if not m.startswith("judged")]


def _shuffle_among(docs: list[str], labels: list, kinds: list, rnd: random.Random) -> list[str]:
    slots = [i for i, g in enumerate(labels) if g in kinds]
    moved = [docs[i] for i in slots]
    rnd.shuffle(moved)
    out = list(docs)
    for i, d in zip(slots, moved, strict=True):
        out[i] = d
    return out


# --------------------------------------------------------------------------- files


def write_run(path: Path, rows: Sequence[RunRow], sep: str = " ", end: str = "\n") -> Path:
    text = end.join(
        sep.join((r.qid, "Q0", r.docid, str(r.rank), repr(r.score), r.tag)) for r in rows
    )
    path.write_text(text + end, encoding="utf-8")
    return path


def write_qrels(path: Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    lines = [f"{q} 0 {d} {g}" for q, judged in qrels.items() for d, g in judged.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cases(), st.booleans())
def test_it_scores_files_as_it_scores_mappings(tmp_path, case, shuffle_lines):
    qrels, run, contract = case
    if not qrels:
        return
    rows = [row for rows in run.values() for row in rows]
    if shuffle_lines:
        random.Random(len(rows)).shuffle(rows)  # queries not grouped: the whole-table path
    run_path = write_run(tmp_path / "run.txt", rows)
    qrels_path = write_qrels(tmp_path / "qrels.txt", qrels)
    from_files = evaluate_files(qrels_path, [run_path], ALL, contract)[str(run_path)]
    assert_same(from_files, evaluate(qrels, run, ALL, contract))


def assert_same(a: RunScores, b: RunScores) -> None:
    """Equal scores, a mean of no query (NaN) included."""
    assert a.mean == pytest.approx(b.mean, nan_ok=True, abs=0)
    assert replace(a, mean={}) == replace(b, mean={})


def test_it_scores_a_run_spread_over_many_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "_BLOCK", 64)  # a few lines per block: queries span blocks
    rng = random.Random(7)
    run = {
        f"q{q}": ranked(f"q{q}", [f"d{rng.randrange(50)}x{i}" for i in range(20)]) for q in range(9)
    }
    for rows in run.values():  # ties, broken the wrong way in the file
        rows[3:6] = [RunRow(r.qid, r.docid, r.rank, 1.5, r.tag) for r in rows[3:6]]
    qrels = {q: {rows[i].docid: i % 4 for i in range(0, 20, 3)} for q, rows in run.items()}
    run_path = write_run(tmp_path / "run.txt", [r for rows in run.values() for r in rows])
    qrels_path = write_qrels(tmp_path / "qrels.txt", qrels)
    contract = Contract(empty="zero")
    from_files = evaluate_files(qrels_path, [run_path], ALL, contract)[str(run_path)]
    assert_same(from_files, evaluate(qrels, run, ALL, contract))


@pytest.mark.parametrize(
    ("sep", "end", "compress"),
    [(" ", "\n", False), ("\t", "\n", False), (" ", "\r\n", False), (" ", "\n", True)],
    ids=["spaces", "tabs", "crlf", "gzip"],
)
def test_it_reads_runs_like_the_reference_reader(tmp_path, sep, end, compress):
    rows = [
        RunRow("7", "doc-10", 1, 2.5, "x"),
        RunRow("7", "a-very-long-document-identifier", 2, -1e-3, "x"),
        RunRow("3", "b", 1, 17.340200, "x"),
        RunRow("7", "c", 9, 2.5, "x"),
    ]
    path = write_run(tmp_path / "run", rows, sep, end)
    if compress:
        path.write_bytes(gzip.compress(path.read_bytes()))
    assert _rows(read_run_table(path)) == _rows(RunTable.from_mapping(read_run(path)))


@pytest.mark.parametrize(
    "text",
    [
        "q Q0 d 1 1.5 t\n\nq Q0 e 2 1.0 t",  # an empty line, no final newline
        "q  Q0 d 1 1.5 t\n",  # aligned columns
        "q Q0 dé 1 1.5 t\n",  # not ASCII
        "q Q0 d 1 1.5 t\nq Q0 " + "x" * 80 + " 2 1.0 t\n",  # a very long id
        "q Q0 d +1 1e3 t\nq Q0 e -2 .5 t\n",  # signs, exponent
    ],
    ids=["blank-line", "double-space", "utf8", "long-id", "number-forms"],
)
def test_it_reads_unusual_layouts_like_the_reference_reader(tmp_path, text):
    path = tmp_path / "run"
    path.write_text(text, encoding="utf-8")
    assert _rows(read_run_table(path)) == _rows(RunTable.from_mapping(read_run(path)))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("q Q0 d 1 1.5 t\nq Q0 e x 1.0 t\n", 2, "rank 'x' is not an integer"),
        ("q Q0 d 1 1.5 t\nq Q0 e 2 nan t\n", 2, "not a finite number"),
        ("q Q0 d 1 1.5 t\nq Q0 e 2 1.0\n", 2, "expected 6 columns"),
        ("q Q0 d 1 1.5 t\nq Q0 d 2 1.0 t\n", 2, "appears twice"),
    ],
)
def test_it_reports_a_bad_run_line_like_the_reference_reader(tmp_path, text, line, fragment):
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="ascii")
    qrels = write_qrels(tmp_path / "qrels.txt", {"q": {"d": 1}})
    pattern = f"^{re.escape(str(path))}:{line}: .*{re.escape(fragment)}"
    with pytest.raises(FormatError, match=pattern):
        evaluate_files(qrels, [path], ["map"])
    with pytest.raises(FormatError, match=pattern):
        read_run_table(path)


def test_it_reads_long_decimals_in_bulk_to_the_last_bit(tmp_path):
    # Scores longer than eight bytes (repr of a double, many decimals) are read in bulk,
    # byte column by byte column, and must equal float() bit for bit.
    rng = random.Random(3)
    scores = [repr(rng.uniform(-1e4, 1e4)) for _ in range(300)]
    scores += [f"{rng.uniform(0, 100):.{rng.randrange(6, 17)}f}" for _ in range(300)]
    scores += ["0.30000000000000004", "-123456789.123456789", "2.5e-1", "12345678.9"]
    lines = [f"q{i % 7} Q0 d{i} {i} {score} t\n" for i, score in enumerate(scores)]
    path = tmp_path / "run"
    path.write_text("".join(lines), encoding="ascii")
    pieces = list(blocks.run_blocks(path))  # no NotSplit: no line parser involved
    assert [float(s) for s in scores] == np.concatenate([p.scores for p in pieces]).tolist()
    assert _rows(read_run_table(path)) == _rows(RunTable.from_mapping(read_run(path)))


def test_it_reads_qrels_like_the_reference_reader(tmp_path):
    path = write_qrels(tmp_path / "qrels", {"1": {"a": 3, "bb": -1}, "2": {"a": 0}})
    table, reference_table = read_qrels_table(path), QrelsTable.from_mapping(read_qrels(path))
    assert table.qids == reference_table.qids
    assert (table.grades == reference_table.grades).all()
    assert (table.doc_keys == reference_table.doc_keys).all()


def test_it_reports_a_duplicate_judgment_with_its_line(tmp_path):
    path = tmp_path / "qrels"
    path.write_text("1 0 a 1\n1 0 a 2\n", encoding="ascii")
    with pytest.raises(FormatError, match=r":2: document a is judged twice"):
        read_qrels_table(path)


def _rows(table: RunTable) -> list[tuple[str, tuple[int, ...], float]]:
    keys = [tuple(k) for k in table.doc_keys.tolist()]
    width = max((len(k) for k in keys), default=1)
    keys = [k + (0,) * (width - len(k)) for k in keys]
    rows = zip((table.qids[c] for c in table.qid_codes), keys, table.scores.tolist(), strict=True)
    return sorted(rows)


# --------------------------------------------------------------------------- real data


def _dl_sets() -> list[tuple[Path, list[Path]]]:
    sets = []
    for year, qrels in (("2019", "qrels.dl19-passage.txt"), ("2020", "qrels.dl20-passage.txt")):
        folder = DATA / f"trec-dl-{year}-passage"
        sets.append((folder / qrels, sorted((folder / "runs").glob("*.run.gz"))))
    return sets


TREC_NAMES = {
    "ndcg@10": "ndcg_cut_10",
    "recall@100": "recall_100",
    "mrr": "recip_rank",
    "map": "map",
    "p@10": "P_10",
}


@pytest.mark.data
@needs_data
def test_it_matches_trec_eval_on_every_official_dl_run():
    """Every official TREC DL 2019 and 2020 passage run, levels 1 and 2, per query and mean.

    Alignment with trec_eval's conventions: pytrec_eval answers only for queries in both the
    run and the qrels (a query with judgments but no relevant document included, scored 0).
    trec_eval -c also averages over qrels queries missing from the run, as 0. So: our
    per-query value must equal pytrec_eval's for every query pytrec_eval returns, and be 0
    for the qrels queries it does not return (missing from the run); our mean must equal the
    sum of pytrec_eval's values divided by the number of qrels queries. That is our
    ``--gain linear --empty zero`` contract, the one trec_eval computes.
    """
    pytrec_eval = pytest.importorskip("pytrec_eval")
    started = time.monotonic()
    compared = 0
    for qrels_path, runs in _dl_sets():
        assert runs, f"no runs next to {qrels_path}"
        with open(qrels_path) as fh:
            qrels = pytrec_eval.parse_qrel(fh)
        parsed = {}
        for path in runs:
            with gzip.open(path, "rt") as fh:
                parsed[path] = pytrec_eval.parse_run(fh)
        for level in (1, 2):
            wanted = {"ndcg_cut.10", "recall.100", "recip_rank", "map", "P.10"}
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, wanted, relevance_level=level)
            contract = Contract(gain="linear", rel_threshold=level, empty="zero")
            ours = evaluate_files(qrels_path, runs, list(TREC_NAMES), contract)
            for path in runs:
                theirs = evaluator.evaluate(parsed[path])
                result = ours[str(path)]
                assert result.scored == len(qrels)
                for qid, values in result.per_query.items():
                    for name, trec in TREC_NAMES.items():
                        expected = theirs[qid][trec] if qid in theirs else 0.0
                        assert values[name] == pytest.approx(expected, abs=1e-9), (path, qid)
                        compared += 1
                for name, trec in TREC_NAMES.items():
                    mean = sum(v[trec] for v in theirs.values()) / len(qrels)
                    assert result.mean[name] == pytest.approx(mean, abs=1e-9), (path, name)
    assert compared > 40_000
    assert time.monotonic() - started < 120


def _read_run_quickly(path: Path) -> dict[str, list[RunRow]]:
    """read_run's mapping through the fast reader (the reader equivalence is tested above)."""
    table = read_run_table(path)
    docids = table.doc_keys.astype(">u8").view(f"S{8 * table.doc_keys.shape[1]}").ravel()
    run: dict[str, list[RunRow]] = {}
    columns = (table.qid_codes.tolist(), docids.tolist(), table.scores.tolist())
    for code, docid, value in zip(*columns, strict=True):
        qid = table.qids[code]
        run.setdefault(qid, []).append(RunRow(qid, docid.decode(), 0, value, "t"))
    return run


def _no_ties(run: dict[str, list[RunRow]]) -> dict[str, list[RunRow]]:
    """Queries whose scores are all distinct in single precision: where the tie orders of
    ranx and ir_measures (not trec_eval's) cannot show."""
    return {
        q: rows for q, rows in run.items() if len({np.float32(r.score) for r in rows}) == len(rows)
    }


@pytest.mark.data
@needs_data
def test_it_matches_ranx_where_the_definitions_agree():
    """ranx's ndcg_burges is our default exponential nDCG (2^g - 1, log2(rank + 1), ideal from
    the qrels); hit_rate, precision, recall, mrr and map are ours at threshold 1. ranx breaks
    ties its own way, so only queries without ties are compared, and only queries with a
    relevant document (ranx has no 'skip' or 'zero' choice to align)."""
    ranx = pytest.importorskip("ranx")
    qrels_path, runs = _dl_sets()[0]
    qrels = read_qrels(qrels_path)
    names = {
        "ndcg_burges@10": "ndcg@10",
        "hit_rate@5": "hit@5",
        "precision@10": "p@10",
        "recall@100": "recall@100",
        "mrr": "mrr",
        "map": "map",
    }
    compared = 0
    for path in runs:
        run = _no_ties(_read_run_quickly(path))
        common = {q: j for q, j in qrels.items() if q in run and any(g >= 1 for g in j.values())}
        if len(common) < 10 or compared == 4:
            continue
        compared += 1
        ours = evaluate(common, {q: run[q] for q in common}, list(names.values()))
        ranx_qrels = ranx.Qrels(
            {q: {d: g for d, g in j.items() if g > 0} for q, j in common.items()}
        )
        ranx_run = ranx.Run({q: {r.docid: r.score for r in run[q]} for q in common})
        theirs = ranx.evaluate(ranx_qrels, ranx_run, list(names), return_mean=True)
        for their_name, our_name in names.items():
            assert ours.mean[our_name] == pytest.approx(theirs[their_name], abs=1e-9)
    assert compared == 4


@pytest.mark.data
@needs_data
def test_it_matches_ir_measures_judged_and_binary_measures():
    """ir_measures' Judged@k (its own provider: denominator min(k, retrieved)) and P, R, RR,
    AP, Success (pytrec_eval underneath) on tie-free queries; ir_measures sorts ties by
    docid ascending, trec_eval descending."""
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import AP, RR, Judged, P, R, Success

    qrels_path, runs = _dl_sets()[1]
    qrels = read_qrels(qrels_path)
    names = {
        Judged @ 10: "judged@10",
        Judged @ 100: "judged@100",
        P @ 10: "p@10",
        R @ 100: "recall@100",
        RR: "mrr",
        AP: "map",
        Success @ 5: "hit@5",
    }
    compared = 0
    for path in runs:
        run = _no_ties(_read_run_quickly(path))
        common = {q: j for q, j in qrels.items() if q in run and any(g >= 1 for g in j.values())}
        if len(common) < 10 or compared == 4:
            continue
        compared += 1
        ours = evaluate(common, {q: run[q] for q in common}, list(names.values()))
        their_qrels = [ir_measures.Qrel(q, d, g) for q, j in common.items() for d, g in j.items()]
        their_run = [ir_measures.ScoredDoc(q, r.docid, r.score) for q in common for r in run[q]]
        theirs = ir_measures.calc_aggregate(list(names), their_qrels, their_run)
        for measure, our_name in names.items():
            assert ours.mean[our_name] == pytest.approx(theirs[measure], abs=1e-9), measure
    assert compared == 4
