"""The one log reader (DuckDB) against a plain-Python reading of the documented definitions.

``ingest_log`` reads every log with DuckDB. Each log here, read by it, must give exactly the
statistics (bit for bit, NaN where NaN) that ``tests/sampling_reference.py`` computes from the
definitions in plain Python over the same tiny file, or fail where the reference finds nothing
to read. The logs:

- regular logs from a seeded generator that covers every semantic corner a reader must get
  right (quoting, delimiters, line endings, column orders, missing columns, Unicode and
  whitespace in queries, personal data, session ids, every timestamp form, window edges,
  result counts and click values), under varied strata definitions;
- hand-made corner cases, and irregular logs (malformed lines, bad bytes, other formats,
  values only DuckDB's casts read);
- more threads, and statistics written to a DuckDB file and read back.

These cases were written to compare a compiled reader (since retired) with DuckDB; they now
hold DuckDB to the definitions themselves.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sampling.core import (
    ColumnMap,
    LogError,
    Normalisation,
    StrataDefinition,
    ingest_log,
)
from sampling.ingest import EngineSettings
from sampling.stats import LogStats, load_stats
from tests.sampling_reference import RATES, reference

REPO = Path(__file__).resolve().parents[1]
GEN_LOG = (sys.executable, str(REPO / "bench" / "gen_log.py"))
REGULAR_SEEDS = range(40)
IRREGULAR_SEEDS = range(12)


# --------------------------------------------------------------------------- comparison


def ingest(path: Path, threads: int = 2, **kwargs: Any) -> LogStats | LogError:
    try:
        return ingest_log(path, engine=EngineSettings(threads=threads), **kwargs)
    except LogError as error:
        return error


def expected(path: Path, **kwargs: Any) -> dict[str, dict[str, Any]] | LogError:
    try:
        return reference(path, **kwargs)
    except LogError as error:
        return error


def check(path: Path, **kwargs: Any) -> LogStats | LogError:
    """The reader on one log gives the reference statistics, or fails where the reference
    finds no query to count."""
    got = ingest(path, **kwargs)
    want = expected(path, **kwargs)
    if isinstance(got, LogError):
        assert isinstance(want, LogError) or not want, (
            f"the reader failed ({got}), not the reference"
        )
        return got
    assert not isinstance(want, LogError), f"the reference failed ({want}), not the reader"
    assert_reference(got, want)
    return got


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return np.float64(a).view(np.uint64) == np.float64(b).view(np.uint64) or a == b == 0.0
    return a == b


def assert_reference(got: LogStats, want: dict[str, dict[str, Any]]) -> None:
    """Every query and statistic as the reference has it (rates to the last bit)."""
    queries = list(got.query)
    problems = []
    if queries != list(want):
        only_got = sorted(set(queries) - set(want))[:10]
        only_want = sorted(set(want) - set(queries))[:10]
        raise AssertionError(f"queries: only read {only_got!r}, only reference {only_want!r}")
    for i, query in enumerate(queries):
        row = want[query]
        values = {
            "frequency": int(got.frequency[i]),
            "sessions": None if got.sessions is None else int(got.sessions[i]),
            "users": None if got.users is None else int(got.users[i]),
            "pii": got.pii[i],
        }
        values |= {name: float(getattr(got, name)[i]) for name in RATES}
        problems += [
            f"{name}[{query!r}]: read={values[name]!r} reference={row[name]!r}"
            for name in values
            if not _same(values[name], row[name])
        ]
    assert not problems, "\n".join(problems[:40])


def assert_same(left: LogStats | LogError, right: LogStats | LogError) -> None:
    """Two reads of one log: identical statistics, or the same error."""
    if isinstance(left, LogError) or isinstance(right, LogError):
        assert str(left) == str(right)
        return
    assert list(left.query) == list(right.query)
    for name in ("frequency", "sessions", "users", "pii"):
        a, b = getattr(left, name), getattr(right, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert list(a) == list(b), name
    for name in RATES:
        np.testing.assert_array_equal(getattr(left, name), getattr(right, name), err_msg=name)
    assert left.frequency.dtype == right.frequency.dtype


# --------------------------------------------------------------------------- vocabulary

WORDS = [
    "shoes", "running", "red", "cheap", "flights", "paris", "weather", "tomorrow", "python",
    "tutorial", "pasta", "recipe", "news", "laptop", "repair", "hotel", "map", "jobs", "tax",
    "ab", "cd", "a", "x1", "go", "C++", "node.js", "r&d", "50%", "o'neil", "e-mail", "3d",
    '27" monitor', 'say "hi"', "salt, pepper", "semi;colon", "pipe|line", '"', "2 + 2",
]  # fmt: skip
UNICODE_WORDS = [
    "café", "CAFÉ", "cafe\u0301", "Straße", "STRASSE", "strasse", "ẞ", "ﬁlter", "ﬁ", "ﬀ",
    "ｆｕｌｌ", "ＦＵＬＬ", "Σίσυφος", "ΣΊΣΥΦΟΣ", "ς", "москва", "МОСКВА", "東京", "東京都",
    "日本語", "école", "e\u0301cole", "ǅemal", "½price", "kilo㎏", "№5", "Ω", "\u2126",
    "İstanbul", "①", "한국어", "\u1112\u1161\u11ab", "😀", "🇫🇷", "naïve", "Ärger", "ℌ",
    "x\u200by", "ｗｉｄｅ", "Ǆ", "ŉ", "ﬃ", "ǰ", "\u0130", "a\u0308",
]  # fmt: skip
# Whitespace of every kind; the ASCII controls are whitespace to str.split too.
SPACES = [" ", "  ", "   ", "\t", " \t ", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f"]
UNICODE_SPACES = ["\u00a0", "\u3000", "\u2003", "\u2028", "\u0085", "\u202f", "\u1680"]
PII = [
    "bob@example.com", "Bob.Smith+news@Mail.Example.co.uk", "mail anna_k@uni-x.de today",
    "+1 555 123 4567", "call +44 20 7946 0958 now", "(030) 1234567", "555-123-4567",
    "06 12 34 56 78", "0044 20 7946 0958", "030 1234567", "4111 1111 1111 1111",
    "4111-1111-1111-1111", "3782 822463 10005", "123456789012", "order 1234567890123",
    "https://user:pass@example.com/x", "ftp://a:b@host", "example.com/?token=abc",
    "site.org/login?password=hunter2&x=1", "x;api_key=s3cr3t",
    "４１１１ １１１１ １１１１ １１１１",
    "ＢＯＢ＠ＥＸＡＭＰＬＥ．ＣＯＭ", "BOB@EXAMPLE.COM", "bob@example.com 123456789",
    "https://u:p@h.example 1234567890", "https://user:pass@example.com\x0bpage",
    "example.com/?token=abc\x0bdef", "login?password=\x0b1234567890", "\u1680bob@example.com\u00a0",
]  # fmt: skip
# Text that looks like what masking produces, to meet masked queries.
PLACEHOLDERS = ["[email]", "contact [email]", "[url] [number]", "[url] 1234567890", "[number]"]
BLANKS = ["", "   ", "\t", "\u3000", "\u00a0", " \x0b "]
RESULT_COUNTS = ["0", "12", "0.0", "", "n/a", "3", "0", "1", "250", "0.00", "7.5"]
CLICKS = [
    "0", "1", "true", "false", "yes", "no", "-", "", "https://example.org/page", "3", "TRUE",
    "False", "NO", "None", "null", "N", "f", "t", "y", "0.0", "2.5", "clicked", "NaN-ish",
    " no ", "NO ", "no\u00a0", "\u3000false", "\u2003n", "non", "nö",
]  # fmt: skip
OFFSETS = [0, 0, 330, -480, 60, -60, 840, -720, 1439, 99 * 60 + 99, 45, -570]
# Strictly formed but not a time DuckDB reads: counted as unparsed.
BAD_ISO = [
    "2025-02-30T10:00:00", "2025-02-29", "2025-13-01", "2025-00-10", "2025-01-00",
    "2025-01-01T23:59:60", "2025-01-01T00:60:00", "2025-01-02Z", "2025-01-02+05:30",
    "2025-01-01T25:00:00",
]  # fmt: skip
WINDOWS = [300.0, 300.0, 60.0, 1.0, 0.5, 2.5, 0.3, 0.7, 0.001, 86400.0, 7.123456, 1e6, 0.1, 1.1]
EPOCH_2025 = 1_735_689_600 * 1_000_000  # 2025-01-01T00:00:00Z in microseconds


# --------------------------------------------------------------------------- generator


@dataclasses.dataclass
class Event:
    query: str
    session: str
    user: str
    instant: int | None  # microseconds since the epoch
    result_count: str
    clicked: str
    extra: list[str]
    stamp: str = ""


@dataclasses.dataclass
class Shape:
    """How one generated log is written."""

    log_format: str  # csv or tsv
    delimiter: str
    columns: list[tuple[str, str]]  # (field or extra name, header name)
    line_end: str
    bom: bool
    trailing_newline: bool
    quote_share: float
    quote_header: bool
    time_mode: str
    file_name: str
    explicit_format: bool
    mapping: dict[str, str]


def _surface(text: str, rng: random.Random, spaces: list[str]) -> str:
    """A raw variant of a query: case, spacing and surrounding whitespace changed."""
    roll = rng.random()
    if roll < 0.15:
        text = text.upper()
    elif roll < 0.25:
        text = text.title()
    elif roll < 0.32:
        text = "".join(c.upper() if rng.random() < 0.4 else c for c in text)
    if rng.random() < 0.3:
        text = "".join(rng.choice(spaces) if c == " " else c for c in text)
    if rng.random() < 0.12:
        text = rng.choice(spaces) + text
    if rng.random() < 0.12:
        text = text + rng.choice(spaces)
    return text


def _typo(text: str, rng: random.Random) -> str:
    letters = "abcdefghijklmnopqrstuvwxyzéßüж東"
    if not text:
        return rng.choice(letters)
    i = rng.randrange(len(text))
    kind = rng.randrange(4)
    if kind == 0:
        return text[:i] + rng.choice(letters) + text[i + 1 :]
    if kind == 1:
        return text[:i] + rng.choice(letters) + text[i:]
    if kind == 2 and len(text) > 1:
        return text[:i] + text[i + 1 :]
    if i + 1 < len(text):
        return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    return text + rng.choice(letters)


def _base_queries(rng: random.Random) -> list[str]:
    words = WORDS + UNICODE_WORDS
    queries: set[str] = set()
    while len(queries) < rng.randint(25, 60):
        terms = [rng.choice(words) for _ in range(rng.choice([1, 1, 2, 2, 2, 3, 4]))]
        queries.add(" ".join(terms))
    return sorted(queries)


def _gap(rng: random.Random, window_us: int, resolution: int) -> int:
    roll = rng.random()
    if roll < 0.15:
        gap = 0
    elif roll < 0.3:
        gap = window_us
    elif roll < 0.38:
        gap = window_us + resolution
    elif roll < 0.46:
        gap = max(window_us - resolution, 0)
    elif roll < 0.7:
        gap = rng.randint(1, max(window_us, 1))
    elif roll < 0.85:
        gap = window_us * rng.randint(2, 6) + rng.randint(0, 999_999)
    else:
        gap = rng.randint(1, 10) * resolution
    return gap // resolution * resolution


RESOLUTION = {
    "iso": 1,
    "iso_plain": 1_000_000,
    "date": 86_400_000_000,
    "epoch_s": 1_000_000,
    "epoch_dec": 1,
    "epoch_ms": 1_000,
    "epoch_ms_dec": 1,
    "mixed": 1_000_000,
    "mixed_units": 1_000,
    "iso_minutes": 60_000_000,
}


def _events(rng: random.Random, shape: Shape, window: float, spaces: list[str]) -> list[Event]:
    bases = _base_queries(rng)
    pii = rng.sample(PII, rng.randint(0, 6)) + rng.sample(PLACEHOLDERS, rng.randint(0, 2))
    extras = [name for name, _ in shape.columns if name.startswith("extra")]
    resolution = RESOLUTION[shape.time_mode]
    window_us = max(round(window * 1_000_000), 1)
    users = [f"u{n}" for n in range(rng.randint(3, 30))] + ["", "ü-ser", "007", "7"]
    target = rng.randint(150, 450)
    events: list[Event] = []
    session_number = 0
    while len(events) < target:
        session_number += 1
        session = rng.choice(
            [
                f"s{session_number}",
                f"S{session_number}",
                f"{session_number:03d}",
                str(session_number),
                f"séance-{session_number}",
                f" s{session_number}",
            ]
        )
        if rng.random() < 0.05:
            session = ""
        user = rng.choice(users)
        day = rng.randint(0, 400)
        start = EPOCH_2025 + day * 86_400_000_000 + rng.randint(0, 86_399_999_999)
        if shape.time_mode in ("iso", "iso_plain", "epoch_dec") and rng.random() < 0.15:
            # times near 1970 (small, exactly representable) and in far years
            start = rng.choice(
                [
                    -rng.randint(1, 5_000_000),
                    rng.randint(0, 200_000_000_000_000),
                    rng.randint(-62_135_596_800, 253_000_000_000) * 1_000_000,
                ]
            )
            start += rng.randint(0, 999_999)
        if shape.time_mode == "date":
            start -= start % 86_400_000_000
        start -= start % resolution
        instant = start
        query = rng.choice(bases)
        broken = rng.random() < 0.2
        for _ in range(rng.choice([1, 1, 2, 3, 4, 5, 6, 8, 12])):
            raw = _surface(query, rng, spaces)
            roll = rng.random()
            if roll < 0.04:
                raw = rng.choice(BLANKS)
            elif pii and roll < 0.1:
                raw = _surface(rng.choice(pii), rng, spaces)
            elif roll < 0.13:
                raw = rng.choice(bases).replace("a", "\u0430", 1)  # Cyrillic a: looks alike
            clicked = rng.choice(CLICKS)
            result = rng.choice(["0", "0", "", "0.0"]) if broken else rng.choice(RESULT_COUNTS)
            events.append(
                Event(
                    query=raw,
                    session="" if rng.random() < 0.05 else session,
                    user=rng.choice(users) if rng.random() < 0.05 else user,
                    instant=None if rng.random() < 0.04 else instant,
                    result_count=result,
                    clicked=clicked,
                    extra=[_extra_value(rng) for _ in extras],
                )
            )
            instant += _gap(rng, window_us, resolution)
            move = rng.random()
            if move < 0.2:
                pass  # the same query again, maybe typed differently
            elif move < 0.4:
                terms = query.split(" ")
                query = " ".join([rng.choice(terms), rng.choice(WORDS + UNICODE_WORDS)])
            elif move < 0.6:
                query = _typo(query, rng)
            elif move < 0.68:
                query = rng.choice(["ab", "cd", "ef", "x", "y", "abc", "abd"])
            else:
                query = rng.choice(bases)
    rng.shuffle(events)
    return events


def _extra_value(rng: random.Random) -> str:
    return rng.choice(
        ["1", "", "en,fr", 'Mozilla/5.0 "quoted"', "a;b|c", "x\ty", "é", "  padded  ", "0"]
    )


def _iso(instant: int, rng: random.Random, mode: str) -> str:
    if mode == "iso_plain":
        return _date(_naive(instant)) + _naive(instant).strftime("T%H:%M:%S")
    if mode == "date":
        return _date(_naive(instant))
    if mode == "iso_minutes":
        return _date(_naive(instant)) + _naive(instant).strftime(" %H:%M")
    if rng.random() < 0.01:
        return rng.choice(BAD_ISO)
    offset = rng.choice(OFFSETS) if rng.random() < 0.35 else None
    local = instant + (offset or 0) * 60_000_000
    moment = _naive(local)
    text = _date(moment)
    if moment.time() == dt.time(0) and offset is None and rng.random() < 0.3:
        return text  # date only
    text += rng.choice("T ") + moment.strftime("%H:%M")
    fraction = moment.microsecond
    if moment.second or fraction or rng.random() < 0.8:
        text += moment.strftime(":%S")
        digits = 6 - (len(str(fraction).zfill(6)) - len(str(fraction).zfill(6).rstrip("0")))
        digits = rng.choice([0, 0, 0, 1, 3, 6]) if fraction == 0 else rng.randint(digits, 6)
        if digits:
            text += "." + str(fraction).zfill(6)[:digits]
    if offset is not None:
        text += _zone(offset, rng)
    return text


def _zone(offset: int, rng: random.Random) -> str:
    if offset == 0 and rng.random() < 0.5:
        return "Z"
    sign = "-" if offset < 0 or (offset == 0 and rng.random() < 0.3) else "+"
    hours, minutes = divmod(abs(offset), 60)
    if offset == 99 * 60 + 99:
        hours, minutes = 99, 99
    style = rng.randrange(3)
    if style == 0 or (style == 2 and minutes):
        return f"{sign}{hours:02d}:{minutes:02d}"
    if style == 1:
        return f"{sign}{hours:02d}{minutes:02d}"
    return f"{sign}{hours:02d}"


def _date(moment: dt.datetime) -> str:
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"


def _naive(instant: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=instant)


def _epoch_decimal(instant: int, rng: random.Random, scale: int) -> str:
    """``instant`` (microseconds) in units of ``scale`` microseconds, as a decimal."""
    whole, part = divmod(instant, scale)
    width = len(str(scale)) - 1
    fraction = str(part).zfill(width) if width else ""
    needed = len(fraction.rstrip("0"))
    digits = rng.randint(needed, width + 3) if width else 0
    if needed == 0 and rng.random() < 0.5:
        return str(whole)
    fraction = (fraction + "000")[:digits]
    return f"{whole}.{fraction}" if digits else str(whole)


def _stamp(event: Event, rng: random.Random, mode: str) -> str:
    instant = event.instant
    if instant is None:
        return ""
    if mode == "mixed":
        mode = rng.choice(["iso", "epoch_s", "date" if instant % 86_400_000_000 == 0 else "iso"])
    if mode == "mixed_units":
        mode = "epoch_ms" if sum(map(ord, event.session)) % 2 else "epoch_s"
        if mode == "epoch_s":
            return str(instant // 1_000_000)
    if mode in ("iso", "iso_plain", "date", "iso_minutes"):
        return _iso(instant, rng, mode)
    if mode == "epoch_s":
        return str(instant // 1_000_000)
    if mode == "epoch_dec":
        return _epoch_decimal(instant, rng, 1_000_000)
    if mode == "epoch_ms":
        return str(instant // 1_000)
    if mode == "epoch_ms_dec":
        return _epoch_decimal(instant, rng, 1_000)
    raise AssertionError(mode)


HEADER_NAMES = {
    "query": ["query", "Query", "QUERY", " query "],
    "session_id": ["session_id", "Session ID", "session-id", "SESSION_ID"],
    "user_id": ["user_id", "User Id", "user-id"],
    "timestamp": ["timestamp", "Timestamp", "TIMESTAMP"],
    "result_count": ["result_count", "Result Count", "result-count"],
    "clicked": ["clicked", "Clicked"],
}
MAPPED_NAMES = {
    "query": "q",
    "session_id": "sid",
    "user_id": "uid",
    "timestamp": "time",
    "result_count": "hits",
    "clicked": "click",
}


def _shape(rng: random.Random) -> Shape:
    log_format = "tsv" if rng.random() < 0.3 else "csv"
    delimiter = "\t" if log_format == "tsv" else rng.choice([",", ",", ",", ";", "|", "\t"])
    fields = ["query"] + [
        name
        for name in ("session_id", "user_id", "timestamp", "result_count", "clicked")
        if rng.random() < 0.75
    ]
    fields += [f"extra{n}" for n in range(rng.choice([0, 0, 1, 2]))]
    if log_format == "csv" and rng.random() < 0.06:
        fields = ["query"]  # a one-column CSV: commas are text
        delimiter = "\x1f"
    if len(fields) == 1 and log_format == "tsv":
        fields.append("session_id")
    rng.shuffle(fields)
    mapping: dict[str, str] = {}
    columns = []
    explicit = rng.random() < 0.2
    for name in fields:
        if name.startswith("extra"):
            header = rng.choice(["page", "lang", "agent"]) + name[-1]
        elif explicit and rng.random() < 0.6:
            header = MAPPED_NAMES[name]
            mapping[name] = header
        else:
            header = rng.choice(HEADER_NAMES[name])
        columns.append((name, header))
    if log_format == "csv":
        file_name, explicit_format = rng.choice(
            [("log.csv", False), ("log.csv", False), ("log.CSV", False), ("log.txt", True)]
        )
    else:
        file_name, explicit_format = rng.choice(
            [("log.tsv", False), ("log.tab", False), ("export.log", True)]
        )
    return Shape(
        log_format=log_format,
        delimiter=delimiter,
        columns=columns,
        line_end=rng.choice(["\n", "\r\n"]),
        bom=rng.random() < 0.2,
        trailing_newline=rng.random() < 0.7,
        quote_share=rng.choice([0.0, 0.1, 0.5, 1.0]),
        quote_header=log_format == "csv" and rng.random() < 0.3,
        time_mode=rng.choice(list(RESOLUTION)),
        file_name=file_name,
        explicit_format=explicit_format,
        mapping=mapping,
    )


def _definition(rng: random.Random) -> StrataDefinition:
    return StrataDefinition(
        normalisation=Normalisation(
            nfkc=rng.random() < 0.7,
            casefold=rng.random() < 0.7,
            collapse_whitespace=rng.random() < 0.7,
        ),
        reformulation_window=rng.choice(WINDOWS),
        pii=rng.choice(["exclude", "mask"]),
    )


def _csv_field(value: str, shape: Shape, rng: random.Random, single: bool) -> str:
    special = any(c in value for c in (shape.delimiter, '"', "\n", "\r"))
    blank = single and not value.strip()
    if special or blank or rng.random() < shape.quote_share:
        return '"' + value.replace('"', '""') + '"'
    return value


def _tsv_value(value: str) -> str:
    return value.replace("\t", " ").replace('"', "'")


def _field_value(event: Event, name: str, extras: list[str]) -> str:
    if name.startswith("extra"):
        return event.extra[extras.index(name)]
    if name == "timestamp":
        return event.stamp
    if name == "session_id":
        return event.session
    if name == "user_id":
        return event.user
    return str(getattr(event, name))


def render(shape: Shape, events: list[Event], rng: random.Random) -> bytes:
    single = len(shape.columns) == 1
    extras = [name for name, _ in shape.columns if name.startswith("extra")]
    if shape.log_format == "csv":
        header = [
            '"' + h + '"' if shape.quote_header else h for _, h in shape.columns
        ]  # header names hold no quotes or delimiters
    else:
        header = [h for _, h in shape.columns]
    lines = [shape.delimiter.join(header)]
    for event in events:
        event.stamp = _stamp(event, rng, shape.time_mode)
        values = [_field_value(event, name, extras) for name, _ in shape.columns]
        if shape.log_format == "csv":
            cells = [_csv_field(v, shape, rng, single) for v in values]
        else:
            cells = [_tsv_value(v) for v in values]
        lines.append(shape.delimiter.join(cells))
    text = shape.line_end.join(lines) + (shape.line_end if shape.trailing_newline else "")
    return (b"\xef\xbb\xbf" if shape.bom else b"") + text.encode("utf-8")


def regular_log(seed: int, directory: Path) -> tuple[Path, dict]:
    """A regular log written to ``directory`` and the keyword arguments to read it with."""
    rng = random.Random(seed)
    shape = _shape(rng)
    definition = _definition(rng)
    spaces = list(SPACES)
    if shape.log_format == "tsv" or shape.delimiter == "\t":
        spaces = [s for s in spaces if "\t" not in s]
    if len(shape.columns) == 1:
        spaces = [s for s in spaces if "\x1f" not in s]
    if rng.random() < 0.5:
        spaces += UNICODE_SPACES
    events = _events(rng, shape, definition.reformulation_window, spaces)
    if shape.log_format == "tsv":
        for event in events:
            event.query = _tsv_value(event.query)
    path = directory / shape.file_name
    path.write_bytes(render(shape, events, rng))
    kwargs: dict = {"definition": definition}
    if shape.mapping:
        kwargs["columns"] = ColumnMap(shape.mapping)
    if shape.explicit_format:
        kwargs["log_format"] = shape.log_format
    return path, kwargs


def big_regular_log(seed: int, directory: Path, size: int) -> tuple[Path, dict]:
    """A regular log of at least ``size`` bytes with every column: long sessions, many
    threads' worth of lines."""
    rng = random.Random(seed)
    shape = _shape(rng)
    names = [(name, name) for name in ("query", "timestamp", "session_id", "user_id")]
    names += [("result_count", "result_count"), ("clicked", "clicked"), ("extra0", "page0")]
    rng.shuffle(names)
    shape.columns = names
    shape.mapping = {}
    if shape.delimiter == "\x1f":
        shape.delimiter = ","
    # the bench log has LF and no quotes: here worker ranges may start inside CR LF and quotes
    shape.line_end = "\r\n"
    shape.quote_share = 0.5
    definition = _definition(rng)
    events: list[Event] = []
    while len(events) * 85 < size:
        events += _events(rng, shape, definition.reformulation_window, list(SPACES))
    while True:
        content = render(shape, events, rng)
        if len(content) >= size:
            break
        events += events[: len(events) // 2]
    path = directory / shape.file_name
    path.write_bytes(content)
    kwargs: dict = {"definition": definition}
    if shape.explicit_format:
        kwargs["log_format"] = shape.log_format
    return path, kwargs


# --------------------------------------------------------------------------- regular logs


@pytest.mark.parametrize("seed", REGULAR_SEEDS)
def test_a_regular_log_gives_the_reference_statistics(seed, tmp_path):
    path, kwargs = regular_log(seed, tmp_path)
    if isinstance(check(path, **kwargs), LogError):
        pytest.fail("a regular log was refused")


def test_the_generator_covers_the_corners(tmp_path):
    """The seeds together write every format, line ending and time form, with PII."""
    seen: dict[str, set] = {
        "format": set(),
        "delimiter": set(),
        "line_end": set(),
        "bom": set(),
        "trailing": set(),
        "time": set(),
        "pii": set(),
        "nfkc": set(),
        "casefold": set(),
        "collapse": set(),
    }
    for seed in REGULAR_SEEDS:
        rng = random.Random(seed)
        shape = _shape(rng)
        rule = _definition(rng)
        seen["format"].add(shape.log_format)
        seen["delimiter"].add(shape.delimiter)
        seen["line_end"].add(shape.line_end)
        seen["bom"].add(shape.bom)
        seen["trailing"].add(shape.trailing_newline)
        seen["time"].add(shape.time_mode)
        seen["pii"].add(rule.pii)
        seen["nfkc"].add(rule.normalisation.nfkc)
        seen["casefold"].add(rule.normalisation.casefold)
        seen["collapse"].add(rule.normalisation.collapse_whitespace)
    assert seen["format"] == {"csv", "tsv"}
    assert seen["delimiter"] >= {",", ";", "|", "\t"}
    assert seen["line_end"] == {"\n", "\r\n"}
    assert seen["time"] == set(RESOLUTION)
    for key in ("bom", "trailing", "nfkc", "casefold", "collapse"):
        assert seen[key] == {True, False}, key
    assert seen["pii"] == {"exclude", "mask"}


# --------------------------------------------------------------------------- corner cases

HEADER = "query,session_id,user_id,timestamp,result_count,clicked\n"
WINDOW_EDGE = (
    "q,s,t\n"
    "shoes red,a,2025-01-01T00:00:00.123456\n"
    "shoes blue,a,2025-01-01T00:05:00.123456\n"
    "shoes green,a,2025-01-01T00:10:00.123457\n"
    "pasta,b,1735689600.1\n"
    "pastas,b,1735689900.1\n"
    "pasta recipe,b,1735690200.1000001\n"
    "weather,c,1969-12-31T23:59:59.9\n"
    "weathr,c,1970-01-01T00:04:59.9\n"
)


def _tsv(rows: list[list[str]], header: str = "query\tsession_id\ttimestamp\tclicked") -> bytes:
    return (header + "\n" + "".join("\t".join(r) + "\n" for r in rows)).encode()


# name -> (file name, bytes, ingest keyword arguments, whether the compiled reader must read it)
CORNERS: dict[str, tuple[str, bytes, dict, bool]] = {
    "window edge with microseconds": (
        "log.csv",
        WINDOW_EDGE.encode(),
        {"columns": ColumnMap({"query": "q", "session_id": "s", "timestamp": "t"})},
        True,
    ),
    "window edge in milliseconds with a fractional window": (
        "log.csv",
        b"query,session_id,timestamp\nab,1,1735689600000\nac,1,1735689600300\n"
        b"ad,1,1735689600600\nae,1,1735689600601\nzz,2,1735689600000\n",
        {"definition": StrataDefinition(reformulation_window=0.3)},
        True,
    ),
    "window edge in milliseconds, window 7.123456": (
        "log.csv",
        b"query,session_id,timestamp\nab,1,1735689600000\nac,1,1735689607123.456\n"
        b"ad,1,1735689614246.912\nae,1,1735689621370.368\n",
        {"definition": StrataDefinition(reformulation_window=7.123456)},
        True,
    ),
    "seconds and milliseconds mixed, median decides": (
        "log.csv",
        b"query,session_id,timestamp\nab,1,1735689600\nac,1,1735689700\n"
        b"xy,2,1735689600000\nxz,2,1735689700000\nxw,2,1735689800000\n",
        {},
        True,
    ),
    "ties broken by normalised text": (
        "log.csv",
        b"query,session_id,timestamp,clicked\nZeta,1,5,0\nalpha,1,5,0\nalphas,1,6,1\n"
        b"beta,1,6,0\nbetas,1,7,0\nBeta,2,7,1\nbeta,2,7,0\nbetas,2,8,0\n",
        {},
        True,
    ),
    "quoted empty and unquoted empty queries": (
        "log.csv",
        b'query,session_id\n"",1\n,2\n"   ",3\nfoo,4\n" foo ",5\n',
        {},
        True,
    ),
    "doubled quotes and delimiters inside quotes": (
        "log.csv",
        b'query,session_id\n"say ""hi"", bob",1\n"a,b,c",2\n"""",3\n"x"",""y",4\n',
        {},
        True,
    ),
    "one-column CSV with commas as text": (
        "log.csv",
        b'query\nfoo, bar\n"foo, bar"\nbaz;qux|x\n"""quoted"""\n',
        {},
        True,
    ),
    "TSV keeps quotes as typed": (
        "log.tsv",
        _tsv([['"foo"', "1", "5", "1"], ['27" monitor', "1", "6", "0"], ['"', "2", "7", "x"]]),
        {},
        True,
    ),
    "ASCII control whitespace and Unicode spaces": (
        "log.csv",
        "query,session_id\nfoo\x0bbar,1\nfoo\x1fbar,1\nfoo\u00a0bar,2\nfoo\u3000bar,2\n"
        "foo\u0085bar,3\nfoo\u2028bar,3\nfoo\u200bbar,4\n\x1c\x1d\x1e,5\n".encode(),
        {},
        True,
    ),
    "ASCII control whitespace without collapsing": (
        "log.csv",
        "query,session_id\nfoo\x0bbar,1\nfoo  bar,1\n foo,2\nfoo ,2\nfoo\u00a0bar,3\n".encode(),
        {"definition": StrataDefinition(normalisation=Normalisation(collapse_whitespace=False))},
        True,
    ),
    "Unicode folding": (
        "log.csv",
        "query,session_id\nStraße,1\nSTRASSE,1\nﬁlter,2\nFILTER,2\nｆｕｌｌ,3\nİstanbul,3\n"
        "e\u0301cole,4\nécole,4\nΣίσυφος,5\nΣΊΣΥΦΟΣ,5\n\u2126,6\nω,6\n".encode(),
        {},
        True,
    ),
    "Unicode without NFKC or case folding": (
        "log.csv",
        "query,session_id\nStraße,1\nSTRASSE,1\nﬁlter,2\nFILTER,2\nｆｕｌｌ,3\nİstanbul,3\n"
        "e\u0301cole,4\nécole,4\n".encode(),
        {"definition": StrataDefinition(normalisation=Normalisation(nfkc=False, casefold=False))},
        True,
    ),
    "edit distance on characters, not bytes": (
        "log.csv",
        "query,session_id,timestamp\ncafé,1,1\ncafe,1,2\n東京,2,1\n東亰,2,2\n"
        "ab,3,1\ncd,3,2\nabc,4,1\nabd,4,2\nstraße,5,1\nstrasse,5,2\n".encode(),
        {},
        True,
    ),
    "masked queries meet placeholders": (
        "log.csv",
        b"query,session_id,timestamp\nbob@example.com,1,1\n[email],1,2\ncontact [email],2,1\n"
        b"contact bob@example.com,2,2\n[url] 1234567890,3,1\n"
        b"https://u:p@h.example 1234567890,3,2\n+1 555 123 4567,4,1\n4111 1111 1111 1111,4,2\n",
        {"definition": StrataDefinition(pii="mask")},
        True,
    ),
    "excluded queries still follow in sessions": (
        "log.csv",
        b"query,session_id,timestamp,clicked\ncontact us,1,1,0\ncontact bob@example.com,1,2,1\n"
        b"[email],2,1,0\nmail,2,2,0\n",
        {"definition": StrataDefinition(pii="exclude")},
        True,
    ),
    "every query is personal data": (
        "log.csv",
        b"query\nbob@example.com\n+1 555 123 4567\n",
        {},
        True,
    ),
    "ids compared as text": (
        "log.csv",
        b"query,session_id,user_id\nfoo,001,7\nfoo,1,07\nfoo, 1,7 \nfoo,S1,\nfoo,s1,\n",
        {},
        True,
    ),
    "offsets DuckDB reads, odd ones too": (
        "log.csv",
        b"query,session_id,timestamp\na1,1,2025-01-01T00:00:01+99:99\na2,1,2025-01-01T00:00:01+24:00"
        b"\na3,1,2025-01-01T00:00:01-00:00\na4,1,2025-01-01T00:00:01+05\na5,1,2025-01-01 00:00+0530"
        b"\na6,1,2025-01-01T00:00:01.5Z\n",
        {"definition": StrataDefinition(reformulation_window=1e6)},
        True,
    ),
    "strictly formed times DuckDB does not read": (
        "log.csv",
        b"query,session_id,timestamp\na,1,2025-01-02Z\nb,1,2025-01-02+05:30\nc,1,2025-02-29\n"
        b"d,1,2025-01-01T23:59:60\ne,1,2025-01-01T00:60:00\nf,1,2025-00-01\ng,1,2025-01-01T00:00\n",
        {},
        True,
    ),
    "years 0000 and 0001": (
        "log.csv",
        b"query,session_id,timestamp\na,1,0000-01-01\nab,1,0000-01-01T00:04:00\n"
        b"b,2,0001-01-01T00:00:00\nbc,2,0001-01-01T00:00:01\n",
        {},
        True,
    ),
    "date-only column": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,2025-01-01\nfoa,1,2025-01-02\nbar,2,2024-02-29\n",
        {"definition": StrataDefinition(reformulation_window=86400.0)},
        True,
    ),
    "numbers with signs and bare points": (
        "log.csv",
        b"query,session_id,timestamp,result_count,clicked\na,1,+1735689600,-0,+1\n"
        b"ab,1,1735689601.,+0,-1\nabc,1,.5,.0,.5\nabd,1,0001735689602,00,5.\n",
        {},
        True,
    ),
    "long epoch decimals": (
        "log.csv",
        b"query,session_id,timestamp\nab,1,1735689600.123456789\nac,1,1735689900.123456789\n"
        b"ad,1,1735690200.1234567891234\n",
        {},
        True,
    ),
    "eight-digit numbers as times": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,20250101\nfoa,1,20250102\nfob,1,20250103\n",
        {"definition": StrataDefinition(reformulation_window=1e6)},
        False,
    ),
    "text in the timestamp column": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,n/a\nfoa,1,unknown\nfob,1,1735689600\n",
        {},
        False,
    ),
    "quoted value holding a line break": (
        "log.csv",
        b'query,session_id\n"foo\nbar",1\n"foo bar",1\n"x\r\ny",2\n',
        {},
        False,
    ),
    "click words with spaces": (
        "log.csv",
        b"query,session_id,timestamp,clicked\na,1,1, no \nb,1,2, yes\nc,2,1,\tno\nd,2,2,NO \n",
        {},
        False,
    ),
    "header only quoted names with spaces": (
        "log.csv",
        b'" query ","Session ID"\nfoo,1\nbar,2\n',
        {},
        True,
    ),
    "extension in capitals, TSV by name": (
        "LOG.TSV",
        b"query\tsession_id\nfoo\t1\nbar\t2\n",
        {},
        True,
    ),
    "CRLF with a BOM and no final newline": (
        "log.csv",
        b'\xef\xbb\xbfquery,session_id\r\nfoo,1\r\nbar,2\r\n"baz",3',
        {},
        True,
    ),
    "last field empty at the end of the file": (
        "log.csv",
        b"query,session_id\nfoo,1\nbar,",
        {},
        True,
    ),
    "fractional times near 1970 at the window edge": (
        "log.csv",
        b"query,session_id,timestamp\nshoes red,1,1970-01-01T04:33:03.894822\n"
        b"shoes blue,1,1970-01-01T04:34:03.894822\n",
        {"definition": StrataDefinition(reformulation_window=60.0)},
        True,
    ),
    "fractional times 1.1 seconds apart, window 1.1": (
        "log.csv",
        b"query,session_id,timestamp\nshoes red,1,2025-01-01T05:41:00.427769\n"
        b"shoes blue,1,2025-01-01T05:41:01.527769\n",
        {"definition": StrataDefinition(reformulation_window=1.1)},
        True,
    ),
    "fractional times in a far year": (
        "log.csv",
        b"query,session_id,timestamp,clicked\nab,1,9999-12-30T23:59:59.000001,0\n"
        b"ac,1,9999-12-30T23:59:59.000002,1\nad,1,9999-12-30T23:59:59.000003,0\n"
        b"ae,1,9999-12-30T23:59:59.000004,0\naf,1,9999-12-30T23:59:59.000005,0\n",
        {"definition": StrataDefinition(reformulation_window=1.0)},
        True,
    ),
    "click words padded with Unicode spaces": (
        "log.csv",
        "query,session_id,timestamp,clicked\nfoo,1,1,no\u00a0\nbar,2,1,\u3000false\n"
        "baz,3,1,yes\nqux,4,1,\u2003n\n".encode(),
        {},
        True,
    ),
    "vertical tab after masked personal data, whitespace kept": (
        "log.csv",
        b"query\nhttps://user:pass@host\x0bfoo\nexample.com/?token=abc\x0bdef\n"
        b"x&password=\x0b4111 1111 1111 1111\nplain\n",
        {
            "definition": StrataDefinition(
                pii="mask", normalisation=Normalisation(collapse_whitespace=False)
            )
        },
        True,
    ),
    "Unicode spaces around masked personal data, whitespace kept": (
        "log.csv",
        "query\nbob@example.com\u1680\n\u00a0call +1 555 123 4567\nplain\n".encode(),
        {
            "definition": StrataDefinition(
                pii="mask", normalisation=Normalisation(nfkc=False, collapse_whitespace=False)
            )
        },
        True,
    ),
    "more than 64 columns": (
        "log.csv",
        (
            ",".join(["query"] + [f"c{i}" for i in range(69)])
            + "\n"
            + ",".join(["foo"] + [str(i) for i in range(69)])
            + "\n"
            + ",".join(["bar"] + ["x"] * 69)
            + "\n"
        ).encode(),
        {},
        True,
    ),
    "BOM, then a blank line, then the header": (
        "log.csv",
        b"\xef\xbb\xbf\nquery,session_id\nfoo,1\nbar,2\n",
        {},
        False,
    ),
    "header with a trailing delimiter": (
        "log.csv",
        b"query,session_id,\nfoo,1,\nbar,2,x\n",
        {},
        True,
    ),
    "quoted header name holding the delimiter": (
        "log.csv",
        b'"a,b",query\n"1,2",foo\nx,bar\n',
        {},
        True,
    ),
    "rows of empty fields only": (
        "log.csv",
        b"query,session_id,timestamp\n,,\nfoo,1,1\n,,\n",
        {},
        True,
    ),
    "last line ends with a lone CR": (
        "log.csv",
        b"query,session_id\nfoo,1\nbar,2\r",
        {},
        False,
    ),
    "two fields from one column": (
        "log.csv",
        b"query,sid,timestamp\nfoo,a,1\nfoa,a,2\nbar,b,1\n",
        {"columns": ColumnMap({"session_id": "sid", "user_id": "sid"})},
        True,
    ),
    "the query column as the session": (
        "log.csv",
        b"query,timestamp\nfoo,1\nfoo,2\nbar,1\n",
        {"columns": ColumnMap({"session_id": "query"})},
        True,
    ),
    "a line of two million bytes": (
        "log.csv",
        b"query,session_id\nfoo,1\n" + b"x" * 2_000_000 + b",2\nbar,3\n",
        {},
        False,
    ),
    "a line just under two million bytes": (
        "log.csv",
        b"query,session_id\nfoo,1\n" + b"x" * 1_999_990 + b",2\nbar,3\n",
        {},
        True,
    ),
    "whitespace-only line in a one-column log": ("log.csv", b"query\nfoo\n   \nbar\n", {}, True),
    "whitespace-only last line without a newline": ("log.csv", b"query\nfoo\nbar\n  ", {}, True),
    "whitespace-only line in a one-column TSV": ("log.tsv", b"query\nfoo\n   \nbar\n", {}, True),
    "unit separator in a one-column log": ("log.csv", b"query\nfoo\x1fbar\nbaz\n", {}, False),
    "byte-order marks inside the data": (
        "log.csv",
        "query,s\nfoo\ufeffbar,1\n\ufeffbaz,2\n".encode(),
        {},
        True,
    ),
    "two byte-order marks": ("log.csv", b"\xef\xbb\xbf\xef\xbb\xbfquery,s\nfoo,1\n", {}, True),
    "space before the header": ("log.csv", b" query,s\nfoo,1\n", {}, True),
    "CR LF header, LF data": ("log.csv", b"query,s\r\nfoo,1\nbar,2\n", {}, False),
    "quoted empty and blank session ids": (
        "log.csv",
        b'query,session_id,timestamp\nfoo,"",1\nfoo,,2\nfoo," ",3\nfoa," ",4\n',
        {},
        True,
    ),
    "ASCII control characters in queries": (
        "log.csv",
        b"query,s\nfoo\x01bar,1\nbaz\x7f,2\n\x1b[0m,3\n",
        {},
        True,
    ),
    "long session id with doubled quotes": (
        "log.csv",
        b'query,session_id\nfoo,"' + b'a""' * 100 + b'"\nbar,1\n',
        {},
        False,
    ),
    "a .csv.gz name on a plain file": ("log.csv.gz", b"query,s\nfoo,1\nbar,2\n", {}, True),
    "a window that overflows in milliseconds": (
        "log.csv",
        b"query,session_id,timestamp\nab,1,1735689600000\nac,1,1735689700000\n",
        {"definition": StrataDefinition(reformulation_window=1e306)},
        True,
    ),
    "column names that need quoting": (
        "log.csv",
        '"q""x",S\u00e9ance ID,\'t\',"a,b"\nfoo,1,1,x\nfoa,1,2,y\n'.encode(),
        {
            "columns": ColumnMap(
                {"query": 'q"x', "session_id": "S\u00e9ance ID", "timestamp": "'t'"}
            )
        },
        True,
    ),
    "infinite epoch times": (
        "log.csv",
        b"query,session_id,timestamp,clicked\nab,1,1e400,0\nac,1,1e400,1\nad,1,-1e400,0\n"
        b"ae,1,5,0\naf,2,-1e400,0\nag,2,1735689600000,0\n",
        {},
        True,
    ),
    "signed zero times": (
        "log.csv",
        b"query,session_id,timestamp\nab,1,-0\nac,1,0\nad,1,0.0\nae,1,-0.0\n",
        {},
        True,
    ),
    "mixed LF and CRLF": (
        "log.csv",
        b"query,session_id\nfoo,1\r\nbar,2\nbaz,3\r\n",
        {},
        False,
    ),
}


@pytest.mark.parametrize("name", list(CORNERS))
def test_a_corner_case_gives_the_reference_statistics(name, tmp_path):
    file_name, content, kwargs, _ = CORNERS[name]
    path = tmp_path / file_name
    path.write_bytes(content)
    check(path, **kwargs)


# --------------------------------------------------------------------------- irregular logs


def _parquet(path: Path) -> None:
    table = pa.table(
        {
            "query": ["foo", "Foo", "bar", None, "bob@example.com", "ｆｏｏ"],
            "session_id": ["1", "1", "2", "2", None, "3"],
            "timestamp": pa.array(
                [dt.datetime(2025, 1, 1, 0, 0, s) for s in (1, 2, 3, 4, 5, 6)],
                pa.timestamp("us"),
            ),
            "result_count": pa.array([0, 3, None, 1, 2, 0], pa.int64()),
            "clicked": [True, False, None, True, False, True],
        }
    )
    pq.write_table(table, path)


IRREGULAR: dict[str, tuple[str, bytes | None, dict]] = {
    "blank line in the middle": (
        "log.csv",
        (HEADER + "foo,1,u,1,0,1\n\nbar,2,u,2,1,0\n").encode(),
        {},
    ),
    "blank lines before the header": (
        "log.csv",
        b"\n\n" + HEADER.encode() + b"foo,1,u,1,0,1\n",
        {},
    ),
    "blank lines at the end": ("log.csv", (HEADER + "foo,1,u,1,0,1\n\n\n").encode(), {}),
    "whitespace-only line": (
        "log.csv",
        (HEADER + "foo,1,u,1,0,1\n   \nbar,1,u,2,0,0\n").encode(),
        {},
    ),
    "too many fields": ("log.csv", (HEADER + "foo,1,u,1,0,1,extra\nbar,2,u,2,1,0\n").encode(), {}),
    "too few fields": ("log.csv", (HEADER + "foo,1,u\nbar,2,u,2,1,0\n").encode(), {}),
    "quote left open": (
        "log.csv",
        (HEADER + '"foo,1,u,1,0,1\nbar,2,u,2,1,0\nbaz,3,u,3,0,0\n').encode(),
        {},
    ),
    "quote inside an unquoted field": (
        "log.csv",
        (HEADER + 'a 27" monitor,1,u,1,0,1\nbar,2,u,2,1,0\n').encode(),
        {},
    ),
    "text after a closing quote": (
        "log.csv",
        (HEADER + '"foo"bar,1,u,1,0,1\nbar,2,u,2,1,0\n').encode(),
        {},
    ),
    "space after a closing quote": (
        "log.csv",
        (HEADER + '"d" ,1,u,1,0,1\nbar,2,u,2,1,0\n').encode(),
        {},
    ),
    "space before an opening quote": (
        "log.csv",
        (HEADER + 'd, "1",u,1,0,1\nbar,2,u,2,1,0\n').encode(),
        {},
    ),
    "invalid UTF-8": (
        "log.csv",
        HEADER.encode() + b"caf\xe9,1,u,1,0,1\nbar,2,u,2,1,0\n\xff\xfe,3,u,3,0,0\n",
        {},
    ),
    "invalid UTF-8 in a TSV": ("log.tsv", b"query\tsession_id\ncaf\xe9\t1\nbar\t2\n", {}),
    "NUL byte in a query": ("log.csv", HEADER.encode() + b"fo\x00o,1,u,1,0,1\nfoo,2,u,2,1,0\n", {}),
    "NUL byte in a session id": (
        "log.csv",
        HEADER.encode() + b"foo,1\x00,u,1,0,1\nfoo,2,u,2,1,0\n",
        {},
    ),
    "lone CR line endings": ("log.csv", b"query,session_id\rfoo,1\rbar,2\rfoo,3\r", {}),
    "a lone CR inside CRLF lines": (
        "log.csv",
        b"query,session_id\r\nfoo,1\rbar,2\r\nbaz,3\r\n",
        {},
    ),
    "exponent and padded result counts": (
        "log.csv",
        (HEADER + "foo,1,u,1,1e3,1\nfoo,1,u,2, 12 ,0\nbar,2,u,3,0,0\nbar,2,u,4, 0,0\n").encode(),
        {},
    ),
    "underscores and infinities in numbers": (
        "log.csv",
        (HEADER + "foo,1,u,1_000,1_0,inf\nfoo,1,u,2,-inf,nan\nbar,2,u,3,Infinity,-1\n").encode(),
        {},
    ),
    "nan and inf timestamps": (
        "log.csv",
        (HEADER + "foo,1,u,nan,0,1\nfoa,1,u,inf,0,0\nfob,1,u,-inf,0,0\nfoo,2,u,5,0,0\n").encode(),
        {},
    ),
    "nan timestamps decide no unit": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,nan\nbar,1,NaN\nbaz,2,1735689600000\n",
        {},
    ),
    "loose ISO timestamps": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,2025-1-1 0:0:1\nfoa,1,2025-01-01T00:00:1\n"
        b"fob,1,2025-01-01 00:00:01 UTC\nfoc,1, 2025-01-01T00:00:09\n"
        b"fod,1,2025-01-01T00:00:10 +05:30\n",
        {},
    ),
    "hour 24 and long fractions": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,2025-01-01T24:00:00\nfoa,1,2025-01-01T24:00\n"
        b"fob,1,2025-01-02T00:00:00.1234567\nfoc,1,2025-01-02T00:00:00.9999999\n",
        {},
    ),
    "exponent epoch times": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,1.7356896e9\nfoa,1,1.7356897e9\nfob,2,1735689600\n",
        {},
    ),
    "empty after the header": ("log.csv", HEADER.encode(), {}),
    "empty after the header, CRLF": ("log.csv", HEADER.replace("\n", "\r\n").encode(), {}),
    "header and blank lines only": ("log.csv", (HEADER + "\n\n").encode(), {}),
    "only a BOM": ("log.csv", b"\xef\xbb\xbf", {}),
    "every line malformed": ("log.csv", (HEADER + '"a,1\n"b,2\n').encode(), {}),
    "missing query column": ("log.csv", b"q,session_id\nfoo,1\n", {}),
    "explicit column missing": (
        "log.csv",
        b"query\nfoo\n",
        {"columns": ColumnMap({"session_id": "sid"})},
    ),
    "duplicate header names": ("log.csv", b"query,Query\nfoo,bar\n", {}),
    "nan with a payload as a result count": (
        "log.csv",
        b"query,result_count\nfoo,0\nfoo,nan(1)\nbar,NaN()\nbar,0\n",
        {},
    ),
    "nan with a payload in a numeric click column": (
        "log.csv",
        b"query,session_id,timestamp,clicked\nfoo,1,1,0\nfoo,1,2,nan(1)\nbar,2,1,1\n",
        {},
    ),
    "nan with a payload in a numeric time column": (
        "log.csv",
        b"query,session_id,timestamp\nfoo,1,1735689600\nfoa,1,1735689700\nfob,1,nan(1)\n",
        {},
    ),
    "numbers with a plus before the minus": (
        "log.csv",
        b"query,session_id,timestamp,result_count,clicked\nfoo,1,1,0,+-1\nfoo,1,2,+-0,yes\n"
        b"bar,2,1,+-inf,0\nbar,2,2,0,+-.5\nbaz,3,1,+-nan,+-inf\nbaz,3,2,+-1e3,no\n",
        {},
    ),
    "a plus before the minus in numeric columns": (
        "log.csv",
        b"query,session_id,timestamp,clicked\nfoo,1,1735689600,0\nfoa,1,1735689700,1\n"
        b"fob,1,+-1735689800,+-nan\nfoc,2,1735689600,+-1\n",
        {},
    ),
    "numbers DuckDB reads after control whitespace": (
        "log.csv",
        b"query,session_id,timestamp,result_count\nfoo,1,1,\x0b0\nfoa,1,2,0\x0c\nfob,1,3,+-1\n",
        {},
    ),
    "JSON lines": (
        "log.jsonl",
        b'{"query":"foo","session_id":"1","timestamp":"2025-01-01T00:00:01","clicked":1}\n'
        b'{"query":"Foo","session_id":"1","timestamp":"2025-01-01T00:00:02","result_count":0}\n'
        b'{"query":"bar","session_id":2,"timestamp":1735689600,"clicked":true}\n'
        b"not json\n"
        b'{"query":null}\n',
        {},
    ),
    "JSON lines, gzipped": ("log.jsonl.gz", None, {}),
    "gzipped CSV": ("log.csv.gz", None, {}),
    "Parquet": ("log.parquet", None, {}),
}


@pytest.mark.parametrize("name", list(IRREGULAR))
def test_an_irregular_log_gives_the_reference_statistics(name, tmp_path):
    file_name, content, kwargs = IRREGULAR[name]
    path = tmp_path / file_name
    if name == "Parquet":
        _parquet(path)
    elif name == "JSON lines, gzipped":
        path.write_bytes(gzip.compress(IRREGULAR["JSON lines"][1] or b""))
    elif name == "gzipped CSV":
        (tmp_path / "plain").mkdir()
        regular, kwargs = regular_log(3, tmp_path / "plain")
        path = tmp_path / (regular.name + ".gz")
        path.write_bytes(gzip.compress(regular.read_bytes()))
    else:
        assert content is not None
        path.write_bytes(content)
    check(path, **kwargs)


def _typed_then_not(rows: int, head, tail, rng: random.Random) -> bytes:
    """A log whose first ``rows`` lines give DuckDB's sniffer one type per column, and
    whose later lines (past the sniffer's sample) hold other values."""
    words = ["shoes", "shoe", "red shoes", "pasta", "pastas", "weather", "wether"]
    lines = ["query,session_id,timestamp,clicked"]
    for i in range(rows + 2000):
        stamp, click = (head if i < rows else tail)(i, rng)
        lines.append(f"{rng.choice(words)},s{i // 5},{stamp},{click}")
    return ("\n".join(lines) + "\n").encode()


LATE_TIMES = [
    "2025-01-01T00:00:01", "2025-01-02", "2025-02-30", "n/a", "+-1735689600", "1735689600.5",
    "2025-01-01 10:00:00.123456", "", "1e9", "-5",
]  # fmt: skip
SNIFFED = {
    "numbers, then other times and clicks": (
        lambda i, rng: (1735689600 + 7 * i, rng.choice(["0", "1"])),
        lambda i, rng: (
            rng.choice(LATE_TIMES),
            rng.choice(["yes", "no", "-", "true", "2", "", "n/a", "+-1", "+-nan", "0.5"]),
        ),
    ),
    "times, then numbers and words": (
        lambda i, rng: (
            f"2025-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
            rng.choice(["true", "false"]),
        ),
        lambda i, rng: (
            rng.choice(["2025-01-02", "2025-02-30", "2025-01-01T00:00:01.5Z", "", "n/a"]),
            rng.choice(["0", "1", "yes", "-", "x", ""]),
        ),
    ),
}


@pytest.mark.parametrize("name", list(SNIFFED))
def test_values_past_the_sniffed_sample_give_the_reference_statistics(name, tmp_path):
    head, tail = SNIFFED[name]
    path = tmp_path / "log.csv"
    path.write_bytes(_typed_then_not(21_000, head, tail, random.Random(5)))
    check(path)


@pytest.mark.parametrize("name", ["log[1].csv", "log*.csv", "log?.csv"])
def test_a_file_name_with_pattern_characters_is_read_alike(name, tmp_path):
    """The reader reads the file named, whatever other files its name would match as a
    pattern."""
    (tmp_path / "log1.csv").write_bytes(b"query,session_id\nother,1\n")
    (tmp_path / "logs.csv").write_bytes(b"query,session_id\nanother,2\n")
    path = tmp_path / name
    path.write_bytes(b"query,session_id\nnamed,1\nnamed too,2\n")
    check(path)


def test_a_log_empty_after_its_header_fails_naming_the_file(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(HEADER.encode())
    got = check(path)
    assert isinstance(got, LogError)
    assert str(got) == f"{path}: no rows after the header"


IRREGULAR_TIMES = [
    "nan", "inf", "2025-1-1 0:0:1", "2025-01-01T24:00:00", "2025-01-01T00:00:01.1234567",
    " 1735689601", "1_735_689_601", "1.7e9", "2025-01-01 00:00:01 UTC", "n/a", "NaN",
]  # fmt: skip
IRREGULAR_VALUES = {
    "timestamp": [*IRREGULAR_TIMES, "nan(1)", "1e400", "-1e400"],
    "result_count": ["1e3", " 12 ", "1_000", "inf", "nan", "-inf", "0e0", " 0", "nan(2)", "\x0b0"],
    "clicked": [" 1 ", "1e0", "nan", "inf", " no ", "-inf", "\tyes", "nan(3)", "+-1"],
}


def _mutate_lines(content: bytes, rng: random.Random, delimiter: bytes) -> bytes:
    lines = content.split(b"\n")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(1, max(len(lines) - 1, 2))
        if i >= len(lines):
            continue
        line = lines[i]
        kind = rng.randrange(8)
        if kind == 0:
            lines.insert(i, b"")
        elif kind == 1:
            lines[i] = line.rsplit(delimiter, 1)[0] if delimiter in line else line + delimiter
        elif kind == 2:
            lines[i] = line + delimiter + b"extra"
        elif kind == 3:
            lines[i] = b'"' + line
        elif kind == 4:
            lines[i] = line[:2] + b"\xff\xc3" + line[2:]
        elif kind == 5:
            lines[i] = line[:1] + b"\x00" + line[1:]
        elif kind == 6:
            lines[i] = line + b"\r"
        else:
            lines[i] = b'x 27" y' + line
    return b"\n".join(lines)


@pytest.mark.parametrize("seed", IRREGULAR_SEEDS)
def test_a_damaged_log_gives_the_reference_statistics(seed, tmp_path):
    rng = random.Random(1000 + seed)
    shape = _shape(rng)
    shape.line_end = "\n"
    definition = _definition(rng)
    events = _events(rng, shape, definition.reformulation_window, list(SPACES))
    for event in events:
        if rng.random() < 0.05:
            event.result_count = rng.choice(IRREGULAR_VALUES["result_count"])
        if rng.random() < 0.05:
            event.clicked = rng.choice(IRREGULAR_VALUES["clicked"])
    content = render(shape, events, rng)
    if rng.random() < 0.5:
        text = content.decode("utf-8")
        pool = IRREGULAR_VALUES["timestamp"]
        lines = text.split("\n")
        for i in range(1, len(lines)):
            if rng.random() < 0.05:
                for event in events:
                    if event.stamp and event.stamp in lines[i]:
                        lines[i] = lines[i].replace(event.stamp, rng.choice(pool), 1)
                        break
        content = "\n".join(lines).encode("utf-8")
    content = _mutate_lines(content, rng, shape.delimiter.encode())
    path = tmp_path / shape.file_name
    path.write_bytes(content)
    kwargs: dict = {"definition": definition}
    if shape.mapping:
        kwargs["columns"] = ColumnMap(shape.mapping)
    if shape.explicit_format:
        kwargs["log_format"] = shape.log_format
    check(path, **kwargs)


# --------------------------------------------------------------------------- threads, database


@pytest.fixture(scope="module")
def bench_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "log.csv"
    subprocess.run(
        [*GEN_LOG, "--lines", "50000", "--seed", "5", "--out", str(path)],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    return path


def test_a_large_regular_log_is_read_alike_by_four_threads_and_one(tmp_path):
    path, kwargs = big_regular_log(2, tmp_path, 4_500_000)
    one = ingest(path, threads=1, **kwargs)
    four = ingest(path, threads=4, **kwargs)
    assert_same(one, four)
    want = expected(path, **kwargs)
    assert isinstance(four, LogStats) and not isinstance(want, LogError)
    assert_reference(four, want)


def test_the_bench_log_gives_the_reference_statistics(bench_log):
    """The generator of the benchmark (long sessions, Zipf queries, every column)."""
    check(bench_log)


def test_threads_do_not_change_the_statistics(bench_log):
    one = ingest(bench_log, threads=1)
    two = ingest(bench_log, threads=2)
    assert_same(one, two)


@pytest.mark.parametrize("seed", [0, 7])
def test_persisted_statistics_read_back_alike(seed, tmp_path):
    path, kwargs = regular_log(seed, tmp_path)
    stats = ingest(path, database=tmp_path / "stats.duckdb", **kwargs)
    assert_same(load_stats(tmp_path / "stats.duckdb"), stats)
    want = expected(path, **kwargs)
    assert isinstance(stats, LogStats) and not isinstance(want, LogError)
    assert_reference(load_stats(tmp_path / "stats.duckdb"), want)


def test_persisted_tables_have_the_documented_columns_and_types(tmp_path):
    path, kwargs = regular_log(0, tmp_path)
    database = tmp_path / "stats.duckdb"
    assert isinstance(ingest(path, database=database, **kwargs), LogStats)
    with duckdb.connect(str(database), read_only=True) as con:
        schema = dict(row[:2] for row in con.execute("DESCRIBE query_stats").fetchall())
        report = [row[:2] for row in con.execute("DESCRIBE ingest_report").fetchall()]
    assert report == [("report", "VARCHAR")]
    assert schema["query"] == "VARCHAR" and schema["pii"] == "VARCHAR"
    assert schema["frequency"] in ("BIGINT", "HUGEINT")
    assert all(schema[name] == "DOUBLE" for name in RATES)


def test_persisted_statistics_of_the_bench_log_read_back_alike(bench_log, tmp_path):
    stats = ingest(bench_log, database=tmp_path / "stats.duckdb")
    assert_same(load_stats(tmp_path / "stats.duckdb"), stats)
