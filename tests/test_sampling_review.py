"""Query sampling: inputs found wanting in review, each pinned by the test that found it."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from sampling.core import EngineSettings, LogError, LogStats, ingest_log


def ingest(path: Path, **kwargs: Any) -> LogStats:
    kwargs.setdefault("engine", EngineSettings(memory_limit="200MB", threads=2))
    return ingest_log(path, **kwargs)


def json_lines(count: int, broken: dict[int, str]) -> bytes:
    """``count`` lines ``{"query": "q<n>"}``, line n (1-based) replaced by ``broken[n]``."""
    lines = [broken.get(n, f'{{"query": "q{n}"}}') for n in range(1, count + 1)]
    return ("\n".join(lines) + "\n").encode()


# --------------------------------------------------------------------------- JSON lines


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    "bad",
    ['{"query": "unterminated', "garbage", "[1, 2]", '"just a string"'],
)
def test_it_skips_and_counts_a_malformed_json_line_naming_it(
    tmp_path: Path, bad: str, gz: bool
) -> None:
    # Line 7 of 40 is not a JSON object: that line is skipped and counted, with its own
    # line number, and every other line is read, as for a CSV line with a quote left open.
    data = json_lines(40, {7: bad})
    path = tmp_path / ("log.jsonl.gz" if gz else "log.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    stats = ingest(path)
    report = stats.report
    assert report is not None
    assert (report.rows, report.malformed_rows) == (39, 1)
    assert set(stats.query) == {f"q{n}" for n in range(1, 41) if n != 7}
    assert any("line 7" in warning for warning in report.warnings), report.warnings


# --------------------------------------------------------------------------- column names


@pytest.mark.parametrize(
    ("name", "header"),
    [
        ("log.csv", "\ufeffQuery , Session ID,TIMESTAMP,Result-Count,Clicked\r\n"),
        ("log.tsv", "QUERY\tsession_id\tTimestamp\tresult_count\tclicked\n"),
    ],
)
def test_it_recognises_column_names_whatever_their_case_and_spacing(
    tmp_path: Path, name: str, header: str
) -> None:
    # Exports name columns "Query" or "Session ID" as readily as "query" and "session_id".
    sep = "\t" if name.endswith(".tsv") else ","
    rows = [
        ["exprot csv", "s1", "1700000000", "0", "0"],
        ["export csv", "s1", "1700000010", "4", "1"],
    ]
    path = tmp_path / name
    path.write_text(header + "".join(sep.join(row) + "\n" for row in rows), encoding="utf-8")
    stats = ingest(path)
    assert stats.report is not None
    assert set(stats.report.columns_used) == {
        "query", "session_id", "timestamp", "result_count", "clicked",
    }  # fmt: skip
    assert stats.record(0).query == "export csv" and stats.record(0).zero_result_rate == 0.0
    assert stats.record(1).reformulation_rate == 1.0


def test_it_recognises_a_json_key_whatever_its_case(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"Query": "a", "SessionID": 1}\n{"Query": "b"}\n', encoding="utf-8")
    assert set(ingest(path).query) == {"a", "b"}


def test_it_prefers_the_exact_name_to_a_loose_match(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("query,Session ID,session-id\na,1,2\n", encoding="utf-8")
    stats = ingest(path)  # two loose matches: neither is taken
    assert stats.report is not None and "session_id" not in stats.report.columns_used
    path.write_text("query,Session ID,session_id\na,1,2\n", encoding="utf-8")
    stats = ingest(path)
    assert stats.report is not None and stats.report.columns_used["session_id"] == "session_id"


def test_it_refuses_two_columns_whose_names_differ_only_by_case(tmp_path: Path) -> None:
    # DuckDB compares names regardless of case: say so rather than pass on its binder error.
    path = tmp_path / "log.csv"
    path.write_text("Query,query\nupper,lower\n", encoding="utf-8")
    with pytest.raises(LogError, match=r"duplicate column name.*Query, query"):
        ingest(path)


# --------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(("unit", "factor"), [("s", 1), ("ms", 1000), ("us", 1_000_000)])
def test_it_reads_epoch_timestamps_in_their_own_unit(
    tmp_path: Path, unit: str, factor: int
) -> None:
    # "exprot csv" then, 20 s later, "export csv": a reformulation in any unit. Read as
    # seconds, 20,000 ms would be 5.5 hours: past the window, and the rate would be 0.
    t = 1_700_000_000
    rows = [
        ("exprot csv", "s1", t, 0),
        ("export csv", "s1", t + 20, 1),
        ("export csv", "s2", t + 500, 1),
        ("pricing", "s2", t + 1000, 1),
    ]
    lines = ["query,session_id,timestamp,clicked"]
    lines += [f"{q},{s},{ts * factor},{c}" for q, s, ts, c in rows]
    path = tmp_path / f"log-{unit}.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = ingest(path)
    by_query = {record.query: record for record in stats.records()}
    assert by_query["exprot csv"].reformulation_rate == 1.0
    assert by_query["export csv"].reformulation_rate == 0.0
    assert stats.report is not None
    noted = [w for w in stats.report.warnings if "epoch" in w]
    assert bool(noted) == (factor != 1), stats.report.warnings
