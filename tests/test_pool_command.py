"""``manage.py pool``: a file-level command, driven as a user drives it.

stdout holds the pool and nothing else (JSON lines exactly as DESIGN's contract, or a TREC
run); the statistics and the budget go to stderr; a broken run file is one line naming the
file and the line, and exit status 1.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from formats.trec import read_run
from pooling.pooling import depth_pool

REPO = Path(__file__).resolve().parents[1]

RUN_A = [
    "q1 Q0 d1 1 3.0 A",
    "q1 Q0 d2 2 2.0 A",
    "q1 Q0 d3 3 1.0 A",
    "q2 Q0 d5 1 0.9 A",
]
RUN_B = [
    "q1 Q0 d3 1 9.5 B",
    "q1 Q0 d1 2 9.5 B",  # tied with d3: trec_eval puts d3 first (docid descending)
    "q1 Q0 d9 3 1.0 B",
]


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="assay.settings.test")
    return subprocess.run(
        [sys.executable, "manage.py", "pool", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_writes_json_lines_to_stdout_and_statistics_to_stderr(tmp_path: Path) -> None:
    a, b = write(tmp_path / "a.run", RUN_A), write(tmp_path / "b.run", RUN_B)
    done = manage("--run", a, "--run", b, "--depth", "2", "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    objects = [json.loads(line) for line in lines]
    assert objects[0] == {"qid": "q1", "docid": "d1", "runs": {a: 1, b: 2}}
    for line, obj in zip(lines, objects, strict=True):
        assert list(obj) == ["qid", "docid", "runs"]
        assert all(isinstance(rank, int) for rank in obj["runs"].values())
        assert line == json.dumps(obj)  # the exact shape: json.dumps, one object a line
    expected = depth_pool({a: read_run(a), b: read_run(b)}, 2)
    assert objects == [{"qid": e.qid, "docid": e.docid, "runs": dict(e.runs)} for e in expected]
    # q1: d1 (A1 B2), d3 (B1), d2 (A2); q2: d5 (A1).
    assert "pool: depth 2, 2 runs, 2 queries, 4 query-document pairs" in done.stderr
    assert "judging budget: 4 judgments + 1 double-judged (20%) = 5 x 30 s" in done.stderr
    assert "#1 & #2: 1 shared, Jaccard 0.250" in done.stderr  # q1/d1 of 4 pairs
    assert "pool:" not in done.stdout


def test_it_writes_a_trec_run_of_the_pool_by_default(tmp_path: Path) -> None:
    a, b = write(tmp_path / "a.run", RUN_A), write(tmp_path / "b.run", RUN_B)
    done = manage("--run", a, "--run", b, "--depth", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "q1 Q0 d1 1 3 pool@2",
        "q1 Q0 d3 2 2 pool@2",
        "q1 Q0 d2 3 1 pool@2",
        "q2 Q0 d5 1 1 pool@2",
    ]
    # Read back as a run, it lists the pairs in the pool's order.
    pooled = read_run(write(tmp_path / "pool.run", done.stdout.splitlines()))
    assert [row.docid for row in pooled["q1"]] == ["d1", "d3", "d2"]


def test_it_reports_a_broken_line_with_file_and_line_and_exits_1(tmp_path: Path) -> None:
    a = write(tmp_path / "a.run", RUN_A)
    bad = write(tmp_path / "bad.run", [*RUN_B[:2], "q1 Q0 d9 3 1.0"])
    done = manage("--run", a, "--run", bad, "--depth", "2", "--format", "jsonl")
    assert done.returncode == 1
    assert done.stdout == ""
    (message,) = done.stderr.strip().splitlines()
    assert f"{bad}:3: expected 6 columns" in message


def test_it_reports_a_missing_file_in_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.run")
    with pytest.raises(CommandError, match=r"No such file or directory: .*missing\.run"):
        call_command("pool", "--run", missing, "--depth", "10", stdout=io.StringIO())


def test_it_budgets_with_the_given_share_and_seconds(tmp_path: Path) -> None:
    a = write(tmp_path / "a.run", RUN_A)
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "pool",
        "--run",
        a,
        "--depth",
        "3",
        "--double-share",
        "0.5",
        "--seconds",
        "90",
        stdout=out,
        stderr=err,
    )
    assert len(out.getvalue().splitlines()) == 4
    assert "4 judgments + 2 double-judged (50%) = 6 x 90 s = 0.1 person-hours" in err.getvalue()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--depth", "0", "--depth: must be from 1 to"),
        ("--double-share", "2", "--double-share: must be from 0 to 1, not 2"),
    ],
)
def test_it_refuses_impossible_options(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    a = write(tmp_path / "a.run", RUN_A)
    args = ["--run", a, "--depth", "3", option, value]
    with pytest.raises(CommandError, match=message):
        call_command("pool", *args, stdout=io.StringIO(), stderr=io.StringIO())
