"""Pooling the real TREC DL 2019 passage runs: brute force and trectools agree with us.

The brute force reads each run with plain Python (gzip, split, float) and sorts each query's
rows in trec_eval order: score descending, compared in single precision as trec_eval holds
it, then docid descending. trectools pools the same files with
``TrecPoolMaker(...).make_pool(strategy="topX")``; it breaks score ties by docid ascending
(and compares double-precision scores), so it is compared where no tie straddles the cut-off.
"""

from __future__ import annotations

import gzip
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pooling.pooling import PoolEntry, pool_files

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
RUNS = DATA / "trec-dl-2019-passage" / "runs"
PATHS = sorted(RUNS.glob("*.run.gz")) if RUNS.exists() else []

pytestmark = [
    pytest.mark.data,
    # trectools sorts with an argument pandas is deprecating; not this project's concern.
    pytest.mark.filterwarnings("ignore:The inplace keyword"),
    pytest.mark.skipif(
        not PATHS, reason=f"TREC DL 2019 passage runs not found under {RUNS} (real data absent)"
    ),
]

Ranked = dict[str, list[tuple[float, str]]]  # qid -> (score, docid), best first


@pytest.fixture(scope="module")
def ranked() -> dict[str, Ranked]:
    """Every run, each query's rows in trec_eval order, by plain Python sorting."""
    runs: dict[str, Ranked] = {}
    for path in PATHS:
        per_query: Ranked = {}
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                qid, _, docid, _, score, _ = line.split()
                single = array("f", [float(score)])[0]  # trec_eval's C float
                per_query.setdefault(qid, []).append((single, docid))
        for rows in per_query.values():
            rows.sort(reverse=True)  # score descending, then docid descending
        runs[str(path)] = per_query
    return runs


def brute_force_pool(ranked: Mapping[str, Ranked], depth: int) -> list[PoolEntry]:
    found: dict[tuple[str, str], dict[str, int]] = {}
    for name in sorted(ranked):
        for qid, rows in ranked[name].items():
            for position, (_, docid) in enumerate(rows[:depth], start=1):
                found.setdefault((qid, docid), {})[name] = position
    entries = [PoolEntry(qid, docid, runs) for (qid, docid), runs in found.items()]
    return sorted(entries, key=lambda e: (e.qid, e.best_position, e.docid))


@pytest.mark.parametrize("depth", [10, 100])
def test_it_pools_every_dl19_run_as_the_brute_force_does(
    ranked: dict[str, Ranked], depth: int
) -> None:
    entries = pool_files(PATHS, depth)
    assert entries == brute_force_pool(ranked, depth)
    assert len({entry.qid for entry in entries}) == 43


def tied_at_cut_off(rows: list[tuple[float, str]], depth: int) -> bool:
    """Whether the depth-th and the next row have the same score: then the tie-break
    decides which of them is pooled."""
    return len(rows) > depth and rows[depth - 1][0] == rows[depth][0]


@pytest.fixture(scope="module")
def trectools_runs() -> dict[str, Any]:
    trectools = pytest.importorskip("trectools")
    return {str(path): trectools.TrecRun(str(path)) for path in PATHS}


@pytest.mark.parametrize("depth", [10, 100])
def test_it_agrees_with_trectools_on_every_run_and_query_without_a_tie_at_the_cut_off(
    ranked: dict[str, Ranked], trectools_runs: dict[str, Any], depth: int
) -> None:
    ours: dict[tuple[str, str], set[str]] = {}  # (run, qid) -> what the run put in the pool
    for entry in pool_files(PATHS, depth):
        for name in entry.runs:
            ours.setdefault((name, entry.qid), set()).add(entry.docid)
    compared = 0
    for name, per_query in ranked.items():
        for qid, rows in per_query.items():
            if tied_at_cut_off(rows, depth):
                continue
            theirs = trectools_runs[name].get_top_documents(qid, n=depth)
            assert set(map(str, theirs)) == ours[(name, qid)], (name, qid)
            compared += 1
    pairs = sum(len(per_query) for per_query in ranked.values())
    # 1,578 of the 1,591 run/query pairs at depth 10, 1,515 at depth 100.
    assert compared >= 0.9 * pairs


def test_it_makes_the_pool_trectools_makes_where_no_tie_straddles_the_cut_off(
    ranked: dict[str, Ranked], trectools_runs: dict[str, Any]
) -> None:
    trectools = pytest.importorskip("trectools")
    depth = 10
    pool = trectools.TrecPoolMaker().make_pool(list(trectools_runs.values()), topX=depth).pool
    ours: dict[str, set[str]] = {}
    for entry in pool_files(PATHS, depth):
        ours.setdefault(entry.qid, set()).add(entry.docid)
    clean = [
        qid
        for qid in ours
        if not any(tied_at_cut_off(run.get(qid, []), depth) for run in ranked.values())
    ]
    assert len(clean) >= 30  # 35 of the 43 queries (at depth 100, every query has a tie)
    for qid in clean:
        assert {str(docid) for docid in pool[qid]} == ours[qid], qid
