"""A search log in, per-query statistics out: the ingestion half of query sampling.

Engine: DuckDB, embedded. It reads CSV, TSV, JSON lines and Parquet (gzip too) natively and
out of core: hash tables, sorts and temporary tables spill to a private directory beyond a
memory limit, so a log larger than RAM is read in bounded memory; it parallelises every
phase; and it is one pip dependency, not a server. pandas would need the whole log in memory
(about three times the CSV's size), a hand-written streaming reader would need its own
external sort for sessions. The phases (SQL in :mod:`sampling.sql`):

1. **events** (the one pass over the file): every line becomes a compact row (raw query
   text and its 64-bit hash, hashed session and user, time, outcome flags); malformed lines
   are skipped and counted, invalid UTF-8 is repaired into a temporary copy and counted,
   and a quote left open or line endings DuckDB cannot follow send the file through a copy
   holding one record per line, so that one bad line costs that line, never the rest of the
   file (:mod:`sampling.read`);
2. **dictionary**: distinct raw query strings and their counts, grouped from those rows
   (cheaper than parsing the file a second time);
3. **screening**: each distinct string (never each line) is normalised and screened for
   personal data, and every normalised query gets a dense integer id, in text order;
4. **sessions**: the rows, by query id now (matched by the hash of their raw text), feed
   one hash aggregation for the distinct sessions and users and one window over sessions
   (partitioned by session, ordered by time) for each event's successor and the session's
   last click;
5. **reformulations**: (query, successor) pairs within the window are tested for
   similarity once per distinct pair.

Raw rows live only in DuckDB's temporary storage and are gone when the connection closes;
only per-query statistics are returned (and, on request, written to a DuckDB file).

Definitions (per normalised query; its "events" are the log lines with that query):

- ``frequency``: number of events;
- ``sessions`` / ``users``: distinct non-empty session / user ids among its events (ids are
  compared by their 64-bit hash; a collision is astronomically unlikely at log sizes);
- ``zero_result_rate``: share of its events with ``result_count == 0``, over events whose
  result count parses as a number;
- ``reformulation_rate``: the events of a session that have a parsable timestamp are
  ordered by (timestamp, normalised query). Event i is *reformulated* when the next event
  i + 1 of the same session satisfies ``0 < t[i+1] - t[i] <= window`` and
  ``q[i+1] != q[i]`` and the two queries are similar: they share at least one term
  (whitespace-separated token of the normalised text) or their Levenshtein distance is at
  most ``min(2, ceil(0.3 * L))`` with L the longer length (one-letter typos in short
  queries count, unrelated two-letter queries do not). The rate is over the query's events
  that have a session and a timestamp. Epoch timestamps may be in seconds, milliseconds,
  microseconds or nanoseconds: the typical size of the log's times tells which, and the
  window is converted into that unit. The default window, 5 minutes, is long enough to read
  a result page and come back, short enough that a new need later in the session is not
  taken for a rephrasing;
- ``abandonment_rate``: share of those same events after which the session has no click:
  no event of the session with a timestamp >= t has ``clicked`` set (a click at the very
  same second counts as after);
- a rate is null (NaN in arrays) when the log lacks a column it needs, or when none of the
  query's events has the needed values. Blank queries are dropped (and counted).

Pure core: no Django.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import numpy as np

from .read import (
    ReadPlan,
    Rejects,
    describe_or_repair,
    first_bad_line,
    first_line_of,
    late_keys,
    one,
    read_events,
)
from .source import (
    MAX_LINE_BYTES,
    ColumnMap,
    LogError,
    LogFormat,
    Source,
    field_sql,
    sql_string,
)
from .sql import (
    numbering_sql,
    per_query_sql,
    register_screen,
    screen_sql,
    stats_columns,
    stats_sql,
)
from .stats import (
    IngestReport,
    LogStats,
    PiiCount,
    fetch_stats,
)
from .statsfile import is_statistics, read_statistics
from .strata import StrataDefinition

__all__ = ["EngineSettings", "ProgressCallback", "ingest_log"]

ProgressCallback = Callable[[float, str], None]


@dataclass(frozen=True)
class EngineSettings:
    """DuckDB resources: the memory limit it spills beyond, threads, and where it spills.

    ``threads`` None means the machine's cores, at most 4 (more threads need more memory
    for the same work); ``temp_directory`` None means a fresh private directory that is
    deleted afterwards. Past ``memory_limit`` DuckDB's sorts, hash tables and temporary
    tables spill into that directory, so a log larger than memory is read, more slowly,
    instead of failing.
    """

    memory_limit: str = "500MB"
    threads: int | None = None
    temp_directory: str | None = None
    max_line_bytes: int = MAX_LINE_BYTES  # a longer line is refused (see sampling.source)


# --------------------------------------------------------------------------- ingestion


def ingest_log(
    path: str | Path,
    *,
    columns: ColumnMap | None = None,
    log_format: LogFormat | None = None,
    definition: StrataDefinition | None = None,
    database: str | Path | None = None,
    engine: EngineSettings | None = None,
    on_progress: ProgressCallback | None = None,
    statistics: bool | None = None,
) -> LogStats:
    """Read the log at ``path`` into per-query statistics (see the module docstring).

    A per-query statistics file (docs/warehouse.md) is read in place of a raw log when
    ``statistics`` is true, or, when it is None, when its columns are those of one
    (:func:`sampling.statsfile.is_statistics`); it is checked row by row.

    ``definition`` supplies the normalisation, the reformulation window and the PII policy.
    With ``database`` the statistics are also written to that DuckDB file (tables
    ``query_stats`` and ``ingest_report``; :func:`load_stats` reads them back).
    ``on_progress(fraction, message)`` is called from the calling thread, at least every
    half second during the long phases; an exception it raises interrupts the ingestion.
    Raises :class:`LogError` for a log that cannot be read as asked.
    """
    rule = definition or StrataDefinition()
    settings = engine or EngineSettings()
    try:
        return _ingest(
            Path(path), columns, log_format, rule, database, settings, on_progress, statistics
        )
    except duckdb.OutOfMemoryException as error:
        raise LogError(
            f"{path}: the log needs more memory than the limit of {settings.memory_limit} "
            f"allows even with spilling to disk ({first_line_of(error)}); raise the limit"
        ) from None


def _ingest(
    path: Path,
    columns: ColumnMap | None,
    log_format: LogFormat | None,
    rule: StrataDefinition,
    database: str | Path | None,
    settings: EngineSettings,
    on_progress: ProgressCallback | None,
    statistics: bool | None,
) -> LogStats:
    started = time.perf_counter()
    with _Connection(settings, database, rule) as (con, workdir):
        run = _Runner(con, on_progress)
        run.report(0.0, "reading the log")
        source = _describe_by_name(con, path, log_format, workdir)
        if statistics or (statistics is None and is_statistics(source.columns)):
            stats = read_statistics(con, source, rule)
            if database is not None:
                _persist_stats(con, stats)
            run.report(1.0, f"{len(stats)} distinct queries")
            return stats
        mapping = (columns or ColumnMap()).matched(source.columns)
        source = replace(source, max_line_bytes=settings.max_line_bytes)
        if source.log_format == "jsonl":
            source = replace(source, text_keys=(mapping.column("query"),))
        fields, used = field_sql(source, mapping)
        found = source.columns
        unseen = tuple(name for name, column in used.items() if column not in found)
        if source.log_format == "jsonl":
            # JSON objects can be large: parse only the keys that are used.
            source = replace(source, columns=tuple(used.values()))
        read = ReadPlan(fields, used, unseen)
        source, rejects = read_events(con, run, source, read, workdir)
        if unseen:
            fields, used, found = late_keys(con, replace(source, columns=found), mapping, read)
        screened, by_hash = _screen(con, run, rule, path)
        # Timestamps stay in their unit; the window is converted into it instead.
        unit = _epoch_unit(con)
        for statement in per_query_sql(rule.reformulation_window * unit[0], by_hash):
            run(statement, 0.55, 0.96, "following sessions")
        run(stats_sql(fields), 0.96, 0.99, "summarising")
        report = _report(
            con, replace(source, columns=found), used, rejects, screened, rule, started, unit
        )
        # Ids follow query-text order: sorting integers spares sorting a million strings.
        stats = fetch_stats(con, "_stats", "nid", set(stats_columns(fields)), report)
        if database is not None:
            _persist(con, report)
        run.report(1.0, f"{len(stats)} distinct queries")
        return stats


# DuckDB takes these characters in a file name as a pattern ("log[1].csv" reads "log1.csv").
_PATTERN = re.compile(r"[*?\[\]{}]")


def _describe_by_name(
    con: duckdb.DuckDBPyConnection, path: Path, log_format: LogFormat | None, workdir: Path
) -> Source:
    """:func:`describe_or_repair` for exactly the file named, whatever its name holds.

    A name DuckDB would expand as a pattern is read through a plainly named link to it;
    messages and the report still name the file itself.
    """
    if not _PATTERN.search(path.name) or not path.is_file():
        return describe_or_repair(con, path, log_format, workdir)
    link = workdir / ("log" + "".join(path.suffixes[-2:]))
    link.symlink_to(path.resolve())
    try:
        source = describe_or_repair(con, link, log_format, workdir)
    except LogError as error:
        raise LogError(str(error).replace(str(link), str(path))) from None
    return replace(source, original=path)


def _threads(settings: EngineSettings) -> int:
    return settings.threads or min(os.cpu_count() or 1, 4)


class _Runner:
    """Runs one SQL statement at a time, reporting DuckDB's progress through the callback.

    The statement runs on a worker thread while this thread polls ``query_progress`` and
    calls the callback, so the callback never runs on a foreign thread (Django's ORM, for
    one, keeps a connection per thread).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, callback: ProgressCallback | None) -> None:
        self.con = con
        self.callback = callback
        self.reached = 0.0

    def report(self, fraction: float, message: str) -> None:
        """Report progress; it never goes backwards, whatever the phases' estimates."""
        self.reached = min(max(fraction, self.reached), 1.0)
        if self.callback is not None:
            self.callback(self.reached, message)

    def __call__(self, sql: str, start: float, end: float, message: str) -> None:
        if self.callback is None:
            self.con.execute(sql)
            return
        self.report(start, message)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(self.con.execute, sql)
            while True:
                try:
                    future.result(timeout=0.5)
                    return
                except concurrent.futures.TimeoutError:
                    self._poll(start, end, message)

    def _poll(self, start: float, end: float, message: str) -> None:
        done = self.con.query_progress()
        fraction = start + (end - start) * (done / 100.0 if done >= 0 else 0.0)
        try:
            self.report(fraction, message)
        except BaseException:
            # Stop DuckDB before the exception leaves: the pool waits for the statement.
            self.con.interrupt()
            raise


class _Connection:
    """A private DuckDB connection and working directory, both gone on exit."""

    def __init__(
        self, engine: EngineSettings, database: str | Path | None, rule: StrataDefinition
    ) -> None:
        self.engine = engine
        self.database = database
        self.rule = rule

    def __enter__(self) -> tuple[duckdb.DuckDBPyConnection, Path]:
        if self.engine.temp_directory:
            Path(self.engine.temp_directory).mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="assay-log-", dir=self.engine.temp_directory))
        self.con = duckdb.connect(str(self.database) if self.database else ":memory:")
        threads = _threads(self.engine)
        for statement in (
            f"SET memory_limit = {sql_string(self.engine.memory_limit)}",
            f"SET threads = {int(threads)}",
            f"SET temp_directory = {sql_string(str(self.workdir / 'spill'))}",
            # Row order of intermediate results is never relied on: let DuckDB drop it.
            "SET preserve_insertion_order = false",
            # Naive timestamps are read as UTC; only differences within a session matter.
            "SET TimeZone = 'UTC'",
            "SET enable_progress_bar = true",
            "SET enable_progress_bar_print = false",
        ):
            self.con.execute(statement)
        register_screen(self.con, self.rule.normalisation)
        return self.con, self.workdir

    def __exit__(self, *exc: object) -> None:
        self.con.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


# --------------------------------------------------------------------------- phases


@dataclass(frozen=True)
class _Screened:
    """What normalising and screening the distinct queries found."""

    rows: int
    blank: int
    distinct_raw: int
    distinct_queries: int
    pii: tuple[PiiCount, ...]
    pii_excluded_events: int
    nul_lines: int


def _screen(
    con: duckdb.DuckDBPyConnection, run: _Runner, rule: StrataDefinition, path: Path
) -> tuple[_Screened, bool]:
    """Normalise, screen and number the distinct queries; map raw strings to query ids.

    Returns what was found, and whether raw strings are keyed by their hash (true unless
    two distinct strings of this log share one).
    """
    run(screen_sql(), 0.42, 0.50, "normalising and screening queries")
    by_hash = bool(one(con, "SELECT count(DISTINCT qh) = count(*) FROM _keyed")[0])
    if by_hash:
        # The text has served its purpose: events are matched by its hash from now on.
        con.execute("ALTER TABLE _events DROP COLUMN raw")
    for statement in numbering_sql(rule.pii, by_hash):
        run(statement, 0.50, 0.55, "numbering queries")
    screened = _screen_counts(con, rule, path)
    con.execute("DROP TABLE _keyed")
    con.execute("DROP TABLE _raw")
    return screened, by_hash


def _screen_counts(con: duckdb.DuckDBPyConnection, rule: StrataDefinition, path: Path) -> _Screened:
    rows, null_queries, distinct_raw, nul = one(
        con,
        """SELECT coalesce(sum(n), 0), coalesce(sum(n) FILTER (WHERE raw IS NULL), 0),
                  count(*) FILTER (WHERE raw IS NOT NULL),
                  coalesce(sum(n) FILTER (WHERE contains(raw, chr(0))), 0) FROM _raw""",
    )
    (blank,) = one(con, "SELECT coalesce(sum(n), 0) FROM _keyed WHERE norm = ''")
    (distinct,) = one(con, "SELECT count(*) FROM _norms WHERE NOT excluded")
    found = con.execute(
        """SELECT pii, count(DISTINCT norm), sum(n) FROM _keyed
           WHERE pii IS NOT NULL GROUP BY pii ORDER BY pii"""
    ).fetchall()
    pii = tuple(PiiCount(kind, int(queries), int(events)) for kind, queries, events in found)
    if distinct == 0:
        raise LogError(f"{path}: no queries left: every query is blank or looks like personal data")
    excluded = sum(count.events for count in pii) if rule.pii == "exclude" else 0
    return _Screened(
        int(rows),
        int(null_queries + blank),
        int(distinct_raw),
        int(distinct),
        pii,
        excluded,
        int(nul),
    )


def _report(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    used: Mapping[str, str],
    rejects: Rejects,
    screened: _Screened,
    rule: StrataDefinition,
    started: float,
    unit: tuple[float, str],
) -> IngestReport:
    (bad_ts,) = one(con, "SELECT coalesce(sum(bad_ts), 0) FROM _norms")
    (events,) = one(con, "SELECT coalesce(sum(frequency), 0) FROM _stats")
    malformed = rejects.lines + source.blanked_lines
    return IngestReport(
        path=str(source.original),
        log_format=source.log_format,
        columns_found=source.columns,
        columns_used=dict(used),
        rows=screened.rows,
        events=int(events),
        malformed_rows=malformed,
        invalid_utf8_lines=source.invalid_utf8_lines,
        blank_queries=screened.blank,
        unparsed_timestamps=int(bad_ts),
        distinct_raw_queries=screened.distinct_raw,
        distinct_queries=screened.distinct_queries,
        pii_policy=rule.pii,
        pii=screened.pii,
        pii_excluded_events=screened.pii_excluded_events,
        warnings=_warnings(
            source, used, (malformed, first_bad_line(source, rejects)), int(bad_ts), unit
        )
        + _nul_warning(screened.nul_lines),
        seconds=time.perf_counter() - started,
        nul_lines=screened.nul_lines,
    )


def _warnings(
    source: Source,
    used: Mapping[str, str],
    malformed: tuple[int, int | None],
    bad_ts: int,
    unit: tuple[float, str],
) -> tuple[str, ...]:
    notes = []
    if "session_id" not in used or "timestamp" not in used:
        notes.append(
            "no session_id or no timestamp column: reformulation and abandonment rates are null"
        )
    elif "clicked" not in used:
        notes.append("no clicked column: abandonment rates are null")
    if "result_count" not in used:
        notes.append("no result_count column: zero-result rates are null")
    skipped, first = malformed
    if skipped:
        at = f", the first at line {first}" if first is not None else ""
        why = (
            "not a JSON object, or a query that is not a string"
            if source.log_format == "jsonl"
            else "wrong number of fields or a quote left open"
        )
        notes.append(f"{skipped} malformed line(s) skipped ({why}){at}")
    if source.invalid_utf8_lines:
        notes.append(
            f"{source.invalid_utf8_lines} line(s) with invalid UTF-8: bytes replaced by U+FFFD"
        )
    if bad_ts:
        notes.append(f"{bad_ts} timestamp(s) could not be parsed and were treated as missing")
    if unit[0] != 1:
        notes.append(f"numeric timestamps read as epoch {unit[1]}: their size says so")
    return tuple(notes)


# Epoch times of this century are about 1.7e9 in seconds, 1.7e12 in milliseconds and so on:
# a typical time above 1e11 (the year 5138 in seconds) cannot be seconds.
_EPOCH_UNITS = (
    (1e17, 1e9, "nanoseconds"),
    (1e14, 1e6, "microseconds"),
    (1e11, 1e3, "milliseconds"),
)


def _epoch_unit(con: duckdb.DuckDBPyConnection) -> tuple[float, str]:
    """Units per second of the log's timestamps, and the unit's name, from their size.

    Exports write epoch milliseconds as often as seconds; read as seconds they would make
    the reformulation window a thousand times shorter. The median of the queries' latest
    times decides, so that a few wild values cannot change the unit of the whole log; ISO
    8601 times are converted to seconds and count as seconds.
    """
    (typical,) = one(con, "SELECT median(max_ts) FROM _norms WHERE NOT isnan(max_ts)")
    return epoch_unit(typical)


def epoch_unit(typical: float | None) -> tuple[float, str]:
    """Units per second and the unit's name, for the median of the queries' latest times."""
    for bound, per_second, name in _EPOCH_UNITS:
        if typical is not None and typical > bound:
            return per_second, name
    return 1.0, "seconds"


def _nul_warning(lines: int) -> tuple[str, ...]:
    if not lines:
        return ()
    return (f"{lines} line(s) with a NUL character in the query: replaced by U+FFFD",)


def _persist_stats(con: duckdb.DuckDBPyConnection, stats: LogStats) -> None:
    """Write statistics read from a file as ingestion writes its own ``_stats``."""
    columns: dict[str, object] = {"nid": np.arange(len(stats)), "query": stats.query}
    columns["frequency"] = stats.frequency
    for name in ("sessions", "users"):
        if getattr(stats, name) is not None:
            columns[name] = getattr(stats, name)
    for name in ("zero_result_rate", "reformulation_rate", "abandonment_rate"):
        columns[name] = getattr(stats, name)
    columns["pii"] = stats.pii
    con.register("_read_columns", columns)
    # DuckDB reads NaN from NumPy as NULL: the rates are put back to NaN, as ingestion stores.
    listed = ", ".join(
        f"coalesce({name}, CAST('NaN' AS DOUBLE)) AS {name}" if name.endswith("_rate") else name
        for name in columns
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE _stats AS SELECT {listed} FROM _read_columns")
    con.unregister("_read_columns")
    assert stats.report is not None
    _persist(con, stats.report)


def _persist(con: duckdb.DuckDBPyConnection, report: IngestReport) -> None:
    con.execute(
        "CREATE OR REPLACE TABLE query_stats AS SELECT * EXCLUDE (nid) FROM _stats ORDER BY nid"
    )
    con.execute("CREATE OR REPLACE TABLE ingest_report (report VARCHAR)")
    con.execute("INSERT INTO ingest_report VALUES (?)", [json.dumps(report.to_dict())])
    con.execute("CHECKPOINT")
