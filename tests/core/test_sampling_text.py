"""Query text: phone numbers in the privacy screen, and NUL characters in normalisation.

Each case runs through the rule as called on one text and as DuckDB applies it to a vector
of distinct strings during ingestion (the function it registers).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from sampling.core import (
    EngineSettings,
    Normalisation,
    ingest_log,
    normalise_query,
    pii_screen,
)
from sampling.sql import SCREEN_UDF, register_screen


def screen_in_duckdb(text: str, rule: Normalisation | None = None) -> tuple[str, str | None, str]:
    """(normalised text, PII kind, query) as ingestion computes them inside DuckDB."""
    con = duckdb.connect()
    register_screen(con, rule or Normalisation())
    row = con.execute(f"SELECT s.norm, s.pii, s.query FROM (SELECT {SCREEN_UDF}(?) AS s)", [text])
    found = row.fetchone()
    assert found is not None
    return found[0], found[1], found[2]


def screen_in_sql(text: str) -> tuple[str | None, str]:
    _, kind, query = screen_in_duckdb(text, Normalisation(False, False, False))
    return kind, query


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("555 123 4567", "[phone]"),
        ("call me 555 123 4567", "call me [phone]"),
        ("415 555 2671 ext 3", "[phone] ext 3"),
        ("call 555.123 4567", "call [phone]"),
        ("06 12 34 56 78", "[phone]"),
        ("appeler 06-12-34-56-78", "appeler [phone]"),
        ("0044 20 7946 0958", "[phone]"),
        ("0033 6 12 34 56 78 bureau", "[phone] bureau"),
        ("1 800 555 0199", "1 [phone]"),
        ("phone 020 7946 0958", "phone [phone]"),
    ],
)
def test_it_finds_phone_numbers_grouped_by_spaces(text: str, masked: str) -> None:
    assert pii_screen(text) == ("phone", masked)
    assert screen_in_sql(text) == ("phone", masked)


@pytest.mark.parametrize(
    "text",
    [
        "iphone 15 pro 256",
        "2024 tax form 1040",
        "windows 10 21h2",
        "top 10 movies 2023",
        "route 66 map",
        "nba 2019 2020 season",
        "rtx 4090 24gb",
        "ip 192.168.100.200",
        "2024-01-15 schedule",
        "zip 10115 berlin",
        "1080p 60hz 144 hz",
        "covid-19 2020-2021",
        "007 no time to die",
    ],
)
def test_it_leaves_ordinary_queries_with_numbers_alone(text: str) -> None:
    assert pii_screen(text) == (None, text)
    assert screen_in_sql(text) == (None, text)


# --------------------------------------------------------------------------- NUL


@pytest.mark.parametrize("rule", [Normalisation(), Normalisation(False, False, False)])
@pytest.mark.parametrize("text", ["foo\x00bar", "\x00", "Ünï\x00code", "a \x00 b"])
def test_it_replaces_nul_characters_alone_and_in_duckdb(text: str, rule: Normalisation) -> None:
    # PostgreSQL text cannot hold NUL: whatever the normalisation, it becomes U+FFFD.
    expected = normalise_query(text, rule)
    assert "\x00" not in expected and "\ufffd" in expected
    assert screen_in_duckdb(text, rule)[0] == expected


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("log.csv", b"query\nfoo\x00bar\nbaz\nfoo\x00bar\n"),
        ("log.jsonl", b'{"query":"foo\\u0000bar"}\n{"query":"baz"}\n{"query":"foo\\u0000bar"}\n'),
    ],
)
def test_it_counts_the_lines_whose_query_held_a_nul(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    stats = ingest_log(path, engine=EngineSettings(memory_limit="200MB", threads=2))
    assert sorted(stats.query) == ["baz", "foo\ufffdbar"]
    report = stats.report
    assert report is not None and report.nul_lines == 2
    assert any("NUL" in warning for warning in report.warnings)
