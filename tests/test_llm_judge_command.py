"""`llm_judge calibrate|label|status` on an external judge: the JSON keys of the contract and
the exit codes (0 passed, 3 refused by the gate, 1 an error)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.services_calibration import calibration_report, calibration_subset
from jobs.models import Job
from judging.models import Calibration, JudgeSettings, LLMJudge, LLMJudgment
from tests.conftest import World
from tests.llm_project import server
from tests.llm_server import LLMServer, Reply

__all__ = ["server"]  # the fixture, used by name

pytestmark = pytest.mark.django_db

PAIRS = ["q1 0 d1", "q1 0 d2", "q1 0 d3", "q1 0 d4", "q1 0 d5", "q2 0 d1", "q2 0 d2", "q2 0 d3"]
GRADES = [3, 0, 1, 2, 0, 2, 3, 1]
CALIBRATE_KEYS = {
    "judge",
    "version",
    "n",
    "kappa",
    "kappa_linear",
    "kappa_quadratic",
    "kappa_binary",
    "human_kappa",
    "leniency",
    "per_grade_recall",
    "parse_failures",
    "tau",
    "passed",
    "reasons",
    "confusion",
    "labels",
    "per_human",
    "consensus",
    "retest",
    "thresholds",
    "conditions",
    "ci",
}


def _qrels(tmp_path: Path, name: str, grades: list[int]) -> str:
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(f"{p} {g}\n" for p, g in zip(PAIRS, grades, strict=True)))
    return str(path)


def _run(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exit:
        return int(exit.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def judged(world: World, tmp_path: Path) -> World:
    """Two people who graded every pair alike, and an external judge with the same labels."""
    for name in ("ann", "ben"):
        call_command(
            "import_judgments",
            "acme",
            _qrels(tmp_path, name, GRADES),
            "--as",
            name,
            stdout=StringIO(),
        )
    call_command(
        "import_judgments",
        "acme",
        _qrels(tmp_path, "llm", GRADES),
        "--as",
        "umbrela",
        "--kind",
        "llm",
        stdout=StringIO(),
    )
    return world


def test_it_refuses_too_few_pairs_with_exit_3_and_every_key(judged: World) -> None:
    code, out, _ = _run("llm_judge", "calibrate", "acme", "umbrela", "--format", "json")
    report = json.loads(out)
    assert code == 3
    assert report.keys() >= CALIBRATE_KEYS
    assert report["n"] == 8 and report["reasons"] == ["too_few"]
    assert report["human_kappa"] == pytest.approx(1.0) and report["kappa"] == pytest.approx(1.0)
    assert report["tau"] is None  # two runs: the ranking is not checked
    assert set(report["leniency"]) == {
        "mean_diff",
        "positive_rate_llm",
        "positive_rate_human",
        "ratio",
    }
    assert [c["code"] for c in report["conditions"]] == [
        "too_few",
        "ceiling",
        "floor",
        "leniency",
        "recall",
        "parse_failures",
        "ranking",
    ]
    assert Job.objects.get().kind == "llm_calibrate"


def test_it_passes_with_exit_0_and_stores_the_verdict(judged: World) -> None:
    JudgeSettings.objects.create(project=judged.project, min_pairs=8)
    code, out, _ = _run("llm_judge", "calibrate", "acme", "umbrela", "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["passed"] is True and report["reasons"] == []
    assert report["thresholds"]["min_pairs"] == 8
    calibration = Calibration.objects.get()
    assert calibration.passed and calibration.thresholds["min_pairs"] == 8
    assert calibration_report(version=calibration.version) == report
    code, out, _ = _run("llm_judge", "status", "acme", "umbrela", "--format", "json")
    status = json.loads(out)
    assert code == 0 and status["gate"] == "passed" and status["calibration"]["n"] == 8
    assert status["counts"]["ok"] == 8 and status["cost"] is None


def test_it_tells_the_verdict_in_words(judged: World) -> None:
    code, out, _ = _run("llm_judge", "calibrate", "acme", "umbrela")
    assert code == 3
    assert "REFUSED (too_few)" in out and "FAIL too_few: calibrated pairs: 8 (>= 100)" in out


def test_it_refuses_to_label_without_a_passed_calibration(judged: World) -> None:
    calls = LLMJudgment.objects.count()
    code, out, err = _run("llm_judge", "label", "acme", "umbrela", "--format", "json")
    result = json.loads(out)
    assert code == 3 and "has no calibration" in err
    assert {
        k: result[k] for k in ("labelled", "calls", "parse_failures", "failed", "skipped_existing")
    } == dict.fromkeys(("labelled", "calls", "parse_failures", "failed", "skipped_existing"), 0)
    _run("llm_judge", "calibrate", "acme", "umbrela")
    code, _, err = _run("llm_judge", "label", "acme", "umbrela")
    assert code == 3 and "was refused (too_few)" in err
    assert LLMJudgment.objects.count() == calls


def test_it_calibrates_on_the_double_judged_pairs_only(judged: World, tmp_path: Path) -> None:
    assert len(calibration_subset(project=judged.project)) == 8
    # A third person on three pairs does not narrow the subset: two people graded all eight.
    third = tmp_path / "third.txt"
    third.write_text("q1 0 d1 3\nq1 0 d2 1\nq1 0 d3 1\n")
    call_command("import_judgments", "acme", str(third), "--as", "cid", stdout=StringIO())
    _, out, _ = _run("llm_judge", "calibrate", "acme", "umbrela", "--format", "json")
    report = json.loads(out)
    assert report["n"] == 8 and report["per_human"]["cid"]["n"] == 3
    assert report["rows"] == 8 + 8 + 3  # every (pair, person) is a row


def test_it_reports_an_unknown_judge_as_an_error(judged: World) -> None:
    with pytest.raises(CommandError, match="has no judge 'nobody'"):
        _run("llm_judge", "calibrate", "acme", "nobody")


def test_it_refuses_to_calibrate_without_human_grades(world: World, tmp_path: Path) -> None:
    call_command(
        "import_judgments",
        "acme",
        _qrels(tmp_path, "llm", GRADES),
        "--as",
        "umbrela",
        "--kind",
        "llm",
        stdout=StringIO(),
    )
    with pytest.raises(CommandError, match="no human grades"):
        _run("llm_judge", "calibrate", "acme", "umbrela")
    assert not Calibration.objects.exists()


def test_it_calibrates_an_external_judge_of_the_labels_imported_last(
    judged: World, tmp_path: Path
) -> None:
    worse = [0, 0, 0, 0, 0, 0, 0, 0]
    call_command(
        "import_judgments",
        "acme",
        _qrels(tmp_path, "worse", worse),
        "--as",
        "umbrela",
        "--kind",
        "llm",
        stdout=StringIO(),
    )
    judge = LLMJudge.objects.get(name="umbrela")
    code, out, _ = _run("llm_judge", "calibrate", "acme", "umbrela", "--format", "json")
    report = json.loads(out)
    assert report["version"] == judge.versions.latest("id").digest
    assert {"floor", "recall", "leniency"} <= set(report["reasons"]) and code == 3


def test_it_asks_an_endpoint_judge_for_the_subset_and_a_seeded_retest_sample(
    judged: World, server: LLMServer
) -> None:
    """Through `llm_judge add` and `calibrate`, against a local endpoint: every double-judged
    pair asked once, a retest sample asked a second time, and a second calibration of the same
    version asks for nothing (its answers are stored)."""
    JudgeSettings.objects.create(project=judged.project, min_pairs=8, retest_sample=3)
    server.default = lambda key: Reply.grade(2)
    code, _, _ = _run("llm_judge", "add", "acme", "gpt", "--base-url", server.url, "--model", "m")
    assert code == 0
    code, out, _ = _run("llm_judge", "calibrate", "acme", "gpt", "--format", "json")
    report = json.loads(out)
    version = LLMJudge.objects.get(name="gpt").versions.get()
    asked = LLMJudgment.objects.filter(version=version)
    assert asked.filter(repeat=0).count() == 8 and asked.filter(repeat=1).count() == 3
    assert server.requests == 11 and report["n"] == 8 and report["retest_n"] == 3
    assert report["retest"] is None  # both askings all 2: kappa is undefined, shown as null
    assert report["version"] == version.digest and code == 3  # all 2s: no agreement beyond chance
    again = json.loads(_run("llm_judge", "calibrate", "acme", "gpt", "--format", "json")[1])
    assert server.requests == 11 and again["n"] == 8 and Calibration.objects.count() == 2


def test_it_has_nothing_to_call_for_a_passed_external_judge(judged: World) -> None:
    JudgeSettings.objects.create(project=judged.project, min_pairs=8)
    assert _run("llm_judge", "calibrate", "acme", "umbrela")[0] == 0
    with pytest.raises(CommandError, match="is external"):
        _run("llm_judge", "label", "acme", "umbrela")


def test_it_labels_through_an_endpoint_only_after_the_version_passed(
    judged: World, server: LLMServer
) -> None:
    """An endpoint that answers as the humans did passes calibration (exit 0); `label` then
    calls it for the pairs it has not answered, and a second `label` calls nothing."""
    from pooling.models import Pair

    JudgeSettings.objects.create(project=judged.project, min_pairs=8, retest_sample=3)
    truth = dict(zip(PAIRS, GRADES, strict=True))
    project = judged.project
    extra = project.documents.create(docid="d9", title="Doc nine", text="More text.")
    for query in project.queries.all():
        Pair.objects.create(query=query, document=extra)  # nobody graded these
    pairs = Pair.objects.filter(query__project=judged.project).select_related("query", "document")
    grades = {
        (p.query.text, p.document.title): truth.get(f"{p.query.qid} 0 {p.document.docid}", 0)
        for p in pairs
    }
    server.default = lambda key: Reply.grade(grades[key])
    prices = ("--price-input", "2.5", "--price-output", "10")
    _run("llm_judge", "add", "acme", "gpt", "--base-url", server.url, "--model", "m", *prices)
    code, out, _ = _run("llm_judge", "label", "acme", "gpt", "--format", "json")
    assert code == 3 and server.requests == 0
    code, out, _ = _run("llm_judge", "calibrate", "acme", "gpt", "--format", "json")
    assert code == 0 and json.loads(out)["passed"] is True
    before = server.requests
    code, out, _ = _run("llm_judge", "label", "acme", "gpt", "--format", "json")
    result = json.loads(out)
    assert code == 0 and set(result) >= {
        "labelled", "calls", "parse_failures", "failed", "skipped_existing"
    }  # fmt: skip
    assert len(grades) > 8 and result["calls"] == server.requests - before == len(grades) - 8
    assert result["skipped_existing"] == 8 and result["failed"] == 0
    code, out, _ = _run("llm_judge", "label", "acme", "gpt", "--format", "json")
    assert code == 0 and json.loads(out)["calls"] == 0
    cost = json.loads(_run("llm_judge", "status", "acme", "gpt", "--format", "json")[1])["cost"]
    assert cost["price_input"] == 2.5 and cost["tokens_in"] > 0
    expected = (cost["tokens_in"] * 2.5 + cost["tokens_out"] * 10) / 1e6
    assert cost["cost"] == pytest.approx(expected)
