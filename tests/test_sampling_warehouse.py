"""Logs beyond one machine: the statistics a warehouse computes with the published SQL, imported
in place of the raw log, give the same statistics, strata, draw and inclusion probabilities.

The warehouse is played by a separate DuckDB connection that does what docs/warehouse.md
asks of one: its own function implementing the documented normalisation (here the Python
rule, registered row by row), an ``events`` and a ``queries`` view over the raw lines, the
published ``statistics.sql`` with the window filled in, and an export in the contract's
columns, without the queries its privacy screen flagged.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sampling.core import (
    DEFAULT_QUOTAS,
    LogError,
    LogStats,
    StrataDefinition,
    ingest_log,
    pii_screen,
    sample_queries,
    stratify,
)
from sampling.sql import statistics_sql
from sampling.statsfile import STATISTICS_COLUMNS
from sampling.text import normalise_query

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def raw_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warehouse") / "log.csv"
    command = [sys.executable, str(REPO / "bench" / "gen_log.py"), "--lines", "20000"]
    subprocess.run([*command, "--seed", "11", "--out", str(path)], check=True, cwd=REPO)
    # Personal data, which both ways must leave out.
    with path.open("a", encoding="utf-8") as out:
        out.write('"mail bob@example.com","2025-01-01T00:00:05Z","s1","u1",3,0\n')
        out.write('"call +1 555 123 4567","2025-01-01T00:00:09Z","s1","u1",0,1\n')
    return path


def warehouse(raw: Path, out: Path, definition: StrataDefinition, export: str) -> None:
    """What a team runs in its warehouse, over the raw lines, then exports."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rule = definition.normalisation

    def key(text: str) -> str:
        # The documented rule: normalise, then a query with personal data counts as its
        # masked text (and is left out of the export below).
        kind, masked = pii_screen(normalise_query(text, rule))
        return masked if kind else normalise_query(text, rule)

    def flagged(text: str) -> bool:
        return pii_screen(normalise_query(text, rule))[0] is not None

    con.create_function("assay_key", key, [duckdb.string_type()], duckdb.string_type())
    con.create_function("assay_flag", flagged, [duckdb.string_type()], "BOOLEAN")
    con.execute(f"CREATE TABLE raw AS SELECT * FROM read_csv('{raw}', all_varchar = true)")
    # Each distinct raw text keyed once (a warehouse would do the same for speed).
    con.execute(
        """CREATE TABLE keyed AS
        SELECT query AS raw_query, assay_key(query) AS key, assay_flag(query) AS personal
        FROM (SELECT DISTINCT query FROM raw WHERE query IS NOT NULL)"""
    )
    con.execute(
        """CREATE TABLE events AS
        SELECT k.key AS query_id, nullif(session_id, '') AS session_id,
               nullif(user_id, '') AS user_id, epoch(TRY_CAST(timestamp AS TIMESTAMPTZ)) AS ts,
               TRY_CAST(result_count AS DOUBLE) AS result_count,
               TRY_CAST(clicked AS DOUBLE) > 0 AS clicked
        FROM raw JOIN keyed AS k ON k.raw_query = raw.query WHERE k.key <> ''"""
    )
    con.execute(
        """CREATE TABLE queries AS
        SELECT key AS query_id, key AS query, bool_or(personal) AS personal
        FROM keyed WHERE key <> '' GROUP BY key"""
    )
    window = repr(float(definition.reformulation_window))
    listed = ", ".join(STATISTICS_COLUMNS)
    exported = f"""SELECT {listed} FROM ({statistics_sql(window)})
        WHERE query NOT IN (SELECT query FROM queries WHERE personal)"""
    options = {"csv": "FORMAT csv, HEADER true", "parquet": "FORMAT parquet"}[export]
    con.execute(f"COPY ({exported}) TO '{out}' ({options})")


def assert_same_stats(left: LogStats, right: LogStats) -> None:
    assert list(left.query) == list(right.query)
    for name in ("frequency", "sessions", "users"):
        np.testing.assert_array_equal(getattr(left, name), getattr(right, name), err_msg=name)
    for name in ("zero_result_rate", "reformulation_rate", "abandonment_rate"):
        # to the last bit: CSV writes a double's shortest exact form
        np.testing.assert_array_equal(getattr(left, name), getattr(right, name), err_msg=name)


@pytest.mark.parametrize("export", ["csv", "parquet"])
def test_a_raw_log_and_its_warehouse_statistics_give_the_same_sample(
    raw_log: Path, tmp_path: Path, export: str
) -> None:
    definition = StrataDefinition(reformulation_window=120.0)
    path = tmp_path / f"stats.{export}"
    warehouse(raw_log, path, definition, export)
    from_log = ingest_log(raw_log, definition=definition)
    from_file = ingest_log(path, definition=definition)
    assert from_file.report is not None and from_file.report.input == "statistics"
    assert_same_stats(from_log, from_file)
    samples = []
    for stats in (from_log, from_file):
        strata = stratify(stats, definition)
        samples.append(sample_queries(stats, strata, quotas=DEFAULT_QUOTAS, seed=7))
    assert [q.to_json() for q in samples[0].queries] == [q.to_json() for q in samples[1].queries]
    assert samples[0].queries  # something was drawn


def test_a_gzipped_statistics_file_reads_alike(raw_log: Path, tmp_path: Path) -> None:
    definition = StrataDefinition()
    plain = tmp_path / "stats.csv"
    warehouse(raw_log, plain, definition, "csv")
    zipped = tmp_path / "stats.csv.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    assert_same_stats(ingest_log(plain), ingest_log(zipped))


HEADER = ",".join(STATISTICS_COLUMNS) + "\n"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("shoes,3,2,1,0.5,0,1\n", None),
        ("shoes,-3,2,1,0.5,0,1\n", "line 2: frequency must be a whole number of at least 1"),
        ("shoes,3,2,1,1.5,0,1\n", "line 2: zero_result_rate must be within [0, 1]"),
        ("shoes,3,2,1,0.5,-0.1,1\n", "line 2: reformulation_rate must be within [0, 1]"),
        ("shoes,3,2,1,0.5,0,1\nhats,1,,,,,\nShoes,2,1,1,0,0,0\n", "line 4: the query 'shoes'"),
        ("shoes,3,-2,1,0.5,0,1\n", "line 2: sessions must be a whole number >= 0"),
        ("shoes,many,2,1,0.5,0,1\n", "line 2: frequency is not a number"),
        (",3,2,1,0.5,0,1\n", "line 2: no query"),
    ],
)
def test_a_statistics_file_is_checked_row_by_row(
    tmp_path: Path, rows: str, message: str | None
) -> None:
    path = tmp_path / "stats.csv"
    path.write_text(HEADER + rows, encoding="utf-8")
    if message is None:
        stats = ingest_log(path)
        assert list(stats.query) == ["shoes"] and list(stats.frequency) == [3]
        return
    with pytest.raises(LogError) as error:
        ingest_log(path)
    assert str(error.value).startswith(f"{path}, line") or str(path) in str(error.value)
    assert message in str(error.value)


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "stats.csv"
    path.write_text("query,frequency,sessions,zero_result_rate\nshoes,3,1,0\n", encoding="utf-8")
    with pytest.raises(LogError, match="missing users, reformulation_rate, abandonment_rate"):
        ingest_log(path, statistics=True)


def test_a_raw_log_is_not_taken_for_statistics(raw_log: Path) -> None:
    stats = ingest_log(raw_log)
    assert stats.report is not None and stats.report.input == "log"


def _run(*args: Any) -> None:
    call_command(*args)


def test_sample_queries_takes_a_statistics_file(
    raw_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stats.parquet"
    warehouse(raw_log, path, StrataDefinition(), "parquet")
    outputs = []
    for given in (raw_log, path):
        _run("sample_queries", "--log", str(given), "--quota", "tail=5,head=2", "--seed", "3")
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_sample_queries_names_a_bad_statistics_file(tmp_path: Path) -> None:
    path = tmp_path / "stats.csv"
    path.write_text(HEADER + "shoes,3,2,1,2,0,1\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"stats\.csv, line 2: zero_result_rate"):
        _run("sample_queries", "--log", str(path), "--quota", "tail=1")
