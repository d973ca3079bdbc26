"""Per-query statistics: what ingestion returns, persists and reads back.

Pure core: no Django.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from .source import LogFormat
from .text import PiiKind

__all__ = [
    "IngestReport",
    "LogStats",
    "PiiCount",
    "QueryStats",
    "fetch_stats",
    "load_stats",
    "report_from_json",
]


@dataclass(frozen=True)
class PiiCount:
    """Queries of one PII kind: distinct normalised queries, and log lines carrying them."""

    kind: PiiKind
    queries: int
    events: int


@dataclass(frozen=True)
class IngestReport:
    """What ingestion read, skipped, replaced and screened, for the upload page and stderr."""

    path: str
    log_format: LogFormat
    columns_found: tuple[str, ...]
    columns_used: Mapping[str, str]
    rows: int
    events: int
    malformed_rows: int
    invalid_utf8_lines: int
    blank_queries: int
    unparsed_timestamps: int
    distinct_raw_queries: int
    distinct_queries: int
    pii_policy: str
    pii: tuple[PiiCount, ...]
    pii_excluded_events: int
    warnings: tuple[str, ...]
    seconds: float
    # Added later: reports stored before them read back with these defaults.
    nul_lines: int = 0
    # What was read: a raw "log", or a per-query "statistics" file (docs/warehouse.md).
    input: str = "log"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["columns_found"] = list(self.columns_found)
        data["pii"] = [asdict(count) for count in self.pii]
        return data


@dataclass(frozen=True)
class QueryStats:
    """The statistics of one normalised query, as a row the caller can persist."""

    query: str
    frequency: int
    sessions: int | None
    users: int | None
    zero_result_rate: float | None
    reformulation_rate: float | None
    abandonment_rate: float | None
    pii: str | None = None


@dataclass(frozen=True)
class LogStats:
    """Per-query statistics as aligned arrays, sorted by query text (code-point order).

    Rates are float arrays with NaN for null; ``sessions`` / ``users`` are None when the log
    has no such column. ``pii`` holds the PII kind of masked queries (None elsewhere).
    """

    query: np.ndarray
    frequency: np.ndarray
    sessions: np.ndarray | None
    users: np.ndarray | None
    zero_result_rate: np.ndarray
    reformulation_rate: np.ndarray
    abandonment_rate: np.ndarray
    pii: np.ndarray
    report: IngestReport | None = None

    def __len__(self) -> int:
        return len(self.frequency)

    def record(self, index: int) -> QueryStats:
        return QueryStats(
            query=str(self.query[index]),
            frequency=int(self.frequency[index]),
            sessions=None if self.sessions is None else int(self.sessions[index]),
            users=None if self.users is None else int(self.users[index]),
            zero_result_rate=_optional(self.zero_result_rate[index]),
            reformulation_rate=_optional(self.reformulation_rate[index]),
            abandonment_rate=_optional(self.abandonment_rate[index]),
            pii=None if self.pii[index] is None else str(self.pii[index]),
        )

    def records(self) -> Iterator[QueryStats]:
        """One :class:`QueryStats` per query, for ``bulk_create``."""
        return (self.record(i) for i in range(len(self)))

    @classmethod
    def from_records(
        cls, records: Sequence[QueryStats], report: IngestReport | None = None
    ) -> LogStats:
        """Rebuild from persisted rows (any order; sorted by query here)."""
        rows = sorted(records, key=lambda r: r.query)

        def counts(name: str) -> np.ndarray | None:
            values = [getattr(r, name) for r in rows]
            if rows and all(v is None for v in values):
                return None
            return np.array([v or 0 for v in values], dtype=np.int64)

        def rates(name: str) -> np.ndarray:
            values = [getattr(r, name) for r in rows]
            return np.array([math.nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            query=np.array([r.query for r in rows], dtype=object),
            frequency=np.array([r.frequency for r in rows], dtype=np.int64),
            sessions=counts("sessions"),
            users=counts("users"),
            zero_result_rate=rates("zero_result_rate"),
            reformulation_rate=rates("reformulation_rate"),
            abandonment_rate=rates("abandonment_rate"),
            pii=np.array([r.pii for r in rows], dtype=object),
            report=report,
        )


def _optional(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def load_stats(database: str | Path) -> LogStats:
    """Read back the statistics ``ingest_log`` wrote to a DuckDB file."""
    with duckdb.connect(str(database), read_only=True) as con:
        report_json = con.execute("SELECT report FROM ingest_report").fetchone()
        columns = {row[0] for row in con.execute("DESCRIBE query_stats").fetchall()}
        report = report_from_json(report_json)
        return fetch_stats(con, "query_stats", "query", columns, report)


def fetch_stats(
    con: duckdb.DuckDBPyConnection,
    table: str,
    order: str,
    columns: set[str],
    report: IngestReport | None,
) -> LogStats:
    listed = ", ".join(sorted(columns))
    data = con.execute(f"SELECT {listed} FROM {table} ORDER BY {order}").fetchnumpy()

    def plain(name: str, dtype: type) -> np.ndarray:
        return np.asarray(np.ma.getdata(data[name]), dtype=dtype)

    missing = np.ma.getmaskarray(data["pii"])
    kinds = np.ma.getdata(data["pii"])
    return LogStats(
        query=plain("query", object),
        frequency=plain("frequency", np.int64),
        sessions=plain("sessions", np.int64) if "sessions" in columns else None,
        users=plain("users", np.int64) if "users" in columns else None,
        zero_result_rate=plain("zero_result_rate", np.float64),
        reformulation_rate=plain("reformulation_rate", np.float64),
        abandonment_rate=plain("abandonment_rate", np.float64),
        pii=np.array([None if m else k for k, m in zip(kinds, missing, strict=True)], object),
        report=report,
    )


def report_from_json(row: tuple[Any, ...] | None) -> IngestReport | None:
    if row is None:
        return None
    data = json.loads(row[0])
    # Reports stored by earlier versions may hold keys since retired (which reader ran).
    known = {field.name for field in fields(IngestReport)}
    data = {key: value for key, value in data.items() if key in known}
    data["columns_found"] = tuple(data["columns_found"])
    data["pii"] = tuple(PiiCount(**count) for count in data["pii"])
    data["warnings"] = tuple(data["warnings"])
    return IngestReport(**data)
