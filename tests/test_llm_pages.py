"""The lead's LLM judge pages through the real URLs: who may open them, adding and editing a
judge, the new-version message, the gate refusing to label (on the page and to a direct POST),
the calibration report of an external judge, and escaping of what a model or a corpus wrote."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Role
from annotation.services import membership_set, project_create
from jobs.models import Job, JobState
from jobs.services import job_create
from judging.models import (
    Calibration,
    JudgeSettings,
    JudgeVersion,
    LLMJudge,
    LLMJudgment,
)
from judging.services_import import judgments_import
from judging.services_llm import judge_version_current
from pooling.models import Pair
from tests.agreement_judging import empty_cache  # noqa: F401 (a fixture)
from tests.conftest import make_user
from tests.llm_project import server  # noqa: F401 (a fixture)
from tests.llm_server import LLMServer, Reply
from tests.test_agreement_dashboard import (
    ALICE,
    Team,
    double_judged_project,
    judge,
    team_of,
)

pytestmark = pytest.mark.django_db

ENDPOINT = {
    "name": "gpt",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "gpt-4o",
    "api_key_env": "OPENAI_API_KEY",
    "concurrency": "8",
    "timeout": "60",
    "max_retries": "4",
    "prompt_template": "",
}


@pytest.fixture
def team() -> Team:
    team = team_of(double_judged_project())
    judge(team)
    return team


def _url(name: str, team: Team, *args: str) -> str:
    return reverse(name, args=[team.slug, *args])


def _add(team: Team, **changes: str) -> tuple[int, str]:
    response = team.lead.post(_url("llm_judges", team), ENDPOINT | changes, follow=True)
    return response.status_code, response.content.decode()


def _text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def test_it_keeps_annotators_and_outsiders_out(team: Team) -> None:
    _add(team)
    pages = [
        _url("llm_judges", team),
        _url("llm_judge_settings", team),
        _url("llm_judge_detail", team, "gpt"),
        _url("llm_judge_calibration", team, "gpt"),
    ]
    actions = [
        _url(name, team, "gpt")
        for name in ("llm_judge_calibrate", "llm_judge_label", "llm_judge_prefilter")
    ]
    for client, refused in ((team.alice, 403), (team.outsider, 404)):
        for url in pages:
            assert client.get(url).status_code == refused, url
        for url in [*pages, *actions]:
            assert client.post(url, ENDPOINT | {"name": "other"}).status_code == refused, url
    assert list(LLMJudge.objects.values_list("name", flat=True)) == ["gpt"]
    assert not Job.objects.exists() and not JudgeSettings.objects.exists()
    project_page = _url("project_detail", team)
    assert _url("llm_judges", team) in team.lead.get(project_page).content.decode()
    assert _url("llm_judges", team) not in team.alice.get(project_page).content.decode()


def test_it_adds_a_judge_that_starts_uncalibrated(team: Team) -> None:
    status, page = _add(team)
    assert status == 200
    judge = LLMJudge.objects.get(name="gpt")
    assert (judge.model, judge.api_key_env, judge.concurrency) == ("gpt-4o", "OPENAI_API_KEY", 8)
    assert "Judge gpt added" in page and "not calibrated" in page
    listing = team.lead.get(_url("llm_judges", team)).content.decode()
    version = judge_version_current(judge=judge)
    assert version.short in listing and "not calibrated" in listing


def test_it_says_what_to_fix_when_a_judge_cannot_be_added(team: Team) -> None:
    status, page = _add(team, api_key_env="sk-proj-abc123 secret", base_url="", concurrency="0")
    assert status == 400
    assert "NAME of the environment variable" in page and "not the key itself" in page
    assert "the endpoint&#x27;s base URL" in page or "the endpoint's base URL" in page
    assert "from 1 to 256" in page
    assert "sk-proj-abc123" not in page  # a key typed by mistake is not written back
    assert not LLMJudge.objects.exists()
    status, page = _add(team, prompt_template="Grade $doc for $query")
    assert status == 400 and "Unknown placeholder $doc" in _text(page)
    assert "Grade $doc for $query</textarea>" in page  # kept, to be corrected
    status, page = _add(team, name="settings")
    assert status == 400 and "choose another name" in page
    _add(team)
    status, page = _add(team)  # the same name twice: the service refuses, the form says so
    assert status == 400 and LLMJudge.objects.count() == 1


def test_it_says_a_changed_configuration_is_a_new_version(team: Team) -> None:
    _add(team)
    detail = _url("llm_judge_detail", team, "gpt")
    same = {k: v for k, v in ENDPOINT.items() if k != "name"} | {"concurrency": "16"}
    page = team.lead.post(detail, same, follow=True).content.decode()
    assert "The judge&#x27;s version is unchanged" in page or "version is unchanged" in page
    assert LLMJudge.objects.get().concurrency == 16
    changed = same | {"model": "gpt-4o-mini"}
    page = team.lead.post(detail, changed, follow=True).content.decode()
    new = judge_version_current(judge=LLMJudge.objects.get())
    assert f"a new version ({new.short}): calibrate again" in page
    assert JudgeVersion.objects.filter(judge__name="gpt").count() == 2


def test_it_refuses_to_label_before_a_passed_calibration(team: Team) -> None:
    _add(team)
    page = team.lead.get(_url("llm_judge_detail", team, "gpt")).content.decode()
    button = re.search(r'<button type="submit" class="button" id="label"[^>]*>', page)
    assert button is not None and "disabled" in button.group(0)
    assert "Label at scale is off. This version has not been calibrated" in _text(page)
    assert "The human-only slice, 10 % of each stratum's queries, is drawn" in _text(page)
    response = team.lead.post(_url("llm_judge_label", team, "gpt"), follow=True)
    assert "Refused:" in response.content.decode()
    assert not Job.objects.filter(kind="llm_label").exists()
    assert not LLMJudgment.objects.exists()


def test_it_calibrates_an_external_judge_and_says_why_it_was_refused(
    team: Team, tmp_path: Path
) -> None:
    labels = tmp_path / "umbrela.qrels"
    labels.write_text(
        "".join(f"q{q} 0 d{d} {(d + 1) % 4}\n" for q in range(2) for d in range(5)), "utf-8"
    )
    judgments_import(project=team.project, path=labels, name="umbrela", kind="llm")
    response = team.lead.post(_url("llm_judge_calibrate", team, "umbrela"), follow=True)
    assert response.status_code == 200
    report = team.lead.get(_url("llm_judge_calibration", team, "umbrela")).content.decode()
    text = _text(report)
    assert "Refused: pre-filter only" in text, text
    assert "calibrated pairs : measured 10, needs >= 100." in text
    assert "Have more pairs judged by two people" in text  # what to do about it
    assert '<svg class="heatmap"' in report and '<svg class="kappa-plot"' in report
    assert "ceiling: each other" in report
    listing = team.lead.get(_url("llm_judges", team)).content.decode()
    assert "pre-filter only" in listing
    calibration = Calibration.objects.get()
    assert not calibration.passed and "too_few" in calibration.reasons


def test_it_escapes_what_a_model_and_a_corpus_wrote(team: Team) -> None:
    hostile = '<script>alert("x")</script>'
    _add(team, model=hostile)
    judge = LLMJudge.objects.get()
    version = judge_version_current(judge=judge)
    pair = Pair.objects.get(query__qid="q0", document__docid="d0")  # both humans gave 0
    pair.document.title = '<img src=x onerror="alert(1)">'
    pair.document.save()
    LLMJudgment.objects.create(
        version=version, pair=pair, status="ok", grade=3, reason=f"because {hostile}"
    )
    Calibration.objects.create(
        version=version,
        n=1,
        passed=False,
        reasons=["too_few"],
        report={"n": 1, "passed": False, "reasons": ["too_few"], "kappa": None},
    )
    for name in ("llm_judges", "llm_judge_detail", "llm_judge_calibration"):
        args = () if name == "llm_judges" else ("gpt",)
        page = team.lead.get(_url(name, team, *args)).content.decode()
        assert hostile not in page and "<img src=x" not in page, name
        assert "&lt;script&gt;" in page, name
    report = team.lead.get(_url("llm_judge_calibration", team, "gpt")).content.decode()
    assert "because &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in report
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in report


def test_it_checks_the_gate_settings_bounds(team: Team) -> None:
    url = _url("llm_judge_settings", team)
    form = team.lead.get(url)
    assert form.status_code == 200 and not JudgeSettings.objects.exists()
    values = {
        "min_pairs": "100", "ceiling_margin": "0.05", "kappa_floor": "0.3",
        "max_mean_diff": "0.3", "ratio_low": "0.8", "ratio_high": "1.25", "min_recall": "0.7",
        "max_parse_failures": "0.02", "min_tau": "0.8", "relevance_threshold": "2",
        "retest_sample": "50", "prefilter_threshold": "1", "audit_share": "0.1",
        "human_only_share": "0.1",
    }  # fmt: skip
    bad = values | {"audit_share": "1.5", "ratio_low": "2", "relevance_threshold": "0"}
    response = team.lead.post(url, bad)
    page = response.content.decode()
    assert response.status_code == 400 and not JudgeSettings.objects.exists()
    assert "Enter a share between 0 and 1" in page and "Enter a grade from 1 to 3" in page
    assert "The highest ratio must be at least the lowest" in page
    response = team.lead.post(url, values | {"kappa_floor": "0.4"}, follow=True)
    assert "Saved." in response.content.decode()
    assert JudgeSettings.objects.get(project=team.project).kappa_floor == pytest.approx(0.4)


def test_it_polls_a_running_calibration_with_cancel_then_reloads_when_it_ends(
    team: Team,
) -> None:
    _add(team)
    judge = LLMJudge.objects.get()
    job = job_create(
        project=team.project,
        kind="llm_calibrate",
        handler="evaluation.tasks.llm_calibrate_job",
        params={"judge_id": judge.pk},
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, progress=0.4, message="20 of 50")
    detail = _url("llm_judge_detail", team, "gpt")
    page = team.lead.get(detail).content.decode()
    assert f'hx-get="{detail}" hx-trigger="every 1s"' in page
    assert re.search(r'<button type="submit" class="primary" id="calibrate" disabled>', page)
    partial = team.lead.get(detail, headers={"HX-Request": "true"})
    body = partial.content.decode()
    assert "<html" not in body and "40% · 20 of 50" in body and "HX-Refresh" not in partial
    cancel = _url("job_cancel", team, str(job.pk))
    assert f'action="{cancel}"' in body
    team.lead.post(cancel, {"next": detail})
    assert Job.objects.get(pk=job.pk).cancel_requested
    assert "Stopping at the next check" in team.lead.get(detail).content.decode()
    Job.objects.filter(pk=job.pk).update(state=JobState.DISCARDED)
    ended = team.lead.get(detail, headers={"HX-Request": "true"})
    assert ended["HX-Refresh"] == "true"


def test_it_asks_for_the_protocol_before_any_judge() -> None:
    project = project_create(slug="bare", name="Bare")
    lead = make_user("lena")
    membership_set(project=project, user=lead, role=Role.LEAD)
    client = Client()
    client.force_login(lead)
    page = client.get(reverse("llm_judges", args=["bare"])).content.decode()
    assert "Publish the protocol first" in page and reverse("protocol_edit", args=["bare"]) in page
    response = client.post(reverse("llm_judges", args=["bare"]), ENDPOINT)
    assert "Publish the protocol first" in response.content.decode()
    assert not LLMJudge.objects.exists()


def test_it_pre_filters_with_an_uncalibrated_judge_and_shows_the_audit(
    team: Team,
    server: LLMServer,  # noqa: F811
) -> None:
    server.default = lambda key: Reply.grade(ALICE[f"d{key[1].split()[-1]}"], reason="seen")
    _add(team, base_url=server.url, api_key_env="")
    response = team.lead.post(_url("llm_judge_prefilter", team, "gpt"), follow=True)
    page = response.content.decode()
    assert "Pre-filtering with gpt" in page, _text(page)[:2000]
    text = _text(page)
    assert "Last labelling run (pre-filter)" in text
    assert re.search(r"labelled 10 calls 10 unreadable 0 failed 0", text)
    # alice's grade 0 on d0 and d4 of both queries: four pairs screened out, no audit at 10 %
    assert "4 pairs screened out, 0 of them kept for the humans as the audit" in text
    assert "Pre-filter audit screened out 4" in text
