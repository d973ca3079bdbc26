"""Depth-k pooling, pool statistics and the judging budget, on worked examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pooling.pooling import (
    Budget,
    PoolEntry,
    RunContribution,
    depth_pool,
    judging_budget,
    pool_stats,
)
from pooling.trec import RunRow, read_run

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DL19_RUNS = DATA / "trec-dl-2019-passage" / "runs"
needs_data = pytest.mark.skipif(
    not DATA.exists(), reason="real TREC data (../shared/data) not present"
)


def ranked(run: str, qid: str, *docids: str) -> list[RunRow]:
    """Rows already in trec_eval order; the rank column deliberately disagrees."""
    return [RunRow(qid, docid, 99 - i, 10.0 - i, run) for i, docid in enumerate(docids)]


# Worked example, depth 2:
#   q1: A top 2 = d1@1 d2@2; B top 2 = d3@1 d1@2; C = d7@1
#       -> d1 {A:1, B:2}, d3 {B:1}, d7 {C:1} (best 1, by docid), then d2 {A:2} (best 2)
#   q2: A = d5@1 d6@2 (B and C do not answer q2)
#   q3: C = d8@1
RUNS = {
    "A": {"q1": ranked("A", "q1", "d1", "d2", "d3", "d4"), "q2": ranked("A", "q2", "d5", "d6")},
    "B": {"q1": ranked("B", "q1", "d3", "d1", "d9")},
    "C": {"q1": ranked("C", "q1", "d7"), "q3": ranked("C", "q3", "d8")},
}
EXPECTED = [
    PoolEntry("q1", "d1", {"A": 1, "B": 2}),
    PoolEntry("q1", "d3", {"B": 1}),
    PoolEntry("q1", "d7", {"C": 1}),
    PoolEntry("q1", "d2", {"A": 2}),
    PoolEntry("q2", "d5", {"A": 1}),
    PoolEntry("q2", "d6", {"A": 2}),
    PoolEntry("q3", "d8", {"C": 1}),
]


def test_it_pools_the_union_of_each_runs_top_depth() -> None:
    assert depth_pool(RUNS, depth=2) == EXPECTED


def test_it_records_list_positions_not_the_rank_column() -> None:
    entry = depth_pool(RUNS, depth=2)[0]
    assert entry.runs == {"A": 1, "B": 2}
    assert entry.best_position == 1


def test_it_pools_the_same_way_whatever_the_order_of_runs() -> None:
    reordered = {name: RUNS[name] for name in ("C", "B", "A")}
    assert depth_pool(reordered, depth=2) == EXPECTED


def test_it_restricts_the_pool_to_the_given_queries() -> None:
    assert depth_pool(RUNS, depth=2, qids={"q1", "unknown"}) == EXPECTED[:4]
    assert depth_pool(RUNS, depth=2, qids=[]) == []


def test_it_pools_whole_lists_when_depth_exceeds_them() -> None:
    q1 = [entry for entry in depth_pool(RUNS, depth=100) if entry.qid == "q1"]
    assert {entry.docid for entry in q1} == {"d1", "d2", "d3", "d4", "d7", "d9"}
    assert next(e for e in q1 if e.docid == "d3").runs == {"A": 3, "B": 1}


@pytest.mark.parametrize("depth", [0, -5])
def test_it_rejects_a_depth_below_one(depth: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        depth_pool(RUNS, depth=depth)


def test_it_summarises_a_pool() -> None:
    stats = pool_stats(EXPECTED, ["A", "B", "C", "D"])
    # Sizes per query: q1 4, q2 2, q3 1.
    assert (stats.n_queries, stats.total) == (3, 7)
    assert (stats.per_query_min, stats.per_query_max) == (1, 4)
    assert stats.per_query_mean == pytest.approx(7 / 3)
    assert stats.runs == (
        RunContribution("A", contributed=4, unique=3),  # d2, d5, d6 (d1 shared with B)
        RunContribution("B", contributed=2, unique=1),  # d3
        RunContribution("C", contributed=2, unique=2),  # d7, d8
        RunContribution("D", contributed=0, unique=0),  # pooled but found nothing
    )
    assert stats.contribution("C").unique == 2
    with pytest.raises(KeyError):
        stats.contribution("E")
    # A = {q1/d1, q1/d2, q2/d5, q2/d6}, B = {q1/d3, q1/d1}: 1 shared out of 5.
    assert stats.overlap[("A", "B")] == pytest.approx(0.2)
    assert stats.overlap[("A", "C")] == 0.0
    assert stats.overlap[("C", "D")] == 0.0
    assert len(stats.overlap) == 6


def test_it_summarises_an_empty_pool() -> None:
    stats = pool_stats([], ["A"])
    assert (stats.n_queries, stats.total, stats.per_query_min, stats.per_query_max) == (0, 0, 0, 0)
    assert stats.per_query_mean == 0.0
    assert stats.runs == (RunContribution("A", 0, 0),)


def test_it_estimates_the_judging_budget() -> None:
    assert judging_budget(500) == Budget(500, 100, 600, 5.0)
    # round() is half-to-even: 10 * 0.25 = 2.5 -> 2.
    assert judging_budget(10, double_share=0.25, seconds_per_judgment=60) == Budget(10, 2, 12, 0.2)
    assert judging_budget(0) == Budget(0, 0, 0, 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pool_size": -1},
        {"pool_size": 1, "double_share": 1.5},
        {"pool_size": 1, "seconds_per_judgment": -1},
    ],
)
def test_it_rejects_impossible_budgets(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        judging_budget(**kwargs)


@pytest.mark.data
@needs_data
def test_it_pools_three_real_dl19_runs_at_depth_10() -> None:
    names = ["bm25base_p", "p_bert", "ms_duet_passage"]
    runs = {name: read_run(DL19_RUNS / f"{name}.judged-topics.run.gz") for name in names}
    entries = depth_pool(runs, depth=10)
    assert all(1 <= position <= 10 for e in entries for position in e.runs.values())
    by_query: dict[str, list[PoolEntry]] = {}
    for entry in entries:
        by_query.setdefault(entry.qid, []).append(entry)
    assert set(by_query) == {qid for per_query in runs.values() for qid in per_query}
    for qid, pooled in by_query.items():
        largest_single = max(min(10, len(runs[name].get(qid, []))) for name in names)
        assert largest_single <= len(pooled) <= 3 * 10
        assert len({entry.docid for entry in pooled}) == len(pooled)
    stats = pool_stats(entries, names)
    assert stats.total == len(entries)
    for name in names:
        # Some runs return fewer than 10 passages for a query (ms_duet_passage: 5 for one).
        expected = sum(min(10, len(rows)) for rows in runs[name].values())
        assert stats.contribution(name).contributed == expected
