"""Finding out what a log file is, and how DuckDB should read each field of it.

Format comes from the extension (``.gz`` stripped) unless given; gzip from the magic bytes;
the CSV delimiter from the header line (``,`` ``\\t`` ``;`` or ``|``, whichever it holds
most of; TSV is always tab-separated and unquoted), which is the first non-blank line (blank
lines before it are skipped). Column names and sniffed types come from DuckDB. Every field
becomes one SQL expression over the raw column, chosen by the column's type, so that a
timestamp may be ISO 8601 text or epoch seconds and ``clicked`` may be a flag, a click count,
a clicked position or a clicked URL.

Pure core: no Django.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Literal, cast

import duckdb

__all__ = [
    "FIELDS",
    "ColumnMap",
    "Copy",
    "Field",
    "LogError",
    "LogFormat",
    "Source",
    "check_columns",
    "describe",
    "field_sql",
    "identifier",
    "is_encoding_error",
    "is_numeric_type",
    "is_temporal_type",
    "locate",
    "resolve_source",
    "sql_string",
    "transcode",
]

LogFormat = Literal["csv", "tsv", "jsonl", "parquet"]
# What DuckDB reads: the file itself, a copy with invalid UTF-8 replaced, or a copy that also
# holds one record per line (see :func:`transcode`).
Copy = Literal["none", "utf8", "lines"]
Field = Literal["query", "timestamp", "session_id", "user_id", "result_count", "clicked"]
FIELDS: tuple[Field, ...] = (
    "query",
    "timestamp",
    "session_id",
    "user_id",
    "result_count",
    "clicked",
)
_EXTENSIONS: Mapping[str, LogFormat] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_DELIMITERS = (",", "\t", ";", "|")
# A one-column CSV must not split queries that contain commas: read it with a delimiter
# that never occurs in text (the ASCII unit separator).
_NO_DELIMITER = "\x1f"
_GZIP_MAGIC = b"\x1f\x8b"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# A search log has a handful of columns; a header with more is another kind of file, and
# DuckDB's work grows with the column count (the 100,001 columns of a 0.9 MB header).
MAX_COLUMNS = 1_000
# One line is one search: a few hundred bytes. DuckDB reads lines up to this length (its
# max_line_size, or maximum_object_size for JSON; its own default for CSV); a longer one is
# refused by line.
MAX_LINE_BYTES = 2_000_000
# The first line (a CSV header) is looked for in this much of the file, at the default limit.
_HEAD_BYTES = MAX_LINE_BYTES
_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
)
_TEMPORAL = ("TIMESTAMP", "DATE")
_FALSE_WORDS = "('', 'false', 'f', 'no', 'n', 'none', 'null', 'nan', '-')"


class LogError(ValueError):
    """The log cannot be read as asked; the message says why and what was found."""


@dataclass(frozen=True)
class ColumnMap:
    """Which log column holds which field.

    Defaults are the names of the public contract (``query``, ``timestamp``, ``session_id``,
    ``user_id``, ``result_count``, ``clicked``). ``query`` is required. An optional field
    whose default column is missing is simply unavailable (its signals become null); an
    optional field the caller mapped explicitly must exist.
    """

    names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.names) - set(FIELDS))
        if unknown:
            raise LogError(
                f"unknown field(s) {', '.join(unknown)} in the column mapping; "
                f"fields are {', '.join(FIELDS)}"
            )

    @classmethod
    def parse(cls, text: str) -> ColumnMap:
        """Parse ``query=q,session_id=sid`` (field=column, comma separated)."""
        if "\x00" in text:
            raise LogError("the column mapping holds a NUL character, which no column name has")
        names: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, column = item.partition("=")
            if not sep or not column.strip():
                raise LogError(f"column mapping {item!r} is not field=column")
            names[name.strip()] = column.strip()
        return cls(names)

    def column(self, name: Field) -> str:
        return self.names.get(name, name)

    def matched(self, found: Sequence[str]) -> ColumnMap:
        """This mapping, with every column not ``found`` under its exact name matched to the
        one column found whose name differs only in case, spacing, ``-`` or ``_``.

        Exports write ``Query`` or ``Session ID`` as readily as ``query`` and ``session_id``;
        refusing them would make people rename columns for nothing. An exact name wins, and
        two loose matches match neither (the error then lists the columns found).
        """
        names = dict(self.names)
        for name in FIELDS:
            column = self.column(name)
            if column in found:
                continue
            alike = [other for other in found if _loose(other) == _loose(column)]
            if len(alike) == 1:
                names[name] = alike[0]
        return ColumnMap(names)

    def explicit(self, name: Field) -> bool:
        return name in self.names


def _loose(name: str) -> str:
    return re.sub(r"[\s_\-]+", "_", name.strip().casefold())


@dataclass(frozen=True)
class Source:
    """A resolved log file: how to read it, and what DuckDB found in it.

    ``path`` is what DuckDB reads: the original file, or a repaired copy (``copy`` says
    which, :func:`transcode` how it is made). ``invalid_utf8_lines`` counts the lines whose
    invalid UTF-8 a copy replaced; a one-record-per-line copy also counts the lines it
    blanked as malformed (a CSV line leaving a quote open, a JSON line that is not an
    object: ``blanked_lines``, the first of them being ``first_blanked_line``) and the
    non-blank lines it kept after the header (``data_lines``). ``skip`` is the number of
    blank lines before the header. ``types`` are the sniffed column types; text formats are
    read as text and converted field by field, so a malformed value becomes null instead of
    costing its row. ``text_keys`` are JSON keys whose value must be a string (the query):
    they are read as JSON, so that a number or an object is told apart from text and its
    line refused (:func:`transcode` blanks it) rather than counted as a query.
    """

    original: Path
    path: Path
    log_format: LogFormat
    gzipped: bool
    delimiter: str | None
    columns: tuple[str, ...] = ()
    types: Mapping[str, str] | None = None
    skip: int = 0
    copy: Copy = "none"
    invalid_utf8_lines: int = 0
    blanked_lines: int = 0
    first_blanked_line: int | None = None
    data_lines: int | None = None
    text_keys: tuple[str, ...] = ()
    max_line_bytes: int = MAX_LINE_BYTES

    def relation(self, *, store_rejects: bool = False, strict: bool = False) -> str:
        """The DuckDB table function reading this file (JSON: only the ``columns`` listed).

        CSV and TSV are read with the header this module parsed and every column as text:
        no sniffing, so that a few broken lines cannot make DuckDB give up on the dialect.
        A malformed line is skipped (and stored, with ``store_rejects``), or with ``strict``
        an error naming it.
        """
        path = sql_string(str(self.path))
        compression = "'gzip'" if self.gzipped else "'none'"
        if self.log_format == "parquet":
            return f"read_parquet({path})"
        columns = ", ".join(
            f"{sql_string(name)}: '{'JSON' if name in self.text_keys else 'VARCHAR'}'"
            for name in self.columns
        )
        if self.log_format == "jsonl":
            return (
                f"read_json({path}, format='newline_delimited', records='true', "
                f"compression={compression}, columns={{{columns}}}, "
                f"maximum_object_size={self.max_line_bytes})"
            )
        return (
            f"read_csv({path}, {self._dialect()}, compression={compression}, "
            f"auto_detect=false, columns={{{columns}}}, ignore_errors={str(not strict).lower()}, "
            f"store_rejects={str(store_rejects).lower()})"
        )

    def _dialect(self) -> str:
        delimiter = sql_string(self.delimiter or ",")
        start = (
            f"skip={self.skip}, header=true, delim={delimiter}, max_line_size={self.max_line_bytes}"
        )
        if self.log_format == "tsv":
            # TSV logs are not quoted: a query starting with " must stay as typed.
            return f"{start}, quote='', escape=''"
        return f"{start}, quote='\"', escape='\"'"

    def sniff_relation(self) -> str:
        """The file with DuckDB's type detection on, to learn each column's likely type."""
        path = sql_string(str(self.path))
        compression = "'gzip'" if self.gzipped else "'none'"
        if self.log_format == "parquet":
            return f"read_parquet({path})"
        if self.log_format == "jsonl":
            # Records only: one line that is not an object must be an error (and be skipped
            # by a repaired copy), not turn the whole file into a single column of values.
            return (
                f"read_json({path}, format='newline_delimited', records='true', "
                f"compression={compression}, maximum_object_size={self.max_line_bytes})"
            )
        return f"read_csv({path}, {self._dialect()}, compression={compression}, ignore_errors=true)"


def sql_string(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def resolve_source(
    con: duckdb.DuckDBPyConnection, path: Path, log_format: LogFormat | None
) -> Source:
    """Format, compression and delimiter of ``path``, and its columns as DuckDB sees them."""
    return describe(con, locate(path, log_format))


def locate(path: Path, log_format: LogFormat | None) -> Source:
    """Format, compression and delimiter of ``path``, from its name and first bytes."""
    if not path.is_file():
        raise LogError(f"{path}: no such file")
    gzipped = _is_gzip(path)
    chosen = log_format or _format_from_name(path)
    if chosen == "parquet" and gzipped:
        raise LogError(f"{path}: a gzipped Parquet file; Parquet compresses itself, unzip it")
    delimiter = None
    columns: tuple[str, ...] = ()
    skip = 0
    if chosen != "parquet":
        first, skip = _first_line(path, gzipped)
        if chosen == "tsv":
            delimiter = "\t"
        elif chosen == "csv":
            delimiter = _guess_delimiter(first)
        if delimiter is not None:
            columns = _header(path, first, delimiter, quoted=chosen == "csv")
    return Source(path, path, chosen, gzipped, delimiter, columns, skip=skip)


def _header(path: Path, line: str, delimiter: str, quoted: bool) -> tuple[str, ...]:
    try:
        if quoted:
            names = next(csv.reader([line], delimiter=delimiter))
        else:
            names = next(csv.reader([line], delimiter=delimiter, quoting=csv.QUOTE_NONE))
    except csv.Error as error:
        raise LogError(f"{path}: cannot read the header line ({error})") from None
    if len(names) > MAX_COLUMNS:
        raise LogError(
            f"{path}: the header has {len(names):,} columns, more than the {MAX_COLUMNS:,} a "
            "log may have; a search log needs a few (query, timestamp, session_id, ...)"
        )
    names = [name.strip() or f"column{i}" for i, name in enumerate(names)]
    # DuckDB compares names regardless of case: "Query" and "query" are one name to it.
    # Counted once (a Counter), not once per name: 100,001 names took minutes that way.
    folded = Counter(name.casefold() for name in names)
    duplicates = sorted({name for name in names if folded[name.casefold()] > 1})
    if duplicates:
        raise LogError(f"{path}: duplicate column name(s) in the header: {', '.join(duplicates)}")
    return tuple(names)


def describe(con: duckdb.DuckDBPyConnection, source: Source) -> Source:
    """Fill in the columns (JSON, Parquet) and the sniffed column types of ``source``.

    For CSV and TSV the header is already known; types are only hints there, so a file
    DuckDB's sniffer cannot make sense of is still read, with every column as text.
    """
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {source.sniff_relation()}").fetchall()
    except duckdb.Error as error:
        if source.log_format not in ("csv", "tsv") or is_encoding_error(error):
            raise
        return replace(source, types={})
    types = {str(r[0]): str(r[1]) for r in rows}
    if source.log_format in ("csv", "tsv"):
        return replace(source, types=types)
    return replace(source, columns=tuple(types), types=types)


def _format_from_name(path: Path) -> LogFormat:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    if suffixes and suffixes[-1] in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1]]
    known = ", ".join(sorted(_EXTENSIONS))
    raise LogError(
        f"{path}: cannot tell the format from the file name (known: {known}, optionally "
        "followed by .gz); name the format (csv, tsv, jsonl or parquet)"
    )


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as probe:
        return probe.read(2) == _GZIP_MAGIC


def _open(path: Path, gzipped: bool) -> IO[bytes]:
    # The caller closes the stream; it is a context manager either way.
    return cast(IO[bytes], gzip.open(path, "rb")) if gzipped else path.open("rb")


def _first_line(path: Path, gzipped: bool) -> tuple[str, int]:
    """The first non-blank line (byte-order mark removed) and how many blank lines precede it.

    Lines end at CR LF, LF or a lone CR, as DuckDB counts them, so that a file with old Mac
    line endings has a header line too; only the file's first megabyte is looked at.
    """
    try:
        with _open(path, gzipped) as stream:
            head = stream.read(_HEAD_BYTES)
    except (OSError, EOFError) as error:
        raise LogError(f"{path}: cannot read it ({error})") from None
    _check_utf8(path, head)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    parts = _LINE_BREAK.split(text)
    for index, line in enumerate(parts):
        if line.strip():
            if index == len(parts) - 1 and len(head) == _HEAD_BYTES:  # no end in sight
                raise LogError(
                    f"{path}: line {index + 1} is longer than the limit of {_HEAD_BYTES:,} "
                    "bytes; a log holds one search per line: is this file one?"
                )
            return line, index
    raise LogError(f"{path}: the file is empty")


def long_line(source: Source) -> tuple[int, int] | None:
    """The first line of the original file longer than ``source.max_line_bytes``, as (line
    number, bytes read of it when it passed the limit), or None; one pass in bounded memory.

    DuckDB skips such a line, and past its buffer without a word: a log of one 1 GB line
    read as "no rows". Only called when a read found no rows, to say why.
    """
    limit = source.max_line_bytes
    number, length = 1, 0
    with _open(source.original, _is_gzip(source.original)) as stream:
        while chunk := stream.read(1 << 20):
            pieces = chunk.split(b"\n")
            for piece in pieces[:-1]:
                if length + len(piece) > limit:
                    return number, length + len(piece)
                number, length = number + 1, 0
            length += len(pieces[-1])
            if length > limit:
                return number, length
    return None


# Longest first: the UTF-32 LE mark begins with the UTF-16 LE one.
_WIDE_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _check_utf8(path: Path, head: bytes) -> None:
    """Refuse a UTF-16 or UTF-32 file, saying so and how to convert it.

    Read as UTF-8 it would be a header of NUL-separated letters, and the error would be about
    a missing query column. Told by its byte-order mark, or without one by the NUL bytes
    between the letters of its first line (text logs hold no NUL).
    """
    encoding = next((name for mark, name in _WIDE_MARKS if head.startswith(mark)), None)
    first = head[:200].split(b"\n", 1)[0]
    if encoding is None and first.count(0) * 3 >= len(first) > 0:
        encoding = "UTF-16 or UTF-32 (no byte-order mark)"
    if encoding is not None:
        raise LogError(
            f"{path}: the file is encoded as {encoding}, not UTF-8; convert it to UTF-8 "
            f"first, e.g. with `iconv -f {encoding.split()[0]} -t UTF-8`"
        )


def _guess_delimiter(header: str) -> str:
    counts = {candidate: header.count(candidate) for candidate in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda candidate: counts[candidate])
    return best if counts[best] else _NO_DELIMITER


def is_encoding_error(error: Exception) -> bool:
    """Whether a DuckDB error is about bytes that are not UTF-8."""
    text = str(error).lower()
    return any(sign in text for sign in ("invalid unicode", "invalid utf-8", "not utf-8 encoded"))


def transcode(source: Source, directory: Path, *, line_safe: bool = False) -> Source:
    """A copy of the log with invalid UTF-8 replaced by U+FFFD; lines affected are counted.

    Only called when DuckDB reported a problem, so the common case pays nothing. The copy is
    uncompressed and lives in the ingestion's private temporary directory. With
    ``line_safe`` the copy also holds one record per line: line breaks become LF whatever
    they were (CR LF, LF or a lone CR, mixed), and a malformed line is blanked and counted:
    in CSV a line that leaves a quoted value open, so that it cannot swallow the lines after
    it; in JSON lines a line that is not a JSON object, which DuckDB would otherwise make
    fatal to the whole file. Line numbers stay those of the original.
    """
    # The original's compression, not the source's: ``source`` may be a copy already.
    source = replace(source, gzipped=_is_gzip(source.original))
    if line_safe and source.log_format == "jsonl":
        return _json_lines_copy(source, directory / "lines.log", source.text_keys)
    if line_safe:
        return _line_safe_copy(source, directory / "lines.log")
    target = directory / "repaired.log"
    damaged = 0
    with _open(source.original, source.gzipped) as stream, target.open("wb") as out:
        for line in stream:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                damaged += 1
                line = line.decode("utf-8", errors="replace").encode("utf-8")
            out.write(line)
    return replace(source, path=target, gzipped=False, copy="utf8", invalid_utf8_lines=damaged)


def _line_safe_copy(source: Source, target: Path) -> Source:
    header = source.skip + 1
    quoted = source.log_format == "csv"
    closed = _closed_fields(source.delimiter or ",")
    return _copy_by_line(
        source,
        target,
        blank=lambda n, line: quoted and n > header and '"' in line and not closed(line),
        data=lambda n, line: n > header and bool(line),
    )


def _json_lines_copy(source: Source, target: Path, text_keys: tuple[str, ...]) -> Source:
    return _copy_by_line(
        source,
        target,
        blank=lambda n, line: bool(line.strip()) and not _json_record(line, text_keys),
        data=lambda n, line: bool(line.strip()),
        strip_bom=True,
    )


def _copy_by_line(
    source: Source,
    target: Path,
    *,
    blank: Callable[[int, str], bool],
    data: Callable[[int, str], bool],
    strip_bom: bool = False,
) -> Source:
    """Copy the log one record per line: invalid UTF-8 replaced and counted, lines ``blank``
    picks (by number and text) emptied and counted, lines ``data`` picks counted as rows."""
    damaged = blanked = kept = 0
    first_blanked: int | None = None
    with (
        _open(source.original, source.gzipped) as stream,
        target.open("w", encoding="utf-8", newline="\n") as out,
    ):
        # Universal newlines split at CR LF, LF and lone CR; surrogateescape keeps
        # undecodable bytes apart, to be counted and replaced line by line.
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline=None)
        for number, line in enumerate(text, start=1):
            line = line.removesuffix("\n")
            if strip_bom and number == 1:
                line = line.removeprefix("\ufeff")
            if _has_undecodable(line):
                damaged += 1
                line = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            if blank(number, line):
                blanked += 1
                first_blanked = first_blanked or number
                line = ""
            kept += data(number, line)
            out.write(line + "\n")
    return replace(
        source,
        path=target,
        gzipped=False,
        copy="lines",
        invalid_utf8_lines=damaged,
        blanked_lines=blanked,
        first_blanked_line=first_blanked,
        data_lines=kept,
    )


def _json_record(line: str, text_keys: tuple[str, ...]) -> bool:
    """Whether a line is one JSON object (NaN and Infinity are not JSON, so not either) whose
    ``text_keys`` hold a string, null or nothing."""
    try:
        record = json.loads(line, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return False
    if not isinstance(record, dict):
        return False
    return all(isinstance(record.get(key), str | None) for key in text_keys)


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _closed_fields(delimiter: str) -> Callable[[str], bool]:
    """Whether no field of a line leaves a quote open, however DuckDB's CSV reader reads it.

    A field is quoted (``"..."`` with ``""`` for a quote inside, then anything but a quote
    up to the delimiter), unquoted (not starting with a quote; a quote further in is literal,
    as in ``27" monitor``) or empty. The quoted part is possessive: ``"abc""`` has no closing
    quote, whatever a backtracking match would make of it. DuckDB takes a quote after one
    space for an opening quote and after two for text (not a documented rule, so it may
    change): a line counts as closed only if it is closed with no space, one space and any
    number of spaces allowed before an opening quote. Blanking a line too many costs one
    counted line; one too few could cost the rest of the file.
    """
    d = re.escape(delimiter)
    patterns = []
    for space in ("", "[ ]?", "[ ]*"):
        quoted = f'{space}"(?:[^"]|"")*+"[^{d}"]*'
        unquoted = f'(?!{space}")[^{d}]+'
        field = f"(?:{quoted}|{unquoted}|)"
        patterns.append(re.compile(f"{field}(?:{d}{field})*"))
    return lambda line: all(pattern.fullmatch(line) for pattern in patterns)


def _has_undecodable(line: str) -> bool:
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# --------------------------------------------------------------------------- fields


def field_sql(source: Source, mapping: ColumnMap) -> tuple[dict[str, str], dict[str, str]]:
    """SQL per available field, and field -> column used; missing columns are errors here.

    DuckDB learns a JSON file's keys from its first lines only (about 20,000), so for JSON
    lines every optional field is read by its name whether the sample saw it or not: the
    caller checks afterwards which of those keys occur at all (:func:`check_columns`).
    """
    check_columns(source, mapping, optional=source.log_format != "jsonl")
    available = set(source.columns)
    if source.log_format == "jsonl":
        available |= {mapping.column(name) for name in FIELDS if name != "query"}
    expressions: dict[str, str] = {}
    used: dict[str, str] = {}
    for name in FIELDS:
        column = mapping.column(name)
        if column not in available:
            continue
        expressions[name] = _FIELD_BUILDERS[name](identifier(column), *_types(source, column))
        used[name] = column
    return expressions, used


def check_columns(source: Source, mapping: ColumnMap, *, optional: bool = True) -> None:
    """The query column, and (if ``optional``) the columns mapped explicitly, must exist."""
    missing = [
        f"{name} (column {mapping.column(name)!r})"
        for name in FIELDS
        if (name == "query" or (optional and mapping.explicit(name)))
        and mapping.column(name) not in source.columns
    ]
    if not missing:
        return
    found = ", ".join(repr(c) for c in source.columns) or "none"
    message = f"{source.original}: missing {'; '.join(missing)}. Columns found: {found}."
    raise LogError(message + _delimiter_hint(source))


def _delimiter_hint(source: Source) -> str:
    if source.log_format not in ("csv", "tsv") or len(source.columns) != 1:
        return ""
    (only,) = source.columns
    seen = [d for d in _DELIMITERS if d in only and d != source.delimiter]
    if not seen:
        return ""
    shown = "tab" if seen[0] == "\t" else repr(seen[0])
    other = "tsv" if seen[0] == "\t" else "csv"
    return (
        f" The header holds {shown} characters: the file looks {shown}-separated, not "
        f"{source.log_format.upper()}; read it as {other}."
    )


def _types(source: Source, column: str) -> tuple[str, str]:
    """(type the column is read as, type DuckDB sniffed for it)."""
    hint = (source.types or {}).get(column, "VARCHAR").upper()
    read = hint if source.log_format == "parquet" else "VARCHAR"
    return ("JSON" if column in source.text_keys else read), hint


def is_numeric_type(type_name: str) -> bool:
    """Whether a DuckDB type name (upper case) is a number type."""
    return _is(_NUMERIC, type_name)


def is_temporal_type(type_name: str) -> bool:
    """Whether a DuckDB type name (upper case) is a date or timestamp type."""
    return _is(_TEMPORAL, type_name)


def _is(kind: Sequence[str], type_name: str) -> bool:
    # By prefix, for DECIMAL(18,3) and the TIMESTAMP family; a list or an array of numbers
    # ("INTEGER[]", "INTEGER[3]") is not a number.
    return not type_name.endswith("]") and any(type_name.startswith(p) for p in kind)


def _text(column: str, read: str) -> str:
    return column if read == "VARCHAR" else f"CAST({column} AS VARCHAR)"


def _query_sql(column: str, read: str, hint: str) -> str:
    if read == "JSON":  # a JSON string's text; a number or an object is no query
        return f"CASE WHEN json_type({column}) = 'VARCHAR' THEN {column} ->> '$' END"
    return _text(column, read)


def not_text_sql(source: Source, used: Mapping[str, str]) -> str:
    """SQL true for a line whose query is a JSON value other than a string or null."""
    column = used["query"]
    if column not in source.text_keys:
        return "false"
    return f"coalesce(json_type({identifier(column)}) NOT IN ('VARCHAR', 'NULL'), false)"


def _id_sql(column: str, read: str, hint: str) -> str:
    # Ids are hashed: 8 bytes to sort and compare instead of an arbitrary string.
    text = _text(column, read)
    return f"CASE WHEN {text} IS NULL OR {text} = '' THEN NULL ELSE hash({text}) END"


def _timestamp_sql(column: str, read: str, hint: str) -> str:
    if _is(_TEMPORAL, read):
        return f"epoch({column})"
    if _is(_NUMERIC, read):
        return f"CAST({column} AS DOUBLE)"
    text = _text(column, read)
    number = f"TRY_CAST({text} AS DOUBLE)"
    instant = f"epoch(TRY_CAST({text} AS TIMESTAMPTZ))"
    if _is(_NUMERIC, hint):
        return number
    if _is(_TEMPORAL, hint):
        return instant
    return f"coalesce({number}, {instant})"


def _count_sql(column: str, read: str, hint: str) -> str:
    if _is(_NUMERIC, read):
        return f"CAST({column} AS DOUBLE)"
    return f"TRY_CAST({_text(column, read)} AS DOUBLE)"


def _clicked_sql(column: str, read: str, hint: str) -> str:
    """True for a click: a true flag, a positive count or position, or any other non-empty text.

    Text that is not a number counts as a click unless it is a "no" word, so a column of
    clicked URLs (empty when nothing was clicked) works as is. Any other type (a list, a
    struct, a date) is read as its text.
    """
    if read == "BOOLEAN":
        return f"coalesce({column}, false)"
    if _is(_NUMERIC, read):
        return f"coalesce({column} > 0, false)"
    text = _text(column, read)
    number = f"TRY_CAST({text} AS DOUBLE)"
    if _is(_NUMERIC, hint):
        return f"coalesce({number} > 0, false)"
    return (
        f"CASE WHEN {column} IS NULL THEN false WHEN {number} IS NOT NULL THEN {number} > 0 "
        f"ELSE lower(trim({text})) NOT IN {_FALSE_WORDS} END"
    )


_FIELD_BUILDERS = {
    "query": _query_sql,
    "timestamp": _timestamp_sql,
    "session_id": _id_sql,
    "user_id": _id_sql,
    "result_count": _count_sql,
    "clicked": _clicked_sql,
}
