"""The one log reader (DuckDB) as users meet it: memory, spilling, cancelling, reporting.

``tests/test_sampling_cases.py`` holds the reference tests (the reader against a plain-Python
reading of the documented definitions on crafted and generated logs).
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from sampling.core import EngineSettings, StrataDefinition, ingest_log
from sampling.text import Normalisation, normalise_many, normalise_query

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


def test_a_regular_csv_gives_its_statistics(tmp_path: Path) -> None:
    stats = ingest_log(write(tmp_path))
    assert list(stats.query) == ["blue hat", "red shoe", "red shoes"]
    assert list(stats.frequency) == [1, 1, 2]
    assert list(stats.zero_result_rate) == [0.0, 1.0, 0.0]
    # "red shoes" is followed within the window by "red shoe" (a shared term) once of twice
    assert list(stats.reformulation_rate) == [0.0, 0.0, 0.5]


def test_a_log_read_in_little_memory_spills_and_gives_the_same_statistics(tmp_path: Path) -> None:
    """Past its memory limit DuckDB spills into the temporary directory, never to an error
    or to other figures."""
    rng = random.Random(3)
    rows = ["query,timestamp,session_id,user_id,result_count,clicked"]
    for i in range(60_000):
        terms = rng.choices(["red", "blue", "shoe", "caf\u00e9", f"x{rng.randrange(9000)}"], k=3)
        rows.append(
            f"{' '.join(terms)},2025-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z,"
            f"s{i // 3},u{rng.randrange(500)},{rng.randrange(5)},{rng.randrange(2)}"
        )
    path = write(tmp_path, "\n".join(rows) + "\n")
    spill = tmp_path / "spill"
    spill.mkdir()
    small = ingest_log(
        path, engine=EngineSettings(memory_limit="40MB", threads=1, temp_directory=str(spill))
    )
    large = ingest_log(path, engine=EngineSettings(memory_limit="1GB"))
    for name in ("query", "frequency", "sessions", "users", "pii"):
        assert list(getattr(small, name)) == list(getattr(large, name)), name
    for name in ("zero_result_rate", "reformulation_rate", "abandonment_rate"):
        np.testing.assert_array_equal(getattr(small, name), getattr(large, name))
    assert not any(spill.iterdir())  # the private working directory is gone afterwards


def test_an_irregular_line_is_skipped_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path, LOG + "green,2025-01-01T00:12:00Z,s3,u3,1,1,extra\n")
    stats = ingest_log(path)
    assert stats.report is not None
    assert stats.report.malformed_rows == 1
    assert "the first at line 6" in " ".join(stats.report.warnings)


def test_json_lines_give_the_statistics_of_the_same_csv(tmp_path: Path) -> None:
    lines = LOG.splitlines()
    header = lines[0].split(",")
    records = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    text = "".join(json.dumps(record) + "\n" for record in records)
    from_json = ingest_log(write(tmp_path, text, "log.jsonl"))
    from_csv = ingest_log(write(tmp_path))
    for name in ("query", "frequency", "sessions", "users"):
        assert list(getattr(from_json, name)) == list(getattr(from_csv, name))
    for name in ("zero_result_rate", "reformulation_rate", "abandonment_rate"):
        np.testing.assert_array_equal(getattr(from_json, name), getattr(from_csv, name))


def test_a_cancelled_read_stops_and_raises(tmp_path: Path) -> None:
    class Cancelled(Exception):
        pass

    def cancel(fraction: float, message: str) -> None:
        if fraction > 0.1:
            raise Cancelled

    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(Cancelled):
        ingest_log(
            write(tmp_path), engine=EngineSettings(temp_directory=str(spill)), on_progress=cancel
        )
    assert not any(spill.iterdir())


def test_sample_queries_reports_what_it_read(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    call_command(
        "sample_queries", "--log", str(write(tmp_path)), "--quota", "tail=1", "--seed", "7"
    )
    err = capsys.readouterr().err
    assert "4 rows" in err and "3 distinct queries" in err
    assert "reader" not in err


def test_a_mask_definition_keeps_masked_queries(tmp_path: Path) -> None:
    text = LOG + "mail bob@example.com,2025-01-01T00:13:00Z,s4,u4,1,1\n"
    stats = ingest_log(write(tmp_path, text), definition=StrataDefinition(pii="mask"))
    assert stats.report is not None
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
    # Two logs read at the same time in one process (threads of a worker) must not share
    # any state.
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
