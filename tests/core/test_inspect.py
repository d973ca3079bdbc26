"""The inspector's pure core: the seed's worked example, and its totals against
``measures.evaluate``'s per-query values on real TREC DL 2019 runs and qrels."""

from __future__ import annotations

import math
import random

import pytest

from evaluation.inspect import (
    DEPTH,
    INSPECTED,
    discount,
    gain,
    inspect_query,
    order_values,
)
from evaluation.measures import Contract, evaluate, evaluate_files
from formats.trec import RunRow, read_qrels, read_run
from tests.conftest import DATA

DL19 = DATA / "trec-dl-2019-passage"
needs_data = pytest.mark.skipif(
    not DL19.exists(), reason="real TREC DL 2019 data (../shared/data) not present"
)
RUNS = ["bm25base_p", "idst_bert_p1", "TUW19-p3-re", "ICT-CKNRM_B", "runid3", "p_exp_rm3_bert"]

# The seed's chapter 3: system A's grades at ranks 1..10, the six judged documents.
SYSTEM_A = [2, 0, 3, 1, 0, 2, 0, 1, 0, 1]


def seed_query(grades: list[int]) -> tuple[list[str], dict[str, int]]:
    ranking = [f"d{i}" for i in range(len(grades))]
    return ranking, {f"d{i}": g for i, g in enumerate(grades) if g}


def test_it_reproduces_the_seeds_worked_example() -> None:
    ranking, grades = seed_query(SYSTEM_A)
    seen = inspect_query(ranking, grades)
    assert [row.gain for row in seen.rows] == [3, 0, 7, 1, 0, 3, 0, 1, 0, 1]
    assert seen.idcg == pytest.approx(11.56653, abs=1e-5)
    assert seen.dcg == pytest.approx(8.60383, abs=1e-5)
    assert seen.values["ndcg@10"] == pytest.approx(0.7438, abs=1e-4)
    assert seen.values["map"] == pytest.approx(0.7181, abs=1e-4)
    assert [row.grade for row in seen.ideal] == [3, 2, 2, 1, 1, 1]
    assert [row.run_rank for row in seen.ideal][:1] == [3]


def test_it_gives_each_ranks_gain_discount_contribution_and_cumulative_dcg() -> None:
    ranking, grades = seed_query(SYSTEM_A)
    rows = inspect_query(ranking, grades).rows
    assert rows[0].discount == 1.0
    assert rows[9].discount == pytest.approx(0.2891, abs=1e-4)
    running = 0.0
    for row in rows:
        assert row.contribution == pytest.approx(row.gain * row.discount)
        running += row.contribution
        assert row.cumulative == pytest.approx(running)
    assert [row.grade for row in rows][:2] == [2, None]  # d1 is unjudged


def test_it_names_the_headroom_of_moving_the_best_document_to_rank_1() -> None:
    ranking, grades = seed_query(SYSTEM_A)
    headroom = inspect_query(ranking, grades).headroom
    assert (headroom.docid, headroom.grade, headroom.from_rank) == ("d2", 3, 3)
    moved = [3, 2, 0, 1, 0, 2, 0, 1, 0, 1]
    assert headroom.ndcg_after == order_values(moved, [3, 2, 2, 1, 1, 1], Contract())["ndcg@10"]
    assert headroom.gain > 0
    assert headroom.window_ndcg == pytest.approx(1.0)


def test_it_has_no_headroom_when_the_best_document_leads() -> None:
    ranking, grades = seed_query([3, 0, 2, 2, 0, 1, 0, 1, 0, 1])  # the seed's system B
    headroom = inspect_query(ranking, grades).headroom
    assert headroom.from_rank == 1
    assert headroom.gain == 0


def test_it_tells_a_ranking_failure_from_a_retrieval_failure() -> None:
    # Ranking: the only relevant document is retrieved, at rank 50.
    ranking = [f"d{i}" for i in range(200)]
    low = inspect_query(ranking, {"d49": 3})
    assert low.diagnosis.failure == "ranking"
    assert low.values["recall@100"] == 1.0 and low.values["ndcg@10"] < 0.2
    assert "ranking failure" in low.diagnosis.sentence
    assert low.diagnosis.buried == 1
    # Retrieval: it sits at rank 150, beyond the window a reranker sees.
    deep = inspect_query(ranking, {"d149": 3})
    assert deep.diagnosis.failure == "retrieval"
    assert deep.values["recall@100"] == 0.0
    assert deep.diagnosis.missing == 1
    assert "retrieval failure" in deep.diagnosis.sentence
    assert deep.headroom.docid is None  # nothing in the top 100 to move
    # Neither: it leads.
    assert inspect_query(ranking, {"d0": 3}).diagnosis.failure == "none"
    assert inspect_query(ranking, {"d0": 0}).diagnosis.failure == "no_relevant"


def test_it_scores_an_empty_ranking_zero() -> None:
    seen = inspect_query([], {"d1": 2})
    assert all(value == 0 for value in seen.values.values())
    assert seen.dcg == 0 and seen.diagnosis.failure == "retrieval"


def test_it_follows_the_contracts_gain_and_threshold() -> None:
    linear = Contract(gain="linear", rel_threshold=2)
    assert gain(3, linear) == 3 and gain(3, Contract()) == 7 and gain(None, linear) == 0
    assert discount(3) == 0.5
    ranking, grades = seed_query(SYSTEM_A)
    seen = inspect_query(ranking, grades, linear)
    assert seen.n_relevant == 3
    assert [row.relevant for row in seen.rows][:4] == [True, False, True, False]


@pytest.mark.parametrize("contract", [Contract(), Contract(gain="linear", rel_threshold=2)])
def test_it_equals_measures_on_random_rankings(contract: Contract) -> None:
    rng = random.Random(18)
    for case in range(200):
        depth = rng.randint(0, 130)
        ranking = [f"d{i}" for i in rng.sample(range(300), depth)]
        pool = rng.sample(range(300), rng.randint(0, 40))
        grades = {f"d{i}": rng.choice([0, 0, 1, 2, 3]) for i in pool}
        run = {"q": [_row(docid, rank) for rank, docid in enumerate(ranking, 1)]}
        expected = evaluate({"q": grades}, run, list(INSPECTED), contract).per_query
        seen = inspect_query(ranking, grades, contract)
        if "q" not in expected:  # skipped: no relevant document
            assert not seen.counted, case
            continue
        for name in INSPECTED:
            assert math.isclose(seen.values[name], expected["q"][name], abs_tol=1e-12), (
                case,
                name,
            )


def _row(docid: str, rank: int) -> RunRow:
    return RunRow("q", docid, rank, float(1000 - rank), "t")


@needs_data
@pytest.mark.parametrize("name", RUNS)
def test_it_equals_measures_per_query_values_on_trec_dl_2019(name: str) -> None:
    qrels_path = DL19 / "qrels.dl19-passage.txt"
    run_path = DL19 / "runs" / f"{name}.judged-topics.run.gz"
    qrels = read_qrels(qrels_path)
    run = read_run(run_path)
    expected = evaluate_files(qrels_path, [run_path], list(INSPECTED))[str(run_path)].per_query
    assert len(expected) == 43
    for qid, values in expected.items():
        ranking = [row.docid for row in run.get(qid, [])]
        seen = inspect_query(ranking, qrels[qid])
        for measure in INSPECTED:
            assert math.isclose(seen.values[measure], values[measure], abs_tol=1e-12), (
                qid,
                measure,
            )
        # The table's totals are the same numbers: DCG@10 over IDCG@10 is nDCG@10.
        assert math.isclose(seen.dcg / seen.idcg, values["ndcg@10"], abs_tol=1e-12)
        assert sum(r.relevant for r in seen.rows[:DEPTH]) == round(
            values["recall@100"] * seen.n_relevant
        )
