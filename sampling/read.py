"""The one pass over a log file, and the repaired copies read instead when it goes wrong.

:mod:`sampling.ingest` calls :func:`describe_or_repair`, then :func:`read_events`
(which fills ``_events`` and the dictionary ``_raw``), then, for JSON keys DuckDB's sample did
not see, :func:`late_keys`.

- Invalid UTF-8 (DuckDB's sniffer or reader reports it): the file is read from a copy with
  the bytes replaced, and the lines affected are counted.
- A CSV record that ran over several lines (a quote left open takes the lines after it
  along) or line endings DuckDB's reader cannot follow (CR LF and LF mixed, a stray CR): the
  file is read from a copy holding one record per line, in which a line leaving a quote open
  is blanked and counted. Every line of that copy must come back as a row or a rejected
  line; if some do not, the ingestion fails naming the file and line rather than report a
  count that hides lost rows.
- A JSON line that is not a JSON object (DuckDB stops at the first one, naming the wrong
  line): the file is read from a copy in which such lines are blanked and counted.

Either copy is made only when DuckDB reported the problem, so a sound file is read once.

Pure core: no Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb

from .source import (
    ColumnMap,
    Copy,
    LogError,
    LogFormat,
    Source,
    check_columns,
    describe,
    is_encoding_error,
    locate,
    long_line,
    transcode,
)
from .sql import dictionary_sql, events_sql

__all__ = [
    "ReadPlan",
    "Rejects",
    "Run",
    "describe_or_repair",
    "first_bad_line",
    "first_line_of",
    "late_keys",
    "one",
    "read_events",
]

# Runs one statement, reporting progress between two fractions with a message.
Run = Callable[[str, float, float, str], None]


def describe_or_repair(
    con: duckdb.DuckDBPyConnection, path: Path, log_format: LogFormat | None, workdir: Path
) -> Source:
    source = locate(path, log_format)
    try:
        return describe(con, source)
    except duckdb.OutOfMemoryException:
        raise
    except duckdb.Error as error:
        copy = _copy_or_fail(source, error, path)
    # DuckDB's sniffer itself tripped over invalid UTF-8 or a broken JSON line: repair
    # first, then look again.
    return _describe_copy(con, transcode(source, workdir, line_safe=copy == "lines"), workdir)


def _describe_copy(con: duckdb.DuckDBPyConnection, copy: Source, workdir: Path) -> Source:
    """:func:`describe` a repaired copy; whatever still fails is the file's fault.

    A copy with only its UTF-8 repaired may still hold a broken JSON line: then the
    one-record-per-line copy is described instead.
    """
    try:
        return describe(con, copy)
    except duckdb.OutOfMemoryException:
        raise
    except duckdb.Error as error:
        if _copy_for_error(copy, error) == "lines":
            return _describe_copy(con, transcode(copy, workdir, line_safe=True), workdir)
        if copy.data_lines == 0:  # nothing left to describe: every line was malformed
            raise LogError(f"{copy.original}: {_no_rows(copy, Rejects())}") from None
        raise LogError(f"{copy.original}: {_message(error, copy)}") from None


@dataclass(frozen=True)
class Rejects:
    """The lines DuckDB rejected in one read of a CSV or TSV file.

    ``lines`` counts distinct rejected lines (a line can fail in two ways at once),
    ``first`` is the first of them, ``encoding`` the lines with invalid UTF-8, and
    ``spanning`` says whether a rejected record ran over several lines: a quote left open
    took the lines after it along.
    """

    lines: int = 0
    first: int | None = None
    encoding: int = 0
    spanning: bool = False


@dataclass(frozen=True)
class ReadPlan:
    """What the pass over the file reads: SQL per field, field -> column, and the fields
    whose column must be probed for (JSON keys DuckDB's sample did not see)."""

    fields: Mapping[str, str]
    used: Mapping[str, str]
    probe: tuple[str, ...] = ()


def read_events(
    con: duckdb.DuckDBPyConnection,
    run: Run,
    source: Source,
    read: ReadPlan,
    workdir: Path,
) -> tuple[Source, Rejects]:
    """The one pass over the file (again over a repaired copy if need be), then the dictionary."""
    rejects, copy = _scan(con, run, source, read)
    if copy == "none" and source.text_keys and source.copy != "lines":
        # A query that is a number or an object: the lines copy blanks (and counts) its line.
        copy = "lines" if one(con, "SELECT bool_or(not_text) FROM _events")[0] else "none"
    if copy != "none":
        repaired = transcode(source, workdir, line_safe=copy == "lines")
        repaired = _describe_copy(con, repaired, workdir)
        # The copy is read for the same columns (for JSON, the keys chosen, not those sampled).
        return read_events(con, run, replace(repaired, columns=source.columns), read, workdir)
    if source.copy == "lines":
        _check_accounted(con, source, rejects)
    if one(con, "SELECT count(*) FROM _events")[0] == 0:
        _check_line_lengths(source)
        raise LogError(f"{source.original}: {_no_rows(source, rejects)}")
    run(dictionary_sql(), 0.35, 0.42, "counting distinct queries")
    return source, rejects


def _scan(
    con: duckdb.DuckDBPyConnection, run: Run, source: Source, read: ReadPlan
) -> tuple[Rejects, Copy]:
    """Read the file into ``_events``; say which copy of it must be read instead, if any."""
    # DuckDB appends to its rejects tables: empty them, so they hold this read's lines only.
    con.execute("DROP TABLE IF EXISTS reject_errors")
    con.execute("DROP TABLE IF EXISTS reject_scans")
    try:
        run(events_sql(source, read.fields, read.used, read.probe), 0.02, 0.35, "reading events")
    except duckdb.OutOfMemoryException:
        raise
    except duckdb.Error as error:
        return Rejects(), _copy_or_fail(source, error, source.original)
    rejects = _rejects(con, source)
    return rejects, _copy_for_rejects(source, rejects)


def _copy_or_fail(source: Source, error: duckdb.Error, name: str | Path) -> Copy:
    """The copy that reading ``source`` again needs after ``error``; a LogError naming the
    file as ``name`` when no copy can help."""
    copy = _copy_for_error(source, error)
    if copy == "none":
        raise LogError(f"{name}: {_message(error, source)}") from None
    return copy


def _copy_for_error(source: Source, error: duckdb.Error) -> Copy:
    """The copy that may read a file DuckDB gave up on, or "none" if no copy would help."""
    text = str(error).lower()
    if source.log_format in ("csv", "tsv") and "state machine" in text:
        # Line endings DuckDB's CSV reader cannot follow (CR LF and LF mixed, a stray CR).
        return "lines" if source.copy != "lines" else "none"
    if source.log_format == "jsonl" and _broken_json(error):
        return "lines" if source.copy != "lines" else "none"
    if is_encoding_error(error):
        return "utf8" if source.copy == "none" else "none"
    return "none"


def _broken_json(error: duckdb.Error) -> bool:
    """Whether DuckDB gave up on a JSON line that does not parse or is not an object."""
    text = str(error).lower()
    signs = ("malformed json", "expected records", "expected object", "non-record json")
    return any(sign in text for sign in signs)


def _copy_for_rejects(source: Source, rejects: Rejects) -> Copy:
    if rejects.spanning and source.copy != "lines":
        return "lines"
    if rejects.encoding and source.copy == "none":
        return "utf8"
    return "none"


def _rejects(con: duckdb.DuckDBPyConnection, source: Source) -> Rejects:
    if source.log_format not in ("csv", "tsv"):
        return Rejects()
    # A record that ran on past its line holds a line break, or is an open quoted value.
    lines, first, encoding, spanning = one(
        con,
        """SELECT count(DISTINCT line) FILTER (WHERE error_type <> 'INVALID ENCODING'),
                  min(line) FILTER (WHERE error_type <> 'INVALID ENCODING'),
                  count(DISTINCT line) FILTER (WHERE error_type = 'INVALID ENCODING'),
                  coalesce(bool_or(contains(coalesce(csv_line, ''), chr(10))
                                   OR contains(coalesce(csv_line, ''), chr(13))
                                   OR error_message ILIKE '%unterminated quote%'), false)
           FROM reject_errors""",
    )
    return Rejects(int(lines), None if first is None else int(first), int(encoding), spanning)


def _check_line_lengths(source: Source) -> None:
    """Say so when a line too long for DuckDB is why no row was read."""
    found = long_line(source)
    if found is not None:
        number, size = found
        raise LogError(
            f"{source.original}: line {number} is longer than the limit of "
            f"{source.max_line_bytes:,} bytes ({size:,} bytes or more); a log holds one "
            "search per line: is this file one?"
        )


def _check_accounted(con: duckdb.DuckDBPyConnection, source: Source, rejects: Rejects) -> None:
    """Every line of a one-record-per-line copy is a row or a rejected line; else fail loudly.

    The copy was made because quoting went wrong; if lines still went missing, a count that
    looks right would hide lost rows.
    """
    (rows,) = one(con, "SELECT count(*) FROM _events")
    short = (source.data_lines or 0) - int(rows) - rejects.lines
    if short > 0:
        raise LogError(
            f"{source.original}: {short} line(s) were neither read nor reported as malformed "
            f"(the quoting breaks down near line {first_bad_line(source, rejects) or 1}); "
            "fix the file's quotes and read it again"
        )


def late_keys(
    con: duckdb.DuckDBPyConnection, source: Source, mapping: ColumnMap, read: ReadPlan
) -> tuple[dict[str, str], dict[str, str], tuple[str, ...]]:
    """Fields, columns used and columns found, once the probed JSON keys have been looked for.

    A key that occurs somewhere counts as found; a field whose key occurs nowhere is missing
    after all: an error if it was mapped explicitly, otherwise its signals are null (as an
    all-false ``clicked`` would wrongly make every search abandoned).
    """
    listed = ", ".join(f"coalesce(bool_or(seen_{name}), false)" for name in read.probe)
    seen = one(con, f"SELECT {listed} FROM _events")
    absent = {name for name, flag in zip(read.probe, seen, strict=True) if not flag}
    found = (*source.columns, *(read.used[n] for n in read.probe if n not in absent))
    check_columns(replace(source, columns=found), mapping)
    fields = {name: sql for name, sql in read.fields.items() if name not in absent}
    used = {name: column for name, column in read.used.items() if name not in absent}
    return fields, used, found


def _no_rows(source: Source, rejects: Rejects) -> str:
    malformed = rejects.lines + source.blanked_lines
    if malformed:
        first = first_bad_line(source, rejects)
        return f"no readable rows: {malformed} malformed line(s), the first at line {first}"
    return "no rows" if source.log_format == "jsonl" else "no rows after the header"


def first_bad_line(source: Source, rejects: Rejects) -> int | None:
    lines = [n for n in (rejects.first, source.first_blanked_line) if n is not None]
    return min(lines, default=None)


def _message(error: Exception, source: Source) -> str:
    """DuckDB's first line of ``error``, naming the original file rather than a repaired copy."""
    return first_line_of(error).replace(str(source.path), str(source.original))


def first_line_of(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


def one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None  # aggregate queries always return one row
    return tuple(row)
