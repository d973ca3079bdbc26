"""The compiled reader of regular CSV and TSV logs: the fast path of ingestion.

:func:`annotation.sampling_ingest.ingest_log` tries it first. It gives exactly the statistics
and report of the DuckDB path (the SQL of :mod:`annotation.sampling_sql` is the definition;
``tests/test_sampling_native.py`` compares both on crafted and generated logs), or none: at
the first line outside the subset it reads (every line a record with the header's number of
fields, valid UTF-8 without NUL, LF or CR LF line ends, clean quoting, numbers and ISO 8601
times in their plain forms) it says why, and the caller reads the log with DuckDB, which
handles and reports everything else. Gzip, JSON lines and Parquet always go to DuckDB.

It holds about 29 bytes per log line and its dictionaries in memory, and gives up past its
own memory limit (``EngineSettings.native_memory_limit``; DuckDB, which spills to disk, then
reads the log in bounded memory).
The C source is ``annotation/_logscan.c``; normalising non-ASCII text and the privacy screen
stay in Python (:mod:`annotation.sampling_text`), on distinct strings only.

Pure core: no Django.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .sampling_source import Source, is_numeric_type, is_temporal_type
from .sampling_stats import LogStats, PiiCount
from .sampling_strata import StrataDefinition
from .sampling_text import PII_KINDS, normalise_many, pii_screen

try:
    from . import _logscan  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a build without a C compiler
    _logscan = None

__all__ = [
    "AVAILABLE",
    "NativeResult",
    "Unsupported",
    "memory_bytes",
    "native_reason",
    "read_native",
]

AVAILABLE = _logscan is not None

# The reader's modes, as the C source numbers them.
_TS_NUMBER, _TS_INSTANT, _TS_EITHER = 1, 2, 3
_CLICK_NUMBER, _CLICK_TEXT = 0, 1
# PII kinds ranked by name: the SQL keeps min(pii) of a query's variants, a string minimum.
_KIND_RANK = {kind: rank for rank, kind in enumerate(sorted(PII_KINDS), start=1)}
_KINDS_BY_RANK = np.array([None, *sorted(PII_KINDS)], dtype=object)
_HEAD_BYTES = 1 << 20
_MAX_COLUMNS = 256  # as the C source allows
# Lines grouped per round when following sessions and users (None: the C default, 2^22);
# tests make it small so that small logs take several rounds.
_ROUND_LINES: int | None = None

Progress = Callable[[float, str], None]


class Unsupported(Exception):
    """This log is for DuckDB to read; the message says why."""


@dataclass(frozen=True)
class NativeResult:
    """The statistics and the counts the report needs."""

    stats: LogStats
    rows: int
    blank: int
    distinct_raw: int
    distinct_queries: int
    events: int
    bad_ts: int
    pii: tuple[PiiCount, ...]
    pii_excluded_events: int
    typical_time: float | None


def native_reason(source: Source) -> str:
    """Why the compiled reader cannot take ``source`` at all, or "" when it can try."""
    if not AVAILABLE:
        return "the compiled reader is not built"
    if source.log_format not in ("csv", "tsv"):
        return f"{source.log_format} is read by DuckDB"
    if source.gzipped:
        return "a gzipped log is read by DuckDB"
    if source.copy != "none":
        return "the log needed a repaired copy"
    return ""


def read_native(
    source: Source,
    used: Mapping[str, str],
    rule: StrataDefinition,
    *,
    threads: int,
    budget: int,
    report: Progress,
    window_for: Callable[[float | None], float],
) -> NativeResult:
    """Read ``source`` with the compiled reader; :class:`Unsupported` when it cannot.

    ``window_for(typical_time)`` turns the log's typical time into the reformulation window
    in the log's own unit (the caller's rule for epoch units).
    """
    assert _logscan is not None
    columns = source.columns
    if len(columns) > _MAX_COLUMNS:
        raise Unsupported(f"more than {_MAX_COLUMNS} columns")
    offset = _data_offset(source)
    index = {name: columns.index(column) for name, column in used.items()}
    types = source.types or {}
    scanner = _logscan.Scanner(
        str(source.path),
        offset,
        source.delimiter or ",",
        source.log_format == "csv",
        len(columns),
        tuple(
            index.get(name, -1)
            for name in ("query", "timestamp", "session_id", "user_id", "result_count", "clicked")
        ),
        _ts_mode(types.get(used.get("timestamp", ""), "VARCHAR")),
        _CLICK_NUMBER
        if is_numeric_type(types.get(used.get("clicked", ""), "VARCHAR").upper())
        else _CLICK_TEXT,
        threads,
        budget,
        **({"round_lines": _ROUND_LINES} if _ROUND_LINES else {}),
    )
    try:
        numbered, followed, pii, typical = _phases(source, scanner, rule, report, window_for)
    except _logscan.Unsupported as error:  # any phase: a line it leaves, or memory
        why, at = error.args
        raise Unsupported(_where(source, why, at)) from None
    finally:
        # The tables (hundreds of MB for a large log) go now, before the result is built.
        scanner.close()
    report(0.96, "summarising")
    return _result(numbered, followed, used, pii, rule, typical)


def _phases(
    source: Source,
    scanner: Any,
    rule: StrataDefinition,
    report: Progress,
    window_for: Callable[[float | None], float],
) -> tuple[dict[str, Any], dict[str, Any], tuple[PiiCount, ...], float | None]:
    """Drive the scanner through its phases; what :func:`_result` needs."""
    assert _logscan is not None
    report(0.02, "reading events")
    _in_thread(
        scanner.read,
        lambda: report(0.02 + 0.6 * scanner.progress, "reading events"),
        scanner.cancel,
    )
    report(0.62, "counting distinct queries")
    normalisation = rule.normalisation
    foreign = scanner.foreign(normalisation.casefold, normalisation.collapse_whitespace)
    report(0.64, "normalising and screening queries")
    # the ASCII strings are normalised in C, without the GIL, while Python does the others
    normalised = _beside(
        scanner.ascii, lambda: normalise_many([text for _, text in foreign], normalisation)
    )
    scanner.set_norms([(raw, text) for (raw, _), text in zip(foreign, normalised, strict=True)])
    flagged, pii = _screen(scanner.screen())
    report(0.70, "numbering queries")
    numbered = scanner.number(flagged, rule.pii == "exclude")
    if numbered["rows"] == 0:
        raise Unsupported("no rows after the header")
    max_ts = np.frombuffer(numbered["max_ts"], dtype=np.float64)
    known = max_ts[~np.isnan(max_ts)]
    typical = float(np.median(known)) if len(known) else None
    report(0.75, "following sessions")
    followed = _in_thread(
        lambda: scanner.follow(window_for(typical)),
        lambda: report(0.75, "following sessions"),
    )
    return numbered, followed, pii, typical


def _ts_mode(hint: str) -> int:
    hint = hint.upper()
    if is_numeric_type(hint):
        return _TS_NUMBER
    if is_temporal_type(hint):
        return _TS_INSTANT
    return _TS_EITHER


def _data_offset(source: Source) -> int:
    """The byte offset of the first line after the header (and the blank lines before it)."""
    with source.path.open("rb") as stream:
        head = stream.read(_HEAD_BYTES)
    at = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    for _ in range(source.skip + 1):
        end = head.find(b"\n", at)
        if end < 0:
            if len(head) < _HEAD_BYTES:  # a header and no data: DuckDB says so
                raise Unsupported("no line after the header")
            raise Unsupported("a header line longer than the first megabyte")
        line = head[at:end].removesuffix(b"\r")
        if b"\r" in line:
            raise Unsupported("a lone carriage return before the data")
        if source.log_format == "csv" and line.count(b'"') % 2:
            raise Unsupported("a quote left open in the header")
        at = end + 1
    return at


def _where(source: Source, why: str, at: int) -> str:
    """The reader's reason, with the line it stopped at (counted only now, when it matters)."""
    if at < 0:
        return why
    line = 1
    with source.path.open("rb") as stream:
        remaining = at
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 24))
            if not chunk:
                break
            line += chunk.count(b"\n")
            remaining -= len(chunk)
    return f"line {line}: {why}"


def _screen(
    candidates: list[tuple[int, str, int]],
) -> tuple[list[tuple[int, int, str]], tuple[PiiCount, ...]]:
    """The privacy screen on the texts that may hold personal data: (norm id, kind rank,
    masked text) for those that do, and the counts per kind."""
    flagged: list[tuple[int, int, str]] = []
    counts: dict[str, list[int]] = {}
    for norm, text, lines in candidates:
        kind, masked = pii_screen(text)
        if kind is None:
            continue
        flagged.append((norm, _KIND_RANK[kind], masked))
        tally = counts.setdefault(kind, [0, 0])
        tally[0] += 1
        tally[1] += lines
    pii = tuple(PiiCount(kind, q, n) for kind, (q, n) in sorted(counts.items()))  # type: ignore[arg-type]
    return flagged, pii


def _result(
    numbered: dict[str, Any],
    followed: dict[str, Any],
    used: Mapping[str, str],
    pii: tuple[PiiCount, ...],
    rule: StrataDefinition,
    typical: float | None,
) -> NativeResult:
    def u64(key: str) -> np.ndarray:
        return np.frombuffer(numbered[key], dtype=np.uint64).astype(np.int64)

    def u32(key: str) -> np.ndarray:
        return np.frombuffer(followed[key], dtype=np.uint32).astype(np.int64)

    keep = np.frombuffer(numbered["excluded"], dtype=np.uint8) == 0
    frequency = u64("frequency")
    bad_ts = int(u64("bad_ts").sum())
    sequenced = "session_id" in used and "timestamp" in used
    seq_n = u32("seq_n")
    ranks = np.frombuffer(numbered["pii"], dtype=np.uint8)
    kinds = _KINDS_BY_RANK[ranks]
    stats = LogStats(
        query=np.array(numbered["query"], dtype=object)[keep],
        frequency=frequency[keep],
        sessions=u32("sessions")[keep] if "session_id" in used else None,
        users=u32("users")[keep] if "user_id" in used else None,
        zero_result_rate=_rate(u64("zero_n"), u64("rc_n"), "result_count" in used)[keep],
        reformulation_rate=_rate(u32("reformulated"), seq_n, sequenced)[keep],
        abandonment_rate=_rate(u32("abandoned_n"), seq_n, sequenced and "clicked" in used)[keep],
        pii=kinds[keep],
    )
    excluded_events = sum(count.events for count in pii) if rule.pii == "exclude" else 0
    return NativeResult(
        stats=stats,
        rows=int(numbered["rows"]),
        blank=int(numbered["blank"]),
        distinct_raw=int(numbered["distinct_raw"]),
        distinct_queries=int(keep.sum()),
        events=int(frequency[keep].sum()),
        bad_ts=bad_ts,
        pii=pii,
        pii_excluded_events=excluded_events,
        typical_time=typical,
    )


def _rate(count: np.ndarray, total: np.ndarray, available: bool) -> np.ndarray:
    out = np.full(len(total), np.nan)
    if available:
        some = total > 0
        out[some] = count[some].astype(np.float64) / total[some].astype(np.float64)
    return out


def _start(work: Callable[[], Any], name: str) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``work`` (which releases the GIL) on a thread; its value or its error lands in the
    dict, for :func:`_outcome` on the calling thread."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # re-raised on the calling thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread, outcome


def _outcome(outcome: dict[str, Any]) -> Any:
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _beside(background: Callable[[], Any], work: Callable[[], Any]) -> Any:
    """``work()`` here while ``background()`` (which releases the GIL) runs on a thread;
    both finish before this returns, and the background's error is raised first."""
    thread, outcome = _start(background, "assay-log-ascii")
    try:
        result = work()
    finally:
        thread.join()
    _outcome(outcome)
    return result


def _in_thread(
    work: Callable[[], Any], poll: Callable[[], None], cancel: Callable[[], None] | None = None
) -> Any:
    """Run ``work`` (which releases the GIL) on a thread; call ``poll`` every half second.

    An exception from ``poll`` (the caller cancelling) calls ``cancel``, waits for ``work``
    to stop, and is raised: the progress callback runs on the calling thread only.
    """
    thread, outcome = _start(work, "assay-log-reader")
    failure: BaseException | None = None
    while thread.is_alive():
        thread.join(0.5)
        if thread.is_alive() and failure is None:
            try:
                poll()
            except BaseException as error:
                failure = error
                if cancel is not None:
                    cancel()
    if failure is not None:
        raise failure
    return _outcome(outcome)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def memory_bytes(limit: str) -> int:
    """DuckDB's memory limit ("500MB", "2GiB") in bytes; unknown forms mean no native path."""
    match = _SIZE.match(limit)
    if not match:
        return 0
    unit = (match.group(2) or "").lower()
    return int(float(match.group(1)) * _UNITS.get(unit, 0))
