"""`manage.py evaluate`: the DESIGN contract, on small files, without a database."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

REPO = Path(__file__).resolve().parents[1]

QRELS = """\
q1 0 d1 2
q1 0 d2 0
q1 0 d3 1
q2 0 d9 0
q3 0 d1 3
"""
RUN_A = """\
q1 Q0 d1 1 3.0 a
q1 Q0 d2 2 2.0 a
q1 Q0 d3 3 1.0 a
q2 Q0 d1 1 1.0 a
q9 Q0 d1 1 1.0 a
"""
RUN_B = """\
q1 Q0 d3 1 3.0 b
q1 Q0 d1 2 2.0 b
q3 Q0 d1 1 1.0 b
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, text in (("qrels", QRELS), ("a", RUN_A), ("b", RUN_B)):
        path = tmp_path / f"{name}.txt"
        path.write_text(text, encoding="ascii")
        paths[name] = str(path)
    return paths


def evaluate(*args: str) -> str:
    out = io.StringIO()
    call_command("evaluate", *args, stdout=out)
    return out.getvalue()


def test_it_prints_the_json_shape_of_the_design(files):
    text = evaluate(
        "--qrels", files["qrels"], "--run", files["a"], "--run", files["b"],
        "--metrics", "ndcg@10,recall@100,mrr,map,p@10,hit@5", "--format", "json",
    )  # fmt: skip
    document = json.loads(text)
    assert list(document) == ["contract", "runs"]
    contract = document["contract"]
    assert {"gain": "exponential", "rel_threshold": 1, "empty": "skip"}.items() <= contract.items()
    assert contract["cutoffs"] == [5, 10, 100]
    assert list(document["runs"]) == [files["a"], files["b"]]  # the paths as given
    run_a = document["runs"][files["a"]]
    assert list(run_a) == ["mean", "per_query", "queries"]  # the contract's shape, always
    assert list(run_a["mean"]) == ["ndcg@10", "recall@100", "mrr", "map", "p@10", "hit@5"]
    # q1 scored, q2 has no relevant document (skipped), q3 is missing from run a (0).
    assert run_a["queries"] == {"scored": 2, "skipped_no_relevant": 1, "missing_from_run": 1}
    assert run_a["mean"]["mrr"] == 0.5
    assert document["runs"][files["b"]]["mean"]["mrr"] == 1.0


def test_it_adds_per_query_values_on_request(files):
    text = evaluate(
        "--qrels", files["qrels"], "--run", files["a"], "--per-query", "--format", "json",
        "--metrics", "map,mrr", "--empty", "zero", "--gain", "linear", "--rel-threshold", "2",
    )  # fmt: skip
    run = json.loads(text)["runs"][files["a"]]
    assert list(run) == ["mean", "per_query", "queries"]
    assert run["per_query"] == {
        "q1": {"map": 1.0, "mrr": 1.0},  # only d1 (grade 2) is relevant at threshold 2
        "q2": {"map": 0.0, "mrr": 0.0},
        "q3": {"map": 0.0, "mrr": 0.0},
    }
    assert run["queries"] == {"scored": 3, "skipped_no_relevant": 0, "missing_from_run": 1}


def test_it_prints_the_contract_above_the_table(files):
    text = evaluate("--qrels", files["qrels"], "--run", files["a"], "--metrics", "ndcg@10,map")
    head, _, table = text.partition("\n\n")
    assert head.startswith("metric contract")
    assert "exponential: 2^grade - 1" in head
    assert "grade >= 1" in head
    assert "cutoffs      10" in head
    assert "skipped: 1 of the 3 qrels queries have no document with grade >= 1" in head
    header, row = table.splitlines()
    assert header.split() == [
        "run", "scored", "skipped_no_relevant", "missing_from_run", "ndcg@10", "map"
    ]  # fmt: skip
    assert row.split()[1:4] == ["2", "1", "1"]
    assert row.split()[-1] == "0.4167"  # (1 + 2/3) / 2 for q1, 0 for q3: 4 decimals


def test_it_aligns_the_columns(files):
    text = evaluate("--qrels", files["qrels"], "--run", files["a"], "--run", files["b"])
    lines = text.split("\n\n")[1].splitlines()
    assert len({len(line) for line in lines}) == 1


def test_it_prints_a_per_query_table(files):
    text = evaluate("--qrels", files["qrels"], "--run", files["b"], "--per-query")
    assert f"per query: {files['b']}" in text
    assert any(line.startswith("q3 ") for line in text.splitlines())


def test_it_writes_one_csv_row_per_run_and_per_query(files):
    text = evaluate(
        "--qrels", files["qrels"], "--run", files["a"], "--run", files["b"], "--format", "csv",
        "--metrics", "map", "--per-query",
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["run"], r["qid"]) for r in rows] == [
        (files["a"], ""), (files["a"], "q1"), (files["a"], "q3"),
        (files["b"], ""), (files["b"], "q1"), (files["b"], "q3"),
    ]  # fmt: skip
    assert rows[0]["gain"] == "exponential" and rows[0]["scored"] == "2"
    assert float(rows[0]["map"]) == pytest.approx(5 / 12)


def test_it_rejects_an_unknown_measure(files):
    with pytest.raises(CommandError, match="unknown measure 'bpref'"):
        evaluate("--qrels", files["qrels"], "--run", files["a"], "--metrics", "bpref")


def test_it_names_a_missing_file(files, tmp_path):
    with pytest.raises(CommandError, match=r"nothing\.run: No such file"):
        evaluate("--qrels", files["qrels"], "--run", str(tmp_path / "nothing.run"))


def test_it_works_without_the_database(files, django_db_blocker):
    with django_db_blocker.block():  # any query would raise
        evaluate("--qrels", files["qrels"], "--run", files["a"])


def test_it_exits_1_with_the_file_and_line_of_a_bad_run_line(files, tmp_path):
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 3.0 a\nq1 Q0 d2 two 2.0 a\n", encoding="ascii")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "assay.settings.test"}
    done = subprocess.run(
        [sys.executable, "manage.py", "evaluate", "--qrels", files["qrels"], "--run", str(bad)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == f"CommandError: {bad}:2: rank 'two' is not an integer"
