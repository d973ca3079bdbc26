"""A small, independent reading of a log's per-query statistics, for the tests.

It follows the definitions documented in ``docs/warehouse.md`` and in the docstring of
``sampling/ingest.py`` line by line, in plain Python over the rows of a tiny log: no SQL,
no hashing, no numbering, no grouping sets or windows. The tests compare the product's one
reader (DuckDB) with it, statistic by statistic and bit for bit.

What it shares with the product, on purpose: the rules of text (``normalise_query`` and
``pii_screen``: the one definition, tested on their own), the mapping of column names
(``ColumnMap.matched``), and the reading of single values, for which it asks DuckDB's scalar
casts one value at a time, as the product documents a time as "what DuckDB reads as a
number or an ISO 8601 instant". Rows come from Python's own ``csv``/``json`` modules and
pyarrow, not from DuckDB's reader.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import json
import math
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from sampling.read import describe_or_repair
from sampling.source import FIELDS, ColumnMap, LogError, locate
from sampling.strata import StrataDefinition
from sampling.text import normalise_query, pii_screen

RATES = ("zero_result_rate", "reformulation_rate", "abandonment_rate")
_FALSE_WORDS = {"", "false", "f", "no", "n", "none", "null", "nan", "-"}
_EPOCH_UNITS = ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3))


@dataclass
class Event:
    """One log line as the definitions see it."""

    raw: str | None
    session: str | None
    user: str | None
    ts: float | None
    result_count: float | None
    clicked: bool


# --------------------------------------------------------------------------- rows


def read_rows(
    path: Path, log_format: str | None = None, columns: ColumnMap | None = None
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """(rows as field -> value, field -> column used, column -> sniffed type)."""
    source = locate(path, log_format)  # type: ignore[arg-type]
    # The type DuckDB's sniffer sees in a column (of the repaired copy the reader reads, if
    # the file needs one) decides how a time or a click is read: the product's documented rule.
    with tempfile.TemporaryDirectory() as workdir:
        sniff = path
        if source.log_format in ("csv", "tsv") and _needs_copy(path, source.gzipped):
            # Line ends DuckDB cannot follow, or bytes that are not UTF-8: the reader reads
            # (and sniffs) a repaired copy, one record per line.
            sniff = Path(workdir) / f"copy.{source.log_format}"
            lines = re.split(r"\r\n|\r|\n", _text(path, source.gzipped))
            sniff.write_text("\n".join(lines), encoding="utf-8")
        try:
            sniffed = describe_or_repair(duckdb.connect(), sniff, source.log_format, Path(workdir))
            types = dict(sniffed.types or {})
        except (duckdb.Error, LogError):
            types = {}
    if source.log_format == "parquet":
        table = pq.read_table(path)
        header, records = table.column_names, table.to_pylist()
    elif source.log_format == "jsonl":
        header, records = _json_records(path, source.gzipped)
    else:
        header, records = _delimited(path, source)
    mapping = (columns or ColumnMap()).matched(header)
    for name in FIELDS:
        if mapping.explicit(name) and mapping.column(name) not in header:
            raise LogError(f"{path}: missing {name} (column {mapping.column(name)!r})")
    used: dict[str, str] = {
        name: mapping.column(name) for name in FIELDS if mapping.column(name) in header
    }
    if "query" not in used:
        raise LogError(f"{path}: no query column")
    rows: list[dict[str, Any]] = [
        {name: record.get(column) for name, column in used.items()} for record in records
    ]
    return rows, used, types


def _needs_copy(path: Path, gzipped: bool) -> bool:
    data = gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    text = _text(path, gzipped)
    crlf = text.count("\r\n")
    return text.count("\r") != crlf or (crlf > 0 and text.count("\n") != crlf)


def _text(path: Path, gzipped: bool) -> str:
    data = gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes()
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def _json_records(path: Path, gzipped: bool) -> tuple[list[str], list[dict[str, Any]]]:
    records = []
    for line in _text(path, gzipped).splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            # The product reads every key as text: JSON numbers and flags as JSON spells them.
            records.append(
                {
                    k: v if isinstance(v, str) or v is None else json.dumps(v)
                    for k, v in value.items()
                }
            )
    header = sorted({key for record in records for key in record})
    return header, records


def _json_text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else json.dumps(value)


csv.field_size_limit(sys.maxsize)  # a query may be megabytes long
MAX_LINE_BYTES = 2_000_000  # DuckDB's longest CSV line: a longer one is malformed


def _delimited(path: Path, source: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Records of a CSV or TSV file, by the product's documented rules of malformed lines.

    A record with the wrong number of fields, text after a closing quote or a line longer
    than DuckDB takes is skipped. When a skipped record ran over several lines (a quote left
    open took the lines after it along) the file is read again one line per record, each line
    that leaves a quote open being skipped.
    """
    text = _text(path, source.gzipped)
    lines = re.split(r"\r\n|\r|\n", text)
    quoted = source.log_format == "csv"
    parsed = _parse(text, source.delimiter, quoted)
    header_at = next(i for i, (fields, _) in enumerate(parsed) if fields)
    header = [name.strip() or f"column{i}" for i, name in enumerate(parsed[header_at][0])]
    width = len(header)
    data = parsed[header_at + 1 :]
    if quoted and any(len(f) != width and span > 1 for f, span in data):
        alone = [_one_line(line, source.delimiter) for line in _after_header(lines, header_at)]
        data = [(fields, 1) for fields in alone if fields is not None]
    records = []
    line = _first_line(parsed, header_at)
    for fields, span in data:
        raw = "\n".join(lines[line : line + span])
        line += span
        if not fields or len(fields) != width or len(raw.encode()) > MAX_LINE_BYTES:
            continue
        if quoted and _text_after_quote(raw, source.delimiter):
            continue
        # An empty field is a missing value; a quoted empty one reads the same here.
        records.append({h: (v if v != "" else None) for h, v in zip(header, fields, strict=True)})
    return header, records


def _parse(text: str, delimiter: str, quoted: bool) -> list[tuple[list[str], int]]:
    """(fields, physical lines used) of each record."""
    stream = io.StringIO(text, newline="")
    if quoted:
        reader = csv.reader(stream, delimiter=delimiter)
    else:
        reader = csv.reader(stream, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    records, seen = [], 0
    for fields in reader:
        records.append((fields, reader.line_num - seen))
        seen = reader.line_num
    return records


def _first_line(parsed: list[tuple[list[str], int]], header_at: int) -> int:
    return sum(span for _, span in parsed[: header_at + 1])


def _after_header(lines: list[str], header_at: int) -> list[str]:
    blank = 0
    for index, line in enumerate(lines):
        if line:
            if blank == header_at:
                return lines[index + 1 :]
            blank += 1
    return []


def _one_line(line: str, delimiter: str) -> list[str] | None:
    """The fields of one line read alone, or None when it leaves a quote open."""
    try:
        return next(csv.reader([line], delimiter=delimiter, strict=True), [])
    except csv.Error:
        return None


def _text_after_quote(raw: str, delimiter: str) -> bool:
    """Whether a quoted field is followed by text other than spaces before the next delimiter
    (a quote after one space opens a quoted field, after two it is text, as in DuckDB)."""
    start, end = 0, len(raw)
    while start <= end:
        at = start + 1 if raw.startswith(' "', start) else start
        if raw.startswith('"', at):
            close = _closing_quote(raw, at + 1)
            if close is None:
                return False  # a quote left open: the caller's business
            after = close + 1
            while after < end and raw[after] == " ":
                after += 1
            if after < end and raw[after] != delimiter:
                return True
        else:
            after = raw.find(delimiter, start)
            after = end if after < 0 else after
        start = after + 1
    return False


def _closing_quote(raw: str, position: int) -> int | None:
    while True:
        found = raw.find('"', position)
        if found < 0:
            return None
        if raw.startswith('""', found):
            position = found + 2
            continue
        return found


# --------------------------------------------------------------------------- values


class Values:
    """Single values read as DuckDB's scalar casts read them (documented as such)."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")

    def read(self, texts: Iterable[str]) -> dict[str, tuple[float | None, float | None, str]]:
        distinct = sorted(set(texts))
        if not distinct:
            return {}
        rows = self.con.execute(
            """SELECT x, TRY_CAST(x AS DOUBLE), epoch(TRY_CAST(x AS TIMESTAMPTZ)), lower(trim(x))
               FROM unnest(?) AS t(x)""",
            [distinct],
        ).fetchall()
        return {x: (number, instant, word) for x, number, instant, word in rows}


def _numeric(type_name: str) -> bool:
    return any(
        type_name.startswith(p)
        for p in (
            "TINYINT",
            "SMALLINT",
            "INTEGER",
            "BIGINT",
            "HUGEINT",
            "UTINYINT",
            "USMALLINT",
            "UINTEGER",
            "UBIGINT",
            "FLOAT",
            "DOUBLE",
            "DECIMAL",
        )
    ) and not type_name.endswith("]")


def _temporal(type_name: str) -> bool:
    return type_name.startswith(("TIMESTAMP", "DATE"))


def events_of(
    rows: Sequence[Mapping[str, Any]], used: Mapping[str, str], types: Mapping[str, str]
) -> list[Event]:
    values = Values().read(
        str(row[name])
        for row in rows
        for name in ("timestamp", "result_count", "clicked")
        if isinstance(row.get(name), str)
    )
    ts_hint = types.get(used.get("timestamp", ""), "VARCHAR").upper()
    click_hint = types.get(used.get("clicked", ""), "VARCHAR").upper()
    return [
        Event(
            raw=_as_text(row["query"]),
            session=_id(row.get("session_id")),
            user=_id(row.get("user_id")),
            ts=_time(row.get("timestamp"), values, ts_hint),
            result_count=_count(row.get("result_count"), values),
            clicked=_clicked(row.get("clicked"), values, click_hint),
        )
        for row in rows
    ]


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _id(value: Any) -> str | None:
    text = _as_text(value)
    return text or None


def _time(value: Any, values: Mapping[str, tuple], hint: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return (value - dt.datetime(1970, 1, 1)).total_seconds()
    if isinstance(value, (int, float)):
        return float(value)
    number, instant, _ = values[value]
    if _numeric(hint):
        return number
    if _temporal(hint):
        return instant
    return number if number is not None else instant


def _count(value: Any, values: Mapping[str, tuple]) -> float | None:
    if value is None or isinstance(value, (int, float)):
        return value if value is None else float(value)
    return values[value][0]


def _clicked(value: Any, values: Mapping[str, tuple], hint: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _positive(float(value))
    number, _, word = values[value]
    if _numeric(hint):
        return number is not None and _positive(number)
    if number is not None:
        return _positive(number)
    return word not in _FALSE_WORDS


def _positive(number: float) -> bool:
    # A click count or position above 0. NaN counts too: DuckDB orders NaN above every
    # number, and the definition is DuckDB's comparison.
    return number > 0 or math.isnan(number)


# --------------------------------------------------------------------------- statistics


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def similar(a: str, b: str) -> bool:
    """They share a term, or are within min(2, ceil(0.3 * longer length)) edits."""
    if {t for t in a.split(" ") if t} & {t for t in b.split(" ") if t}:
        return True
    return levenshtein(a, b) <= min(2, math.ceil(0.3 * max(len(a), len(b))))


def statistics(
    events: Sequence[Event], used: Mapping[str, str], definition: StrataDefinition
) -> dict[str, dict[str, Any]]:
    """query -> its statistics, exactly as documented; excluded queries left out."""
    keyed = []
    for event in events:
        if event.raw is None:
            continue
        norm = normalise_query(event.raw, definition.normalisation)
        if norm == "":
            continue
        kind, masked = pii_screen(norm)
        keyed.append((event, masked if kind else norm, kind))
    window = definition.reformulation_window * _unit(keyed)
    flags = _sequence_flags(keyed, window)
    per: dict[str, dict[str, Any]] = {}
    for index, (event, key, kind) in enumerate(keyed):
        s = per.setdefault(key, defaultdict(int, sessions=set(), users=set(), kinds=set()))
        s["n"] += 1
        s["kinds"].add(kind)
        if event.result_count is not None:
            s["rc_n"] += 1
            s["zero"] += event.result_count == 0
        if event.session is not None:
            s["sessions"].add(event.session)
        if event.user is not None:
            s["users"].add(event.user)
        if index in flags:
            s["seq"] += 1
            s["reform"] += flags[index][0]
            s["aband"] += flags[index][1]
    sequenced = "session_id" in used and "timestamp" in used
    return {
        key: _row(s, used, sequenced)
        for key, s in sorted(per.items())
        if not (definition.pii == "exclude" and s["kinds"] - {None})
    }


def _unit(keyed: Sequence[tuple[Event, str, Any]]) -> float:
    """Units per second: the median of the queries' latest times says which epoch unit."""
    latest: dict[str, float] = {}
    for event, key, _ in keyed:
        if event.ts is not None:
            latest[key] = max(latest.get(key, -math.inf), event.ts, key=_order)
    ordered = sorted(ts for ts in latest.values() if not math.isnan(ts))
    if not ordered:
        return 1.0
    middle = len(ordered) // 2
    typical = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return next((per_second for bound, per_second in _EPOCH_UNITS if typical > bound), 1.0)


def _order(ts: float | None) -> tuple[bool, float]:
    """Times in DuckDB's order, which puts NaN above every number (and -0.0 with 0.0)."""
    assert ts is not None
    return (True, 0.0) if math.isnan(ts) else (False, ts)


def _sequence_flags(
    keyed: Sequence[tuple[Event, str, Any]], window: float
) -> dict[int, tuple[bool, bool]]:
    sessions: dict[str, list[int]] = defaultdict(list)
    for index, (event, _, _) in enumerate(keyed):
        if event.session is not None and event.ts is not None:
            sessions[event.session].append(index)
    flags = {}
    for members in sessions.values():
        members.sort(key=lambda i: (_order(keyed[i][0].ts), keyed[i][1]))
        clicks = [keyed[i][0].ts for i in members if keyed[i][0].clicked]
        last_click = max(clicks, key=_order) if clicks else None
        for position, i in enumerate(members):
            event, key, _ = keyed[i]
            reform = False
            if position + 1 < len(members):
                following, next_key, _ = keyed[members[position + 1]]
                gap = following.ts - event.ts  # type: ignore[operator]
                reform = 0 < gap <= window and next_key != key and similar(key, next_key)
            abandoned = last_click is None or _order(last_click) < _order(event.ts)
            flags[i] = (reform, abandoned)
    return flags


def _row(s: Mapping[str, Any], used: Mapping[str, str], sequenced: bool) -> dict[str, Any]:
    def rate(count: int, total: int, available: bool) -> float:
        return count / total if available and total else math.nan

    kinds = sorted(kind for kind in s["kinds"] if kind)
    return {
        "frequency": s["n"],
        "sessions": len(s["sessions"]) if "session_id" in used else None,
        "users": len(s["users"]) if "user_id" in used else None,
        "zero_result_rate": rate(s["zero"], s["rc_n"], "result_count" in used),
        "reformulation_rate": rate(s["reform"], s["seq"], sequenced),
        "abandonment_rate": rate(s["aband"], s["seq"], sequenced and "clicked" in used),
        "pii": kinds[0] if kinds else None,
    }


def reference(
    path: Path,
    *,
    columns: ColumnMap | None = None,
    log_format: str | None = None,
    definition: StrataDefinition | None = None,
) -> dict[str, dict[str, Any]]:
    """The statistics of the log at ``path``, by the documented definitions."""
    rows, used, types = read_rows(path, log_format, columns)
    return statistics(events_of(rows, used, types), used, definition or StrataDefinition())
