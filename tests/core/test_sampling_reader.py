"""The compiled log reader as users meet it: built, chosen, given way, cancelled, reported.

``tests/test_sampling_native.py`` holds the differential tests (the compiled reader against
the DuckDB path on crafted and generated logs); these are about the choice between them.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from annotation import sampling_native
from annotation.sampling import EngineSettings, StrataDefinition, ingest_log
from annotation.sampling_text import Normalisation, normalise_many, normalise_query

LOG = (
    "query,timestamp,session_id,user_id,result_count,clicked\n"
    "red shoes,2025-01-01T00:00:00Z,s1,u1,12,0\n"
    "red shoe,2025-01-01T00:00:20Z,s1,u1,0,0\n"
    "blue hat,2025-01-01T00:10:00Z,s2,u2,3,1\n"
    "Red  Shoes,2025-01-01T00:11:00Z,s2,u2,7,1\n"
)


def write(tmp_path: Path, text: str = LOG, name: str = "log.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_compiled_reader_is_built() -> None:
    # `make install` compiles it; without it every log would silently take the slow path.
    assert sampling_native.AVAILABLE, "annotation._logscan is not built: run `make install`"


def test_a_regular_csv_is_read_by_the_compiled_reader(tmp_path: Path) -> None:
    stats = ingest_log(write(tmp_path))
    assert stats.report is not None
    assert (stats.report.reader, stats.report.reader_note) == ("native", "")
    assert list(stats.query) == ["blue hat", "red shoe", "red shoes"]
    assert list(stats.frequency) == [1, 1, 2]
    assert list(stats.zero_result_rate) == [0.0, 1.0, 0.0]
    # "red shoes" is followed within the window by "red shoe" (a shared term) once of twice
    assert list(stats.reformulation_rate) == [0.0, 0.0, 0.5]


def test_past_its_memory_limit_the_log_goes_to_duckdb_with_the_same_result(tmp_path: Path) -> None:
    path = write(tmp_path)
    small = ingest_log(path, engine=EngineSettings(native_memory_limit="64kB"))
    native = ingest_log(path)
    assert small.report is not None and small.report.reader == "duckdb"
    assert "memory limit" in small.report.reader_note
    for name in ("query", "frequency", "sessions", "users", "pii"):
        assert list(getattr(small, name)) == list(getattr(native, name))
    for name in ("zero_result_rate", "reformulation_rate", "abandonment_rate"):
        np.testing.assert_array_equal(getattr(small, name), getattr(native, name))


def test_a_limit_reached_after_reading_also_gives_way_to_duckdb(tmp_path: Path) -> None:
    """Memory can run out after the file is read (the normalised texts' table, the
    numbering): the log then goes to DuckDB as well, never to an error."""
    rng = random.Random(3)
    rows = ["query,timestamp,session_id,user_id,result_count,clicked"]
    for i in range(20_000):
        terms = rng.choices(["red", "blue", "shoe", "caf\u00e9", f"x{rng.randrange(9000)}"], k=3)
        rows.append(
            f"{' '.join(terms)},2025-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z,"
            f"s{i // 3},u{rng.randrange(500)},{rng.randrange(5)},{rng.randrange(2)}"
        )
    path = write(tmp_path, "\n".join(rows) + "\n")
    expected = ingest_log(path, engine=EngineSettings(reader="duckdb"))

    def reader_at(kib: int) -> tuple[str, str]:
        stats = ingest_log(path, engine=EngineSettings(native_memory_limit=f"{kib}KiB"))
        assert stats.report is not None
        for name in ("query", "frequency", "sessions", "users"):
            assert list(getattr(stats, name)) == list(getattr(expected, name)), (kib, name)
        np.testing.assert_array_equal(stats.reformulation_rate, expected.reformulation_rate)
        return stats.report.reader, stats.report.reader_note

    # the smallest limit the compiled reader works within, to 64 KiB
    low, high = 1024, 256 * 1024
    assert reader_at(high)[0] == "native"
    while high - low > 64:
        middle = (low + high) // 2
        low, high = (low, middle) if reader_at(middle)[0] == "native" else (middle, high)
    notes = [reader_at(kib)[1] for kib in range(high - 64, high - 4096, -512)]
    after_reading = [note for note in notes if "memory limit" in note and "line " not in note]
    assert after_reading, notes


def test_an_irregular_line_names_where_the_compiled_reader_gave_way(tmp_path: Path) -> None:
    path = write(tmp_path, LOG + "green,2025-01-01T00:12:00Z,s3,u3,1,1,extra\n")
    stats = ingest_log(path)
    assert stats.report is not None
    assert stats.report.reader == "duckdb"
    assert stats.report.reader_note == "line 6: more fields than the header"
    assert stats.report.malformed_rows == 1


@pytest.mark.parametrize(
    ("name", "engine", "note"),
    [
        ("log.jsonl", EngineSettings(), "jsonl is read by DuckDB"),
        ("log.csv", EngineSettings(reader="duckdb"), "the DuckDB reader was asked for"),
    ],
)
def test_other_logs_say_why_duckdb_read_them(
    tmp_path: Path, name: str, engine: EngineSettings, note: str
) -> None:
    text = LOG if name.endswith(".csv") else '{"query": "red shoes"}\n'
    stats = ingest_log(write(tmp_path, text, name), engine=engine)
    assert stats.report is not None
    assert (stats.report.reader, stats.report.reader_note) == ("duckdb", note)


def test_a_cancelled_read_stops_the_reader_and_raises() -> None:
    stopped = threading.Event()

    class Cancelled(Exception):
        pass

    def poll() -> None:
        raise Cancelled

    with pytest.raises(Cancelled):
        # The work waits for its cancel, as the reader stops at the next line once told.
        sampling_native._in_thread(lambda: stopped.wait(10), poll, stopped.set)
    assert stopped.is_set()


def test_sample_queries_names_the_reader(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    call_command(
        "sample_queries", "--log", str(write(tmp_path)), "--quota", "tail=1", "--seed", "7"
    )
    assert "read by the compiled CSV/TSV reader" in capsys.readouterr().err


def test_a_mask_definition_is_kept_by_the_compiled_reader(tmp_path: Path) -> None:
    text = LOG + "mail bob@example.com,2025-01-01T00:13:00Z,s4,u4,1,1\n"
    stats = ingest_log(write(tmp_path, text), definition=StrataDefinition(pii="mask"))
    assert stats.report is not None and stats.report.reader == "native"
    assert "mail [email]" in list(stats.query)
    assert stats.report.pii[0].kind == "email"


@pytest.mark.parametrize(
    "rule",
    [
        Normalisation(),
        Normalisation(nfkc=False),
        Normalisation(casefold=False),
        Normalisation(collapse_whitespace=False),
        Normalisation(False, False, False),
    ],
)
def test_normalising_many_texts_at_once_equals_one_by_one(rule: Normalisation) -> None:
    # Pieces that compose, reorder or fold across a boundary if anything does: combining
    # marks, Hangul jamo, compatibility forms, sigma, dotted I, Unicode spaces.
    pieces = [
        "\u0301", "e", "\u1100", "\u1161", "\u11a8", "가", "ﬁ", "Σ", "ς", "ß", "İ", " ",
        "\u3000", "\t", "ｆ", "①", "\u0338", "=", "a", "\u0327", "Å", "\u212b", "\u1e9e",
        "ǅ", "\u0345", "ΐ", "\u00a0",
    ]  # fmt: skip
    rng = random.Random(3)
    for _ in range(500):
        texts = [
            "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
            for _ in range(rng.randint(1, 8))
        ]
        assert normalise_many(texts, rule) == [normalise_query(text, rule) for text in texts]
    assert normalise_many([], rule) == []
    assert normalise_many(["a\x00B"], rule) == [normalise_query("a\x00B", rule)]


def test_two_ingestions_at_once_each_get_their_own_answer(tmp_path: Path) -> None:
    # The reader releases the GIL: two logs read at the same time in one process (threads of
    # a worker) must not share any state.
    logs = []
    for n in (1, 2):
        lines = [LOG.splitlines()[0]]
        lines += [f"q{n} {i % 97} x,{i},s{i // 3},u{i % 11},{i % 5},{i % 2}" for i in range(20_000)]
        logs.append(write(tmp_path, "\n".join(lines) + "\n", f"log{n}.csv"))
    alone = [ingest_log(path) for path in logs]
    results: dict[int, object] = {}

    def run(index: int) -> None:
        results[index] = ingest_log(logs[index])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, expected in enumerate(alone):
        got = results[index]
        assert isinstance(got, type(expected))
        assert list(got.query) == list(expected.query)
        np.testing.assert_array_equal(got.reformulation_rate, expected.reformulation_rate)
