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
    judged: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine (`judging.services_llm`) stands in here as a module that records what it is
    asked and answers with the humans' grades; its own tests drive a real endpoint."""
    from types import SimpleNamespace

    from evaluation.services_calibration import calibration_run
    from judging.models import JudgeVersion, LLMStatus

    truth = {r.pair_id: r.grade for r in LLMJudgment.objects.all()}
    asked: list[tuple[int, list[int]]] = []

    def label_pairs(*, version, pair_ids, concurrency, repeat=0, progress=None, job=None):
        asked.append((repeat, list(pair_ids)))
        for pair in pair_ids:
            LLMJudgment.objects.get_or_create(
                version=version,
                pair_id=pair,
                repeat=repeat,
                defaults={"status": LLMStatus.OK, "grade": truth[pair]},
            )

    def version_current(*, judge):
        return JudgeVersion.objects.get_or_create(judge=judge, digest="e" * 64)[0]

    engine = SimpleNamespace(llm_label_pairs=label_pairs, judge_version_current=version_current)
    monkeypatch.setitem(__import__("sys").modules, "judging.services_llm", engine)
    JudgeSettings.objects.create(project=judged.project, min_pairs=8, retest_sample=3)
    judge = LLMJudge.objects.create(
        project=judged.project, name="gpt", base_url="http://x/v1", model="m"
    )
    first = calibration_run(judge=judge)
    again = calibration_run(judge=judge)
    assert [repeat for repeat, _ in asked] == [0, 1, 0, 1]
    assert sorted(asked[0][1]) == sorted(truth) and len(asked[1][1]) == 3
    assert asked[1][1] == asked[3][1]  # seeded by the version: a rerun asks for the same pairs
    assert first.report["retest"] == pytest.approx(1.0) and first.report["retest_n"] == 3
    assert first.passed and again.passed


def test_it_has_nothing_to_call_for_a_passed_external_judge(judged: World) -> None:
    JudgeSettings.objects.create(project=judged.project, min_pairs=8)
    assert _run("llm_judge", "calibrate", "acme", "umbrela")[0] == 0
    with pytest.raises(CommandError, match="is external"):
        _run("llm_judge", "label", "acme", "umbrela")
