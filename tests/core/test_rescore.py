"""Re-scoring's pure core: scoring only a run's judged rows with their final ranks equals
`evaluate` on the whole run (ties, short runs, missing and unknown queries, both contracts),
and the shared bootstrap equals `bootstrap_interval`."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.measures import Contract, RankedRows, evaluate, evaluate_ranked
from evaluation.rescore import STORED_MEASURES, ReleaseTable, Resamples
from evaluation.stats import bootstrap_interval
from formats.trec import RunRow, pack_keys, rank_run

MEASURES = [*STORED_MEASURES, "mrr@5", "judged@5", "ndcg@3"]


def judged_rows(run: dict[str, list[RunRow]], qrels: dict[str, dict[str, int]]) -> RankedRows:
    """The run as a project stores it (trec_eval order), keeping only the judged rows."""
    qids = tuple(run)
    codes, docids, ranks = [], [], []
    for i, qid in enumerate(qids):
        for rank, row in enumerate(rank_run(run[qid]), start=1):
            if row.docid in qrels.get(qid, {}):
                codes.append(i)
                docids.append(row.docid)
                ranks.append(rank)
    return RankedRows(
        qids,
        np.array(codes, dtype=np.int32),
        pack_keys(docids)[0] if docids else np.zeros((0, 1), np.uint64),
        np.array(ranks, dtype=np.int64),
        np.array([len(run[q]) for q in qids], dtype=np.int64),
    )


def random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, list[RunRow]]]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(30)]
    qrels = {
        f"q{q}": {d: rng.randrange(4) for d in rng.sample(docs, rng.randrange(1, 12))}
        for q in range(rng.randrange(1, 8))
    }
    run = {}
    for q in range(rng.randrange(0, 9)):  # some qrels queries missing, some unknown
        picked = rng.sample(docs, rng.randrange(1, 25))
        run[f"q{q}"] = [
            RunRow(f"q{q}", d, 0, float(rng.randrange(5)), "r") for d in picked
        ]  # coarse scores: many ties, broken by docid
    return qrels, run


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["skip", "zero"]), st.integers(1, 2))
def test_it_scores_the_judged_rows_as_evaluate_scores_the_whole_run(
    seed: int, empty: str, threshold: int
) -> None:
    qrels, run = random_case(seed)
    contract = Contract(rel_threshold=threshold, empty=empty)  # type: ignore[arg-type]
    lines = [(qid, d, g) for qid, judged in qrels.items() for d, g in judged.items()]
    table = ReleaseTable.build([(i + 1, q, d, g) for i, (q, d, g) in enumerate(lines)]).table
    ours = evaluate_ranked(table, {"r": judged_rows(run, qrels)}, MEASURES, contract)["r"]
    expected = evaluate(qrels, run, MEASURES, contract)
    assert ours.per_query.keys() == expected.per_query.keys()
    for qid, values in expected.per_query.items():
        assert ours.per_query[qid] == pytest.approx(values, abs=1e-12)
    assert (ours.scored, ours.skipped_no_relevant, ours.missing_from_run) == (
        expected.scored,
        expected.skipped_no_relevant,
        expected.missing_from_run,
    )


def test_the_release_table_finds_labels_by_id_in_any_order() -> None:
    rows = [(30, "q2", "b", 1), (10, "q1", "z", 3), (20, "q1", "a", 0)]
    labels = ReleaseTable.build(rows)
    assert labels.table.qids == ("q1", "q2")
    ranked = labels.ranked([30, 10], [4, 2], [("q1", 7), ("q2", 9)])
    assert ranked.qid_codes.tolist() == [1, 0]
    assert ranked.doc_keys.tolist() == pack_keys(["b", "z"])[0].tolist()
    assert ranked.retrieved.tolist() == [7, 9]


def test_the_shared_resamples_give_bootstrap_intervals() -> None:
    values = np.random.default_rng(5).random((37, 3))
    intervals = Resamples.draw(37).intervals(values)
    for column, (lo, hi) in enumerate(intervals):
        expected = bootstrap_interval(values[:, column], resamples=10_000, seed=0)
        assert (lo, hi) == pytest.approx((expected.lo, expected.hi), abs=1e-12)
