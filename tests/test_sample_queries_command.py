"""``manage.py sample_queries``: the file-level command and its JSON-lines contract."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sampling.core import StrataDefinition
from sampling.management.commands.sample_queries import Command

HEADER = "query,timestamp,session_id,user_id,result_count,clicked"


def write_log(path: Path) -> Path:
    """300 searches: 2 queries asked 40 times (the head: 80 <= a third), 20 asked 5 times
    (the torso: 180 <= two thirds), 120 asked once (the tail); 3 of the medium ones return
    nothing (known failures); two queries carry personal data."""
    lines = [HEADER]
    t = 0
    for i in range(2):
        for _ in range(40):
            t += 1000
            lines.append(f"popular {i},{t},s{t},u{t % 7},20,1")
    for i in range(20):
        for _ in range(5):
            t += 1000
            lines.append(f"medium query {i},{t},s{t},u{t % 7},{0 if i < 3 else 5},{int(i >= 3)}")
    for i in range(120):
        t += 1000
        lines.append(f"rare query {i},{t},s{t},u{t % 7},3,{i % 2}")
    lines.append(f"email me at someone@example.com,{t + 1},s0,u0,1,0")
    lines.append(f"call +44 20 7946 0958,{t + 2},s0,u0,1,0")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("sample_queries", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "log.csv")


def test_it_needs_no_database_and_no_system_checks() -> None:
    assert Command.requires_system_checks == []


def test_it_prints_json_lines_in_the_public_shape(log: Path) -> None:
    out, _ = run("--log", str(log), "--quota", "head=2,torso=5,tail=10,failures=2", "--seed", "7")
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 2 + 5 + 10 + 2
    for record in records:
        assert {"query", "stratum", "frequency", "inclusion_probability", "signals"} <= set(record)
        assert record["stratum"] in ("head", "torso", "tail", "failures")
        assert isinstance(record["frequency"], int) and record["frequency"] >= 1
        assert 0 < record["inclusion_probability"] <= 1
        assert record["weight"] == pytest.approx(1 / record["inclusion_probability"])
        assert set(record["signals"]) == {
            "zero_result_rate",
            "reformulation_rate",
            "abandonment_rate",
        }
        assert isinstance(record["sessions"], int) and isinstance(record["users"], int)
    by_stratum = {r["stratum"] for r in records}
    assert by_stratum == {"head", "torso", "tail", "failures"}
    failures = [r for r in records if r["stratum"] == "failures"]
    assert all(r["signals"]["zero_result_rate"] == 1.0 for r in failures)


def test_it_is_reproducible_with_a_seed(log: Path) -> None:
    first, _ = run("--log", str(log), "--seed", "11", "--quota", "tail=10")
    again, _ = run("--log", str(log), "--seed", "11", "--quota", "tail=10")
    other, _ = run("--log", str(log), "--seed", "12", "--quota", "tail=10")
    assert first == again and first != other


def test_it_reports_strata_privacy_and_draws_on_stderr(log: Path) -> None:
    out, err = run("--log", str(log), "--seed", "1")
    assert "personal data (excluded): email 1 queries / 1 events, phone 1 queries / 1 events" in err
    assert "stratum" in err and "failures" in err and "short by" in err
    assert "seed 1" in err
    assert "someone@example.com" not in out + err
    masked, err = run("--log", str(log), "--seed", "1", "--mask-pii", "--quota", "tail=200")
    queries = {json.loads(line)["query"] for line in masked.splitlines()}
    assert {"email me at [email]", "call [phone]"} <= queries
    assert "personal data (masked)" in err


def test_it_prints_a_table_on_request(log: Path) -> None:
    out, _ = run("--log", str(log), "--seed", "1", "--format", "table", "--quota", "head=2")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["stratum", "freq", "p"]
    assert len(lines) == 3 and lines[1].startswith("head")


def test_it_takes_column_mapping_format_cuts_and_window(tmp_path: Path, log: Path) -> None:
    renamed = tmp_path / "renamed.txt"
    text = log.read_text("utf-8").replace(HEADER, "q;ts;sid;uid;hits;click").replace(",", ";")
    renamed.write_text(text, encoding="utf-8")
    mapping = "query=q,timestamp=ts,session_id=sid,user_id=uid,result_count=hits,clicked=click"
    args = ("--seed", "3", "--cuts", "50,80", "--reformulation-window", "60")
    out, err = run("--log", str(renamed), "--format-in", "csv", "--column", mapping, *args)
    expected, _ = run("--log", str(log), *args)
    assert out == expected
    assert "head <= 50.0% of traffic, head+torso <= 80.0%" in err


def test_it_samples_proportionally_to_frequency_on_request(log: Path) -> None:
    out, err = run("--log", str(log), "--seed", "5", "--weighted", "--quota", "tail=10")
    probabilities = {json.loads(line)["inclusion_probability"] for line in out.splitlines()}
    assert len(out.splitlines()) == 10 and probabilities == {10 / 120}  # equal frequencies
    assert "frequency-weighted" in err


def test_it_excludes_queries_listed_in_a_file(tmp_path: Path, log: Path) -> None:
    already = tmp_path / "already.txt"
    already.write_text("".join(f"Rare  Query {i}\n" for i in range(115)), encoding="utf-8")
    out, err = run(
        "--log", str(log), "--seed", "1", "--quota", "tail=10", "--exclude", str(already)
    )
    queries = sorted(json.loads(line)["query"] for line in out.splitlines())
    assert queries == sorted(f"rare query {i}" for i in range(115, 120))
    assert "115 already in the project" in err


def test_it_reuses_a_stored_strata_definition(tmp_path: Path, log: Path) -> None:
    definition = tmp_path / "definition.json"
    stored = StrataDefinition(head_share=0.5, torso_share=0.8, pii="mask")
    definition.write_text(stored.to_json(), encoding="utf-8")
    out, _ = run("--log", str(log), "--seed", "2", "--definition", str(definition))
    expected, _ = run("--log", str(log), "--seed", "2", "--cuts", "0.5,0.8", "--mask-pii")
    assert out == expected
    with pytest.raises(CommandError, match="--definition fixes the strata"):
        run("--log", str(log), "--definition", str(definition), "--cuts", "0.3,0.6")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--quota", "body=3"), "unknown stratum"),
        (("--cuts", "0.8,0.5"), "cut points must satisfy"),
        (("--cuts", "half"), "cuts must be two numbers"),
        (("--cuts", "0.5,1.5"), "cuts mix fractions and percentages"),
        (("--failures", "zero_result_rate=high"), "needs a number"),
        (("--failures", "speed=1"), "unknown failure setting"),
        (("--column", "query"), "not field=column"),
        (("--column", "query=missing"), "Columns found: 'query', 'timestamp'"),
        (("--seed", "-1"), "--seed: must be from 0 to 9,223,372,036,854,775,807, not -1"),
        (("--seed", str(2**63)), "--seed: must be from 0 to"),
    ],
)
def test_it_turns_bad_options_into_one_line_errors(
    log: Path, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        run("--log", str(log), *args)


def test_it_explains_an_unreadable_log(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        run("--log", str(tmp_path / "missing.csv"))
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CommandError, match="empty"):
        run("--log", str(empty))
