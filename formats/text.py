"""What every file format of the project shares: opening a file, and reporting a problem.

Each reader accepts the gzip-compressed file too, detected by its magic bytes rather than its
extension, because downloaded files are often renamed. Every problem in a file is reported as
a :class:`FormatError` naming the file and the 1-based line, so that a person can open the
file at the right place.

Pure core: no Django import.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO, cast

__all__ = [
    "FormatError",
    "OnProgress",
    "ReadProgress",
    "check_id_length",
    "check_no_nul",
    "check_unique",
    "check_writable_id",
    "is_gzip",
    "lines",
    "open_text",
    "parse_int",
]

GZIP_MAGIC = b"\x1f\x8b"
# Python's int() also accepts "1_000" and surrounding blanks; the formats do not.
INT_RE = re.compile(r"[+-]?[0-9]+")
WHITESPACE_RE = re.compile(r"\s")


class FormatError(ValueError):
    """A file does not follow its format.

    ``line`` is 1-based, or 0 when the problem is not about one line (for example an
    empty file). ``str(error)`` is ``"path:line: reason"`` (``"path: reason"`` when line is 0),
    the form editors and CI logs turn into links.
    """

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.line:
            return f"{self.path}:{self.line}: {self.reason}"
        return f"{self.path}: {self.reason}"

    def __reduce__(self) -> tuple[type[FormatError], tuple[str, int, str]]:
        # The default pickling replays ``args`` (the message) into __init__, which takes
        # three arguments; errors must survive being sent back from worker processes.
        return (type(self), (self.path, self.line, self.reason))


# --------------------------------------------------------------------------- opening


class _Utf8Lines(io.TextIOBase):
    """Decodes a binary stream one physical line at a time.

    A stock TextIOWrapper decodes in chunks, so a UnicodeDecodeError cannot say which line
    is broken; decoding per line can, at no cost in memory. Lines are split on ``\\n`` only
    and keep their terminator, like a file opened with ``newline=""``.
    """

    def __init__(self, raw: IO[bytes] | gzip.GzipFile, path: str, stored: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self._stored = stored  # the file as stored (compressed when gzip), for progress
        self._path = path
        self._line = 0
        self._pending = ""

    def readable(self) -> bool:
        return True

    # typeshed's own TextIOBase.readline needs the same ignore: its base says bytes.
    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        if size < 0 and not self._pending:
            return self._decode_next()  # the path iteration takes, line after line
        while "\n" not in self._pending and (size < 0 or len(self._pending) < size):
            decoded = self._decode_next()
            if not decoded:
                break
            self._pending += decoded
        end = self._pending.find("\n") + 1 or len(self._pending)
        if size >= 0:
            end = min(end, size)
        text, self._pending = self._pending[:end], self._pending[end:]
        return text

    def read(self, size: int | None = -1, /) -> str:
        if size is None or size < 0:
            return "".join(iter(self.readline, ""))
        parts: list[str] = []
        wanted = size
        while wanted > 0 and (piece := self.readline(wanted)):
            parts.append(piece)
            wanted -= len(piece)
        return "".join(parts)

    def close(self) -> None:
        self._raw.close()
        self._stored.close()  # a GzipFile given a file object leaves it open
        super().close()

    def position(self) -> ReadProgress:
        """How far into the stored file reading has come (gzip reads ahead a little)."""
        size = os.fstat(self._stored.fileno()).st_size
        return ReadProgress(line=self._line, done=min(self._stored.tell(), size), total=size)

    def _decode_next(self) -> str:
        try:
            data = self._raw.readline()
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FormatError(self._path, self._line + 1, f"corrupt gzip data ({exc})") from exc
        if not data:
            return ""
        self._line += 1
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"invalid UTF-8 (byte {exc.start + 1} of the line)"
            raise FormatError(self._path, self._line, reason) from exc


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as probe:
        return probe.read(2) == GZIP_MAGIC


def open_text(path: str | Path) -> TextIO:
    """Open ``path`` as UTF-8 text, gunzipping it when it starts with the gzip magic bytes.

    Invalid UTF-8 raises :class:`FormatError` with the number of the offending line when
    that line is read. The caller closes the returned stream (it is a context manager).
    """
    return cast(TextIO, _open(path))


def _open(path: str | Path) -> _Utf8Lines:
    # The returned reader owns and closes the binary streams, hence no ``with`` here.
    stored = open(path, "rb")  # noqa: SIM115
    try:
        gzipped = stored.read(2) == GZIP_MAGIC
        stored.seek(0)
        raw: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=stored) if gzipped else stored
    except BaseException:
        stored.close()
        raise
    return _Utf8Lines(raw, str(path), stored)


@dataclass(frozen=True, slots=True)
class ReadProgress:
    """How far a reader has come: lines read, and bytes of the file as stored (compressed
    bytes for a gzip file, so that ``done / total`` is the share read either way)."""

    line: int
    done: int
    total: int

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


OnProgress = Callable[[ReadProgress], None]
PROGRESS_LINES = 1000  # lines between two progress calls: cheap, and often enough for a bar


def lines(path: str | Path, *, on_progress: OnProgress | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for non-blank lines, without the line terminator.

    ``on_progress`` is called every PROGRESS_LINES lines and once at the end of the file;
    whatever it raises stops the reading (a cancelled job).
    """
    with _open(path) as fh:
        for number, line in enumerate(fh, start=1):
            if number == 1:
                # Spreadsheet tools prepend a byte-order mark; it would otherwise end up
                # glued to the first id.
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if on_progress is not None and number % PROGRESS_LINES == 0:
                on_progress(fh.position())
            if line.strip():
                yield number, line
        if on_progress is not None:
            on_progress(fh.position())


# --------------------------------------------------------------------------- fields


def parse_int(path: str | Path, line: int, field: str, token: str) -> int:
    if not INT_RE.fullmatch(token):
        raise FormatError(path, line, f"{field} {token!r} is not an integer")
    return int(token)


def check_writable_id(
    path: str | Path, line: int, kind: str, value: str, max_length: int | None = None
) -> None:
    """Reject ids that TREC run and qrels files (whitespace-separated) cannot carry."""
    if not value:
        raise FormatError(path, line, f"empty {kind} id")
    if WHITESPACE_RE.search(value):
        reason = f"{kind} id {value!r} contains whitespace; TREC run and qrels files cannot hold it"
        raise FormatError(path, line, reason)
    check_id_length(path, line, kind, value, max_length)


def check_id_length(
    path: str | Path, line: int, kind: str, value: str, max_length: int | None
) -> None:
    # The caller's storage bounds ids (a database column); the formats themselves do not.
    if max_length is not None and len(value) > max_length:
        shown = f"{value[:40]!r}..."
        reason = f"{kind} id {shown} is {len(value)} characters long (at most {max_length})"
        raise FormatError(path, line, reason)


def check_no_nul(path: str | Path, line: int, value: str, where: str = "the line") -> None:
    # PostgreSQL refuses a NUL in text, and C tools (trec_eval) would cut the id there.
    if "\x00" in value:
        reason = f"{where} holds a NUL character (U+0000), which a database cannot store"
        raise FormatError(path, line, reason)


def check_unique(path: str | Path, line: int, seen: dict[str, int], kind: str, key: str) -> None:
    first = seen.setdefault(key, line)
    if first != line:
        raise FormatError(path, line, f"{kind} {key} appears twice (first at line {first})")
