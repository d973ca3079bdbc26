"""Query sampling: inputs found wanting in review, each pinned by the test that found it."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from annotation.sampling import EngineSettings, LogStats, ingest_log


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
