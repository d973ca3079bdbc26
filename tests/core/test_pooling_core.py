"""Depth-k pooling, pool statistics and the judging budget, on worked examples.

Pooling run files (``pool_files``) must give exactly what ``depth_pool(read_run(...))``
gives, on worked examples and on random runs, and refuse broken files as read_run does.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats import blocks
from formats.trec import FormatError, RunRow, read_run
from pooling import pooling
from pooling.output import format_pool_jsonl, format_pool_trec
from pooling.pooling import (
    Budget,
    PoolEntry,
    RunContribution,
    depth_pool,
    judging_budget,
    pool_files,
    pool_stats,
    pool_table,
)

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


def test_it_keeps_the_first_position_of_a_document_a_list_repeats() -> None:
    runs = {"A": {"q": ranked("A", "q", "d1", "d2", "d1", "d3")}}
    assert depth_pool(runs, depth=3) == [
        PoolEntry("q", "d1", {"A": 1}),
        PoolEntry("q", "d2", {"A": 2}),
    ]


def test_it_counts_runs_of_the_entries_that_are_not_named_but_reports_only_the_named() -> None:
    stats = pool_stats(EXPECTED, ["A", "B"])
    assert [run.name for run in stats.runs] == ["A", "B"]
    assert stats.total == len(EXPECTED)
    assert stats.contribution("B") == RunContribution("B", 2, 1)  # d1 shared with A, d3 alone
    assert set(stats.shared) == {("A", "B")}


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


# --------------------------------------------------------------------------- statistics, budget


def test_it_reports_pool_size_per_query_and_pairs_shared_by_two_runs() -> None:
    stats = pool_stats(EXPECTED, ["A", "B", "C"])
    assert stats.per_query == {"q1": 4, "q2": 2, "q3": 1}
    assert stats.shared == {("A", "B"): 1, ("A", "C"): 0, ("B", "C"): 0}  # q1/d1


def test_it_reproduces_the_judging_budget_of_chapter_7() -> None:
    # Chapter 7, step 2: 300 queries, three systems (BM25, the current model, the
    # candidate), each one's top k = 10 pooled, 20 % double-judged. The tables with the
    # figures were lost; the prose keeps "12 million judgments" for judging the whole
    # 40,000-chunk corpus, "Five thousand judgments is one person-week" and "One
    # person-week buys you" the golden set. Reconstructed at the project's 30 s per
    # judgment (the seconds are not in the surviving text):
    queries, systems, k = 300, 3, 10
    assert queries * 40_000 == 12_000_000  # the corpus-wide count the prose quotes
    # No overlap at all (the upper bound): 9,000 pairs, 10,800 judgments, 90 hours.
    assert judging_budget(queries * systems * k) == Budget(9_000, 1_800, 10_800, 90.0)
    # Systems agreeing on about half of their top 10 (13.9 pairs a query): 4,167 pairs
    # become the prose's five thousand judgments, 41.7 hours: one working week.
    week = judging_budget(4_167)
    assert (week.double_judged, week.total_judgments) == (833, 5_000)
    assert week.hours == pytest.approx(41.67, abs=0.01)


# --------------------------------------------------------------------------- run files


def write_run(path: Path, rows: Sequence[tuple[str, str, float | str]], tag: str = "t") -> Path:
    """Write ``qid Q0 docid rank score tag`` lines in the order given (ranks 1, 2, ...)."""
    lines = [
        f"{qid} Q0 {docid} {rank} {score} {tag}\n"
        for rank, (qid, docid, score) in enumerate(rows, start=1)
    ]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def reference(paths: Sequence[Path], depth: int) -> list[PoolEntry]:
    return depth_pool({str(path): read_run(path) for path in paths}, depth)


def test_it_pools_files_as_depth_pool_pools_read_runs(tmp_path: Path) -> None:
    files = []
    for name, per_query in RUNS.items():
        rows = [(row.qid, row.docid, row.score) for rows in per_query.values() for row in rows]
        files.append(write_run(tmp_path / f"{name}.run", rows, tag=name))
    expected = [
        PoolEntry(e.qid, e.docid, {str(tmp_path / f"{n}.run"): p for n, p in e.runs.items()})
        for e in EXPECTED
    ]
    assert pool_files(files, depth=2) == expected
    named = pool_files([str(path) for path in files], depth=2, names=["A", "B", "C"])
    assert named == EXPECTED
    assert pool_files(files, depth=2) == reference(files, 2)


def test_it_names_runs_by_the_path_as_given(tmp_path: Path) -> None:
    path = write_run(tmp_path / "a.run", [("q1", "d1", 1.0)])
    relative = str(path.relative_to(tmp_path.parent))
    (entry,) = pool_files([path.parent.parent / relative], depth=5)
    assert entry.runs == {str(tmp_path.parent / relative): 1}


def test_it_breaks_score_ties_by_docid_descending_like_trec_eval(tmp_path: Path) -> None:
    # The file lists the tied documents in ascending order; trec_eval reads d3, d2, d1.
    path = write_run(
        tmp_path / "a.run", [("q", "d1", 2.0), ("q", "d2", 2.0), ("q", "d3", 2.0), ("q", "d0", 5.0)]
    )
    entries = pool_files([path], depth=3)
    assert [(e.docid, e.best_position) for e in entries] == [("d0", 1), ("d3", 2), ("d2", 3)]


def test_it_compares_scores_in_single_precision_like_trec_eval(tmp_path: Path) -> None:
    # 1.00000001 and 1.00000002 are one float32: a tie, which the docid breaks (descending).
    path = write_run(tmp_path / "a.run", [("q", "a", "1.00000002"), ("q", "b", "1.00000001")])
    assert [e.docid for e in pool_files([path], depth=1)] == ["b"]
    assert pool_files([path], depth=2) == reference([path], 2)


def test_it_reads_unsorted_gzipped_and_oddly_spaced_files(tmp_path: Path) -> None:
    text = (
        "\ufeffq2\tQ0\td9 1 1.5 x\r\n"  # BOM, tabs, CR LF
        "\n"
        "q1  Q0  d1  7  -0.25e1   x\n"  # several blanks, an exponent
        "q2 Q0 d8 2 2.0000000000000001 x\n"  # more digits than a double holds
        "q1 Q0 d2 3 .5 x"  # no line end at the end of the file
    )
    plain = tmp_path / "odd.run"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "odd.run.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    for path in (plain, packed):
        assert pool_files([path], depth=1) == reference([path], 1)
        assert [(e.qid, e.docid) for e in pool_files([path], depth=1)] == [
            ("q1", "d2"),
            ("q2", "d8"),
        ]


def test_it_pools_non_ascii_ids_in_string_order(tmp_path: Path) -> None:
    path = write_run(tmp_path / "u.run", [("q", "é", 1.0), ("q", "z", 1.0), ("q", "a", 0.5)])
    entries = pool_files([path], depth=2)
    assert [e.docid for e in entries] == ["é", "z"]  # docid descending at the tie
    assert entries == reference([path], 2)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("q1 Q0 d2 2 1.0", "expected 6 columns"),
        ("q1 Q0 d2 x 1.0 t", "rank 'x' is not an integer"),
        ("q1 Q0 d2 2 high t", "score 'high' is not a number"),
        ("q1 Q0 d2 2 nan t", "not a finite number"),
        ("q1 Q0 d1 2 0.5 t", "document d1 appears twice for query q1"),
        # No reader takes a NUL (trec_eval would cut the id there), as import_runs does not.
        ("q1 Q0 d2\0 2 1.0 t", "the line holds a NUL character"),
    ],
)
def test_it_refuses_a_broken_file_with_its_line_as_read_run_does(
    tmp_path: Path, line: str, reason: str
) -> None:
    path = tmp_path / "bad.run"
    filler = "".join(f"q0 Q0 x{i} {i} 1.0 t\n" for i in range(50))  # far beyond the depth
    path.write_text(f"q1 Q0 d1 1 2.0 t\n{filler}{line}\n", encoding="utf-8")
    with pytest.raises(FormatError) as raised:
        pool_files([path], depth=1)
    assert raised.value.line == 52
    assert reason in str(raised.value)
    with pytest.raises(FormatError) as by_read_run:
        read_run(path)
    assert str(raised.value) == str(by_read_run.value)


def test_it_refuses_depth_below_one_and_names_given_twice(tmp_path: Path) -> None:
    path = write_run(tmp_path / "a.run", [("q", "d", 1.0)])
    with pytest.raises(ValueError, match="at least 1"):
        pool_files([path], depth=0)
    with pytest.raises(ValueError, match="given twice"):
        pool_files([path, path], depth=1)
    with pytest.raises(ValueError, match="1 run names for 2 run files"):
        pool_files([path, path], depth=1, names=["a"])


def test_it_summarises_and_writes_a_pool_table(tmp_path: Path) -> None:
    files = [
        write_run(
            tmp_path / f"{n}.run", [(r.qid, r.docid, r.score) for rows in q.values() for r in rows]
        )
        for n, q in RUNS.items()
    ]
    table = pool_table(files, depth=2, names=["A", "B", "C"])
    assert table.entries() == EXPECTED
    assert table.stats() == pool_stats(EXPECTED, ["A", "B", "C"])
    lines = "".join(format_pool_jsonl(table, batch=3)).splitlines()
    assert lines == [
        json.dumps({"qid": e.qid, "docid": e.docid, "runs": dict(e.runs)}) for e in EXPECTED
    ]
    assert "".join(format_pool_trec(table)).splitlines()[:4] == [
        "q1 Q0 d1 1 4 pool@2",
        "q1 Q0 d3 2 3 pool@2",
        "q1 Q0 d7 3 2 pool@2",
        "q1 Q0 d2 4 1 pool@2",
    ]


# Random runs: few queries and documents so that runs overlap, scores from a small set so
# that they tie, any separators, a few blank lines; lines as drawn or sorted by score (with
# ties in the opposite order to trec_eval's, as some engines write them); now and then a
# non-ASCII id, which the exact reader handles. Depth up to past the longest run.
QIDS = st.sampled_from(["1", "2", "10", "q7"])
DOCIDS = st.sampled_from(["d1", "d2", "d10", "d9", "D", 'a"b', "back\\slash", "x" * 9])
UNICODE = st.sampled_from(["\u00e9t\u00e9", "q\u00e9"])
SCORES = st.one_of(
    st.sampled_from(["1", "1.0", "0.5", "-0.5", "-0", "2.5e-1", "10", "0.30000000000000004"]),
    st.floats(-1e6, 1e6, allow_nan=False).map(repr),
    st.decimals(-1000, 1000, places=3, allow_nan=False, allow_infinity=False).map(str),
)


@st.composite
def run_files(draw: st.DrawFn) -> list[str]:
    texts = []
    for _ in range(draw(st.integers(1, 3))):
        ids = st.one_of(DOCIDS, UNICODE) if draw(st.integers(0, 9)) == 0 else DOCIDS
        pairs = draw(st.lists(st.tuples(QIDS, ids), unique=True, max_size=25))
        rows = [(qid, docid, draw(SCORES)) for qid, docid in pairs]
        if draw(st.booleans()):
            rows.sort(key=lambda row: (row[0], -float(row[2]), row[1]))
        blank = draw(st.sampled_from([" ", "\t", "  "]))
        end = draw(st.sampled_from(["\n", "\n", "\r\n"]))
        lines = [
            blank.join([qid, "Q0", docid, str(rank), score, "run"]) + end
            for rank, (qid, docid, score) in enumerate(rows, start=1)
        ]
        for _ in range(draw(st.integers(0, 2))):  # blank lines, which readers skip
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["\n", " \n"])))
        texts.append("".join(lines))
    return texts


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=run_files(), depth=st.integers(1, 12), block=st.sampled_from([8, 64, 1 << 21]))
def test_it_pools_random_run_files_as_depth_pool_pools_read_runs(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    texts: list[str],
    depth: int,
    block: int,
) -> None:
    # Tiny blocks split files mid-query, even mid-line, as large files are split.
    monkeypatch.setattr(blocks, "_BLOCK", block)
    folder = tmp_path_factory.mktemp("runs")
    paths = []
    for i, text in enumerate(texts):
        path = folder / f"r{i}.run"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    expected = reference(paths, depth)
    table = pool_table(paths, depth)
    assert table.entries() == expected
    assert table.stats() == pool_stats(expected, [str(path) for path in paths])
    assert "".join(format_pool_jsonl(table)).splitlines() == [
        json.dumps({"qid": e.qid, "docid": e.docid, "runs": dict(e.runs)}) for e in expected
    ]


def test_it_reads_plain_runs_without_the_exact_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fast reader must take the usual runs on its own, or pooling is slow again.
    def refuse(path: object) -> None:
        raise AssertionError(f"{path} went to the exact reader")

    monkeypatch.setattr(pooling, "read_run", refuse)
    rows = [
        (f"q{q}", f"doc{d}", f"{(d * 7919) % 101 / 7:.4f}") for q in range(5) for d in range(40)
    ]
    spaced = write_run(tmp_path / "spaced.run", rows)
    tabbed = tmp_path / "tabbed.run.gz"
    tabbed.write_bytes(gzip.compress(spaced.read_bytes().replace(b" ", b"\t")))
    assert len(pool_files([spaced, tabbed], depth=10)) == 50
