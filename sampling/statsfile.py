"""A per-query statistics file in place of a raw log: the contract of docs/warehouse.md.

When a team's logs live in a warehouse, it runs the reference SQL (``statistics.sql``) there
and exports one row per normalised query: ``query``, ``frequency``, ``sessions``, ``users``,
``zero_result_rate``, ``reformulation_rate``, ``abandonment_rate`` (CSV, TSV, JSON lines or
Parquet, gzip accepted). Read here, it gives the statistics ingesting the raw log gives, so
the same strata, draw and inclusion probabilities.

Every row is checked before anything is used, and the first fault is reported with the file
and the line (row, for Parquet): a missing column, a query missing or given twice, a
frequency that is not a positive whole number, a count that is negative, a rate outside
[0, 1]. Queries are normalised with the one rule (a warehouse's own implementation of it may
differ in a corner) and screened for personal data as ingestion screens them: excluded, or
masked when that keeps queries apart.

Pure core: no Django.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from .source import LogError, Source, identifier
from .stats import IngestReport, LogStats, PiiCount
from .strata import StrataDefinition
from .text import PiiKind, screen_many

__all__ = ["COUNTS", "RATES", "STATISTICS_COLUMNS", "is_statistics", "read_statistics"]

COUNTS = ("frequency", "sessions", "users")
RATES = ("zero_result_rate", "reformulation_rate", "abandonment_rate")
STATISTICS_COLUMNS = ("query", *COUNTS, *RATES)


def is_statistics(columns: Sequence[str]) -> bool:
    """Whether a file's columns are those of a statistics file (``frequency`` and the three
    rates beside ``query``), not of a raw log."""
    return {"query", "frequency", *RATES} <= set(columns)


@dataclass(frozen=True)
class _Row:
    line: str  # "line 7" or "row 7": where a person finds the row
    query: str
    values: Mapping[str, Any]


def read_statistics(
    con: duckdb.DuckDBPyConnection, source: Source, definition: StrataDefinition
) -> LogStats:
    """The statistics a checked statistics file holds, screened and sorted by query."""
    started = time.perf_counter()
    missing = [name for name in STATISTICS_COLUMNS if name not in source.columns]
    if missing:
        raise LogError(
            f"{source.original}: a statistics file needs the columns "
            f"{', '.join(STATISTICS_COLUMNS)}; missing {', '.join(missing)}"
        )
    rows = [_checked(source, i, row) for i, row in enumerate(_rows(con, source))]
    if not rows:
        raise LogError(f"{source.original}: no rows")
    return _screened(source, rows, definition, started)


def _rows(con: duckdb.DuckDBPyConnection, source: Source) -> list[tuple[Any, ...]]:
    listed = ", ".join(identifier(name) for name in STATISTICS_COLUMNS)
    # Rows in file order, so that a fault is named by its line.
    con.execute("SET preserve_insertion_order = true")
    try:
        # Text formats are read as text (every column VARCHAR), so that each value is
        # checked here and a bad one named by its line, not lost in a cast; a malformed
        # line is an error naming it, not a row skipped.
        return con.execute(f"SELECT {listed} FROM {source.relation(strict=True)}").fetchall()
    except duckdb.Error as error:
        first = str(error).strip().splitlines()[0]
        raise LogError(f"{source.original}: cannot read it ({first})") from None


def _where(source: Source, index: int) -> str:
    if source.log_format == "parquet":
        return f"row {index + 1}"
    # One record per line after the header (and the blank lines before it); JSON has none.
    header = 0 if source.log_format == "jsonl" else source.skip + 1
    return f"line {index + 1 + header}"


def _checked(source: Source, index: int, row: tuple[Any, ...]) -> _Row:
    where = _where(source, index)
    values = dict(zip(STATISTICS_COLUMNS, row, strict=True))
    query = values.pop("query")
    if query is None or str(query) == "":
        raise LogError(f"{source.original}, {where}: no query")
    frequency = _number(source, where, "frequency", values["frequency"])
    if frequency is None or frequency < 1 or frequency != int(frequency):
        raise LogError(
            f"{source.original}, {where}: frequency must be a whole number of at least 1, "
            f"got {values['frequency']!r}"
        )
    checked: dict[str, Any] = {"frequency": int(frequency)}
    for name in ("sessions", "users"):
        checked[name] = _count(source, where, name, values[name])
    for name in RATES:
        checked[name] = _rate(source, where, name, values[name])
    return _Row(where, str(query), checked)


def _number(source: Source, where: str, name: str, value: Any) -> float | None:
    if value is None or (isinstance(value, str) and value.strip() in ("", "null", "NULL")):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LogError(f"{source.original}, {where}: {name} is not a number: {value!r}") from None
    if number != number:  # NaN: the contract's "unknown" is an empty value
        return None
    return number


def _count(source: Source, where: str, name: str, value: Any) -> int | None:
    number = _number(source, where, name, value)
    if number is None:
        return None
    if number < 0 or number != int(number):
        raise LogError(
            f"{source.original}, {where}: {name} must be a whole number >= 0, got {value!r}"
        )
    return int(number)


def _rate(source: Source, where: str, name: str, value: Any) -> float:
    number = _number(source, where, name, value)
    if number is None:
        return float("nan")
    if not 0.0 <= number <= 1.0:
        raise LogError(f"{source.original}, {where}: {name} must be within [0, 1], got {value!r}")
    return number


def _screened(
    source: Source, rows: list[_Row], definition: StrataDefinition, started: float
) -> LogStats:
    """Normalise and screen every query; refuse two rows that become one query."""
    screened = screen_many([row.query for row in rows], definition.normalisation)
    kept: dict[str, tuple[_Row, PiiKind | None]] = {}
    blank = excluded = 0
    pii: dict[str, list[int]] = {}
    for row, (norm, kind, masked) in zip(rows, screened, strict=True):
        if norm == "":
            blank += row.values["frequency"]
            continue
        if kind is not None:
            counts = pii.setdefault(kind, [0, 0])
            counts[0] += 1
            counts[1] += row.values["frequency"]
            if definition.pii == "exclude":
                excluded += row.values["frequency"]
                continue
        query = masked if kind else norm
        if query in kept:
            raise LogError(
                f"{source.original}, {row.line}: the query {query!r} is given twice "
                f"(first at {kept[query][0].line}, once normalised"
                f"{' and masked' if kind else ''}); give each normalised query one row"
            )
        kept[query] = (row, kind)
    if not kept:
        raise LogError(
            f"{source.original}: no queries left: every query is blank or looks like personal data"
        )
    return _stats(source, kept, rows, blank, excluded, pii, definition, started)


def _stats(
    source: Source,
    kept: dict[str, tuple[_Row, PiiKind | None]],
    rows: list[_Row],
    blank: int,
    excluded: int,
    pii: dict[str, list[int]],
    definition: StrataDefinition,
    started: float,
) -> LogStats:
    order = sorted(kept)
    values = [kept[query][0].values for query in order]

    def counts(name: str) -> np.ndarray | None:
        if all(value[name] is None for value in values):
            return None
        return np.array([value[name] or 0 for value in values], dtype=np.int64)

    frequency = np.array([value["frequency"] for value in values], dtype=np.int64)
    report = IngestReport(
        path=str(source.original),
        log_format=source.log_format,
        columns_found=source.columns,
        columns_used={name: name for name in STATISTICS_COLUMNS},
        rows=len(rows),
        events=int(frequency.sum()),
        malformed_rows=0,
        invalid_utf8_lines=source.invalid_utf8_lines,
        blank_queries=blank,
        unparsed_timestamps=0,
        distinct_raw_queries=len(rows),
        distinct_queries=len(order),
        pii_policy=definition.pii,
        pii=tuple(
            PiiCount(kind, found[0], found[1])  # type: ignore[arg-type]
            for kind, found in sorted(pii.items())
        ),
        pii_excluded_events=excluded,
        warnings=(),
        seconds=time.perf_counter() - started,
        input="statistics",
    )
    return LogStats(
        query=np.array(order, dtype=object),
        frequency=frequency,
        sessions=counts("sessions"),
        users=counts("users"),
        zero_result_rate=np.array([v["zero_result_rate"] for v in values], dtype=np.float64),
        reformulation_rate=np.array([v["reformulation_rate"] for v in values], dtype=np.float64),
        abandonment_rate=np.array([v["abandonment_rate"] for v in values], dtype=np.float64),
        pii=np.array([kept[query][1] for query in order], dtype=object),
        report=report,
    )
