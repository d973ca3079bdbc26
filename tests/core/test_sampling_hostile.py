"""Query sampling: logs that are not what they claim, or cost out of proportion to read.

Each is refused or skipped with a message that names the file, the line and the limit, in
time linear in the file (the 100,001-column header used to take minutes).
"""

from __future__ import annotations

import gzip
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sampling.core import EngineSettings, LogError, LogStats, ingest_log
from sampling.source import MAX_COLUMNS


def ingest(path: Path, **kwargs: Any) -> LogStats:
    kwargs.setdefault("engine", EngineSettings(memory_limit="200MB", threads=2))
    return ingest_log(path, **kwargs)


def frequencies(stats: LogStats) -> dict[str, int]:
    return {str(q): int(f) for q, f in zip(stats.query, stats.frequency, strict=True)}


# --------------------------------------------------------------------------- JSON query types


def test_it_refuses_json_lines_whose_query_is_not_a_string_by_line(tmp_path: Path) -> None:
    records = [{"query": "shoes"}, {"query": 42}, {"query": {"q": "boots"}}, {"query": "boots"}]
    records += [{"query": [1, 2]}, {"query": True}, {"query": None}, {"query": "shoes"}]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    stats = ingest(path)
    assert frequencies(stats) == {"shoes": 2, "boots": 1}  # "42", "true" ... not counted
    assert stats.report is not None
    assert stats.report.malformed_rows == 4
    assert any("4 malformed line(s)" in w and "line 2" in w for w in stats.report.warnings)


def test_it_fails_a_json_log_of_numbers_naming_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"query": 1}\n{"query": 2.5}\n')
    with pytest.raises(
        LogError, match=r"log\.jsonl: no readable rows: 2 malformed line\(s\), the first at line 1"
    ):
        ingest(path)


# --------------------------------------------------------------------------- encodings


@pytest.mark.parametrize(
    ("encoding", "named"),
    [
        ("utf-16", "UTF-16"),
        ("utf-32", "UTF-32"),
        ("utf-16-le", "UTF-16 or UTF-32 (no byte-order mark)"),
    ],
)
def test_it_says_a_log_is_utf16_and_how_to_convert_it(
    tmp_path: Path, encoding: str, named: str
) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes("query,session_id\nshoes,1\n".encode(encoding))
    with pytest.raises(LogError) as refused:
        ingest(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: the file is encoded as {named}, not UTF-8")
    assert "iconv -f" in message and "-t UTF-8" in message


def test_it_says_so_for_a_gzipped_utf16_log_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "log.tsv.gz"
    path.write_bytes(gzip.compress("query\nshoes\n".encode("utf-16")))
    with pytest.raises(CommandError, match="encoded as UTF-16, not UTF-8"):
        call_command("sample_queries", "--log", str(path), stdout=io.StringIO())


# --------------------------------------------------------------------------- long lines


def test_it_says_a_line_is_too_long_rather_than_no_rows(tmp_path: Path) -> None:
    # The 1 GB single-line log in small: the same limit, lowered.
    path = tmp_path / "log.csv.gz"
    path.write_bytes(gzip.compress(b"query\n" + b"x" * 50_000 + b"\n"))
    engine = EngineSettings(memory_limit="200MB", threads=2, max_line_bytes=10_000)
    with pytest.raises(LogError, match=r"line 2 is longer than the limit of 10,000 bytes"):
        ingest(path, engine=engine)


def test_it_says_the_first_line_is_too_long(tmp_path: Path) -> None:
    # No header in sight: the whole file is one line (2 MB that compress to a few KB).
    path = tmp_path / "log.csv.gz"
    path.write_bytes(gzip.compress(b"query," * 350_000))
    with pytest.raises(CommandError, match=r"log\.csv\.gz: line 1 is longer than the limit"):
        call_command("sample_queries", "--log", str(path), stdout=io.StringIO())


# --------------------------------------------------------------------------- wide headers


def test_it_refuses_a_header_of_100001_columns_at_once(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    header = ",".join(f"c{i}" for i in range(100_000)) + ",query\n"
    path.write_text(header + "," * 100_000 + "shoes\n")  # 0.9 MB of header
    started = time.perf_counter()
    with pytest.raises(
        LogError, match=f"the header has 100,001 columns, more than the {MAX_COLUMNS:,}"
    ):
        ingest(path)
    assert time.perf_counter() - started < 5  # it took 108 s (a quadratic duplicate check)


def test_it_still_reads_a_header_as_wide_as_allowed(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    header = ",".join(f"c{i}" for i in range(MAX_COLUMNS - 1)) + ",query\n"
    path.write_text(header + "," * (MAX_COLUMNS - 1) + "shoes\n")
    assert frequencies(ingest(path)) == {"shoes": 1}
