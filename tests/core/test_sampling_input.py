"""Query sampling: logs whose lines are damaged, oddly terminated or typed unusually.

Every case here is a file a real export produces now and then; each test states what must be
read, what must be skipped and counted, and what must be refused with a message.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sampling import source as sampling_source
from sampling.core import ColumnMap, EngineSettings, LogError, LogStats, ingest_log


def ingest(path: Path, **kwargs: Any) -> LogStats:
    kwargs.setdefault("engine", EngineSettings(memory_limit="200MB", threads=2))
    return ingest_log(path, **kwargs)


def frequencies(stats: LogStats) -> dict[str, int]:
    return {str(q): int(f) for q, f in zip(stats.query, stats.frequency, strict=True)}


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def rows(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i},s{i}" for i in range(n)]


# --------------------------------------------------------------------------- quoting


@pytest.mark.parametrize("gz", [False, True])
def test_it_reads_every_other_row_after_a_quote_left_open(tmp_path: Path, gz: bool) -> None:
    # Line 402 opens a quoted value it never closes. A CSV reader takes everything after it
    # for one long value; the 400 rows that follow must be read all the same.
    lines = ["query,session_id", *rows("q", 400), '"oops,s', *rows("r", 400)]
    path = write(tmp_path / ("log.csv.gz" if gz else "log.csv"), "\n".join(lines).encode(), gz)
    stats = ingest(path)
    report = stats.report
    assert report is not None
    assert (report.rows, report.malformed_rows) == (800, 1)
    assert {"q0", "q399", "r0", "r399"} <= set(stats.query)
    assert any("line 402" in warning for warning in report.warnings)


def test_it_reads_the_rows_a_later_quote_would_have_closed_over(tmp_path: Path) -> None:
    # The open quote on line 3 would close at line 6's quoted value: lines 3 to 6 would be one
    # bad record. Only line 3 is bad.
    text = 'query,session_id\na,1\n"oops,2\nb,3\nc,4\nd,"5"\ne,6\n'
    stats = ingest(write(tmp_path / "log.csv", text.encode()))
    assert set(stats.query) == {"a", "b", "c", "d", "e"}
    assert stats.report is not None and stats.report.malformed_rows == 1


def test_it_reads_the_rest_of_a_log_longer_than_one_open_value_may_be(tmp_path: Path) -> None:
    # More than 2 MB after the open quote: past DuckDB's longest line, a different failure.
    lines = ["query,session_id", *rows("q", 10), '"oops,s', *rows("r", 200_000)]
    stats = ingest(write(tmp_path / "log.csv", "\n".join(lines).encode()))
    assert stats.report is not None
    assert (stats.report.rows, stats.report.malformed_rows) == (200_010, 1)


def test_it_fails_loudly_rather_than_lose_lines_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Should the one-record-per-line copy miss an open quote, the lines it swallows are
    # neither rows nor rejected lines: the ingestion must say so, naming file and line.
    monkeypatch.setattr(sampling_source, "_closed_fields", lambda delimiter: lambda line: True)
    lines = ["query,session_id", *rows("q", 10), '"oops,s', *rows("r", 10)]
    path = write(tmp_path / "log.csv", "\n".join(lines).encode())
    with pytest.raises(LogError, match=r"log\.csv: 10 line\(s\) were neither read .* line 12"):
        ingest(path)


def test_it_keeps_quoted_values_that_span_lines_in_a_sound_file(tmp_path: Path) -> None:
    text = 'query,session_id\n"two\nlines",1\n"a, b",2\nplain,3\n27" monitor,4\n'
    stats = ingest(write(tmp_path / "log.csv", text.encode()))
    assert set(stats.query) == {"two lines", "a, b", "plain", '27" monitor'}
    assert stats.report is not None and stats.report.malformed_rows == 0


def test_it_reports_a_wrong_field_count_and_an_open_quote_together(tmp_path: Path) -> None:
    text = 'query,session_id\nfoo,1\nshoes, red,2\nbar,3\n"unterminated,4\nbaz,5\n'
    stats = ingest(write(tmp_path / "log.csv", text.encode()))
    assert set(stats.query) == {"foo", "bar", "baz"}
    report = stats.report
    assert report is not None and report.malformed_rows == 2
    assert any("the first at line 3" in warning for warning in report.warnings)


# --------------------------------------------------------------------------- line endings


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"query,sid\r\na,1\nb,2\r\nc,3\n", {"a": 1, "b": 1, "c": 1}),  # CRLF and LF mixed
        (b"query\r\nfoo\r\nfoo\r\nbar\n", {"foo": 2, "bar": 1}),  # one column, mixed
        (b"query,sid\na,1\nb,2\r\nc,3\n", {"a": 1, "b": 1, "c": 1}),  # a single CRLF
        (b"query,session_id\rfoo,1\rbar,2\r", {"foo": 1, "bar": 1}),  # CR only (old Mac)
        (b"query,sid\r\na,1\r\nb,2", {"a": 1, "b": 1}),  # CRLF, no final line break
    ],
)
def test_it_reads_mixed_and_old_line_endings(
    tmp_path: Path, data: bytes, expected: dict[str, int]
) -> None:
    stats = ingest(write(tmp_path / "log.csv", data))
    assert frequencies(stats) == expected
    assert stats.report is not None and stats.report.malformed_rows == 0


def test_it_skips_and_counts_a_line_broken_by_a_stray_carriage_return(tmp_path: Path) -> None:
    # "foo\rx,1": the carriage return ends a line, as it does in old Mac files; "foo" alone
    # lacks the session column and is skipped, the rest of the file is read.
    data = b"query,sid\na,1\nfoo\rx,2\nb,3\nc,4\n"
    stats = ingest(write(tmp_path / "log.csv", data))
    assert {"a", "b", "c"} <= set(stats.query) and "foo" not in set(stats.query)
    assert stats.report is not None and stats.report.malformed_rows == 1


def test_it_repairs_invalid_utf8_in_a_file_with_mixed_line_endings(tmp_path: Path) -> None:
    data = b"query,sid\r\nfoo,1\r\ncaf\xe9,2\nbar,3\r\n"
    stats = ingest(write(tmp_path / "log.csv", data))
    assert set(stats.query) == {"foo", "caf\ufffd", "bar"}
    assert stats.report is not None and stats.report.invalid_utf8_lines == 1


# --------------------------------------------------------------------------- blank lines


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("log.csv", b"\n\nquery,session_id\nfoo,1\nfoo,2\nbar,3\n"),
        ("log.csv", b"\r\n  \r\nquery,session_id\r\nfoo,1\r\nfoo,2\r\nbar,3\r\n"),
        ("log.csv", b"\xef\xbb\xbf\nquery\nfoo\nfoo\nbar\n"),
        ("log.tsv", b"\n\nquery\tsession_id\nfoo\t1\nfoo\t2\nbar\t3\n"),
    ],
)
def test_it_finds_the_header_after_leading_blank_lines(
    tmp_path: Path, name: str, data: bytes
) -> None:
    stats = ingest(write(tmp_path / name, data))
    assert frequencies(stats) == {"foo": 2, "bar": 1}


# --------------------------------------------------------------------------- JSON lines


@pytest.mark.parametrize("gz", [False, True])
def test_it_skips_a_malformed_json_line_in_a_log_with_invalid_utf8(
    tmp_path: Path, gz: bool
) -> None:
    # Invalid UTF-8 and a malformed line, both repaired in one copy: the bytes replaced, the
    # line skipped and counted by its own number.
    data = b'{"query":"caf\xe9"}\n{"query":"ok"}\n{"query": broken\n{"query":"last"}\n'
    stats = ingest(write(tmp_path / ("log.jsonl.gz" if gz else "log.jsonl"), data, gz))
    report = stats.report
    assert report is not None
    assert (report.rows, report.malformed_rows, report.invalid_utf8_lines) == (3, 1, 1)
    assert set(stats.query) == {"caf\ufffd", "ok", "last"}
    assert any("line 3" in warning for warning in report.warnings)


def test_it_refuses_a_json_log_whose_every_line_is_malformed(tmp_path: Path) -> None:
    with pytest.raises(LogError, match=r"log\.jsonl: no readable rows: 2 malformed .* line 1"):
        ingest(write(tmp_path / "log.jsonl", b"not json\n[1]\n"))


# --------------------------------------------------------------------------- Parquet types


@pytest.mark.parametrize("unsigned", ["UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"])
def test_it_reads_unsigned_integer_columns_of_parquet(tmp_path: Path, unsigned: str) -> None:
    # Session s1: "a" at t=0 (nothing clicked after it), "a b" at t=10 (clicked, 0 results
    # = zero-result); s2: "a" at t=0 clicked. Every number column is unsigned.
    path = tmp_path / "log.parquet"
    duckdb.execute(
        f"""COPY (SELECT query, CAST(ts AS {unsigned}) AS timestamp,
                         CAST(sid AS {unsigned}) AS session_id,
                         CAST(rc AS {unsigned}) AS result_count,
                         CAST(clk AS {unsigned}) AS clicked
                  FROM (VALUES ('a', 0, 1, 5, 0), ('a b', 10, 1, 0, 2), ('a', 0, 2, 3, 1))
                       AS t(query, ts, sid, rc, clk))
            TO '{path}' (FORMAT parquet)"""
    )
    stats = {r.query: r for r in ingest(path).records()}
    assert stats["a"].abandonment_rate == 0.0  # s1 clicked later (2 clicks), s2 at once
    assert stats["a"].reformulation_rate == 0.5  # s1: "a" -> "a b" after 10 s
    assert stats["a b"].zero_result_rate == 1.0 and stats["a"].sessions == 2


@pytest.mark.parametrize(
    ("column", "sql"),
    [
        ("clicked", "{'x': 1}"),  # a struct
        ("clicked", "[1, 2]"),  # a list
        ("result_count", "[0]"),
        ("timestamp", "{'t': 5}"),
    ],
)
def test_it_reads_nested_parquet_values_as_text(tmp_path: Path, column: str, sql: str) -> None:
    path = tmp_path / "log.parquet"
    duckdb.execute(
        f"COPY (SELECT 'a' AS query, 's1' AS session_id, {sql} AS {column}) "
        f"TO '{path}' (FORMAT parquet)"
    )
    assert list(ingest(path).query) == ["a"]


def test_it_reads_json_keys_that_first_appear_late_in_the_file(tmp_path: Path) -> None:
    # DuckDB guesses a JSON file's keys from its first ~20,000 lines; result_count appears
    # only in the last 50 of 30,000. 'late' is searched 50 times, 10 of them with no result.
    lines = [json.dumps({"query": f"q{i % 100}", "session_id": f"s{i}"}) for i in range(29_950)]
    lines += [json.dumps({"query": "late", "result_count": int(i >= 10)}) for i in range(50)]
    path = write(tmp_path / "log.jsonl", ("\n".join(lines) + "\n").encode())
    stats = ingest(path)
    late = {r.query: r for r in stats.records()}["late"]
    assert late.frequency == 50 and late.zero_result_rate == pytest.approx(0.2)
    report = stats.report
    assert report is not None and report.columns_used.get("result_count") == "result_count"
    assert "result_count" in report.columns_found
    assert not any("no result_count" in warning for warning in report.warnings)


def test_it_still_treats_a_json_key_found_nowhere_as_missing(tmp_path: Path) -> None:
    lines = [json.dumps({"query": f"q{i % 3}", "sid": f"s{i}"}) for i in range(30)]
    path = write(tmp_path / "log.jsonl", ("\n".join(lines) + "\n").encode())
    stats = ingest(path)
    assert stats.report is not None and "clicked" not in stats.report.columns_used
    assert all(r.abandonment_rate is None for r in stats.records())  # not "never clicked"
    with pytest.raises(LogError, match=r"missing user_id \(column 'uid'\)\. Columns found: 'qu"):
        ingest(path, columns=ColumnMap.parse("user_id=uid"))


def test_it_repairs_invalid_utf8_in_json_lines_lacking_optional_keys(tmp_path: Path) -> None:
    # The repaired copy must be read for the same keys as the file (absent ones included).
    data = b'{"query": "caf\xe9", "session_id": "s1"}\n{"query": "tea", "session_id": "s2"}\n'
    stats = ingest(write(tmp_path / "log.jsonl.gz", data, gz=True))
    assert sorted(stats.query) == ["caf\ufffd", "tea"]
    assert stats.report is not None and stats.report.invalid_utf8_lines == 1
    assert stats.sessions is not None and list(stats.sessions) == [1, 1]
