"""The lead's pages for the LLM judge: the judges, one judge (its configuration, versions and
runs), its calibration report, and the gate's settings. Annotators get 403, outsiders 404.

Here rather than in judging because the calibration report is evaluation's; what they read of
judging is its models and its services. Every write goes through a service, and the gate is
the service's: a button disabled on the page is refused by the server too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agreement.charts import heatmap, kappa_plot
from agreement.services_adjudication import pair_grades
from annotation.access import Access, project_for_lead
from annotation.models import Project
from jobs.errors import QueueUnavailable
from jobs.models import Job, JobState
from jobs.services import job_enqueue
from judging.llm_prompt import DEFAULT_TEMPLATE
from judging.models import (
    Calibration,
    HumanOnlyQuery,
    JudgeKind,
    JudgeVersion,
    LLMJudge,
    LLMJudgment,
    Screening,
)
from judging.services_llm import (
    GateRefused,
    JudgeError,
    cost_of,
    gate_passed,
    judge_add,
    judge_settings_of,
    judge_update,
    latest_calibration,
    llm_label_start,
    prefilter_audit,
)

from .forms_llm import JudgeForm, JudgeSettingsForm
from .llm_report import number, report_view
from .services_calibration import CalibrationError, calibration_start, judge_version_of

JOB_KINDS = ("llm_label", "llm_calibrate")
APPROVED, PREFILTER_ONLY, NOT_CALIBRATED = "approved for scale", "pre-filter only", "not calibrated"


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


def _judge(access: Access, name: str) -> LLMJudge:
    return get_object_or_404(LLMJudge, project=access.project, name=name)


def _no_protocol(request: HttpRequest, access: Access) -> HttpResponse | None:
    """A judge's prompt and version come from the published protocol: without one, the pages
    say so (and link to the editor) instead of showing judges that cannot have a version."""
    if access.project.current_protocol() is not None:
        return None
    context = {"project": access.project}
    return render(request, "evaluation/llm_no_protocol.html", context)


# --------------------------------------------------------------------------- the judges


@login_required
def judges_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's judges with their gate; POST adds one (the form comes back with what to
    fix when it cannot)."""
    access = _get_project_for_lead(request, slug)
    if (refused := _no_protocol(request, access)) is not None:
        return refused
    form = JudgeForm(request.POST or None, adding=True)
    if request.method == "POST" and form.is_valid():
        try:
            judge = judge_add(project=access.project, user=request.user, **form.cleaned_data)  # type: ignore[arg-type]
        except JudgeError as error:
            form.add_error(None, str(error))
        else:
            messages.info(request, f"Judge {judge.name} added. Calibrate it before it labels.")
            return redirect("llm_judge_detail", slug, judge.name)
    status = 400 if form.errors else 200
    context = {
        "project": access.project,
        "form": form,
        "rows": _rows(access.project),
        "default_template": DEFAULT_TEMPLATE,
    }
    return render(request, "evaluation/llm_judges.html", context, status=status)


def _rows(project: Project) -> list[dict[str, Any]]:
    rows = []
    for judge in LLMJudge.objects.filter(project=project).order_by("name"):
        version = judge_version_of(judge=judge)
        calibration = latest_calibration(version=version)
        rows.append(
            {
                "judge": judge,
                "version": version,
                "gate": _gate(calibration),
                "calibration": calibration,
                "kappa": number(_report(calibration).get("kappa")),
                "human_kappa": number(_report(calibration).get("human_kappa")),
                "counts": _counts(version),
            }
        )
    return rows


def _gate(calibration: Calibration | None) -> str:
    if calibration is None:
        return NOT_CALIBRATED
    return APPROVED if calibration.passed else PREFILTER_ONLY


def _report(calibration: Calibration | None) -> dict[str, Any]:
    return dict(calibration.report or {}) if calibration else {}


def _counts(version: JudgeVersion) -> dict[str, int]:
    rows = LLMJudgment.objects.filter(version=version, repeat=0).values("status")
    by_status = {row["status"]: row["n"] for row in rows.annotate(n=Count("id"))}
    return {
        "ok": by_status.get("ok", 0),
        "parse_failure": by_status.get("parse_failure", 0),
        "failed": by_status.get("failed", 0),
        "total": sum(by_status.values()),
    }


# --------------------------------------------------------------------------- one judge


@login_required
def judge_detail(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """One judge; POST saves its configuration. Polled by htmx (the job partial) while a
    calibration or a labelling run is under way."""
    access = _get_project_for_lead(request, slug)
    if (refused := _no_protocol(request, access)) is not None:
        return refused
    judge = _judge(access, name)
    form = JudgeForm(request.POST or None, initial=_initial(judge))
    if request.method == "POST" and judge.kind == JudgeKind.ENDPOINT and form.is_valid():
        before = judge_version_of(judge=judge).digest
        try:
            judge = judge_update(judge=judge, **form.cleaned_data)
        except JudgeError as error:
            form.add_error(None, str(error))
        else:
            _say_saved(request, before, judge_version_of(judge=judge))
            return redirect("llm_judge_detail", slug, judge.name)
    context = _detail(access, judge, form)
    if request.htmx:  # type: ignore[attr-defined]  # the progress partial, polled
        response = render(request, "evaluation/llm_judge_detail.html#job", context)
        if not context["polling"]:  # ended: the whole page changes (gate, counts, buttons)
            response["HX-Refresh"] = "true"
        return response
    status = 400 if form.errors else 200
    return render(request, "evaluation/llm_judge_detail.html", context, status=status)


def _say_saved(request: HttpRequest, before: str, version: JudgeVersion) -> None:
    if version.digest == before:
        messages.info(request, "Saved. The judge's version is unchanged.")
    else:
        messages.warning(
            request,
            f"Saved: a new version ({version.short}): calibrate again before it labels at scale.",
        )


def _initial(judge: LLMJudge) -> dict[str, Any]:
    fields = ("base_url", "model", "api_key_env", "concurrency", "timeout", "max_retries")
    more = ("reasoning", "prompt_template", "price_input", "price_output")
    return {name: getattr(judge, name) for name in (*fields, *more)}


def _detail(access: Access, judge: LLMJudge, form: JudgeForm) -> dict[str, Any]:
    version = judge_version_of(judge=judge)
    calibration = latest_calibration(version=version)
    passed = gate_passed(version=version)
    screened = Screening.objects.filter(version=version).exists()
    job = _latest_job(judge, active_only=False)
    return {
        "project": access.project,
        "judge": judge,
        "form": form,
        "version": version,
        "versions": _versions(judge),
        "calibration": calibration,
        "gate": _gate(calibration),
        "passed": passed,
        "refusal": _refusal(calibration, passed),
        "failed": report_view(_report(calibration)).failed if calibration else (),
        "job": job,
        "polling": job is not None and job.active,
        "last_label": _last_label(judge),
        "counts": _counts(version),
        "cost": _cost(cost_of(version=version)),
        "audit": prefilter_audit(version=version) if screened else None,
        "human_only": HumanOnlyQuery.objects.filter(project=access.project).count(),
        "human_only_share": judge_settings_of(project=access.project).human_only_share,
        "is_endpoint": judge.kind == JudgeKind.ENDPOINT,
        "default_template": DEFAULT_TEMPLATE,
    }


def _cost(cost: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, in all, per 1,000 judgments) lines of `cost_of`."""
    per = cost.get("per_1000") or {}
    rows = [
        ("answers stored (with test–retest)", _whole(cost.get("judgments")), ""),
        ("calls (with retries)", _whole(cost.get("calls")), ""),
        ("input tokens", _whole(cost.get("tokens_in")), _whole(per.get("tokens_in"))),
        ("output tokens", _whole(cost.get("tokens_out")), _whole(per.get("tokens_out"))),
    ]
    if cost.get("cost") is not None:
        rows.append(("cost", number(cost["cost"], 2), number(per.get("cost"), 2)))
    return rows


def _whole(value: float | None) -> str:
    return "—" if value is None else f"{round(value):,}"


def _versions(judge: LLMJudge) -> list[tuple[JudgeVersion, str]]:
    versions = JudgeVersion.objects.filter(judge=judge).order_by("-id")
    return [(v, _gate(latest_calibration(version=v))) for v in versions]


def _refusal(calibration: Calibration | None, passed: bool) -> str:
    """Why Label at scale is off, in words (empty when it is on)."""
    if passed:
        return ""
    if calibration is None:
        return "This version has not been calibrated: calibrate it first."
    return "The last calibration refused this version: it may only pre-filter."


def _judge_jobs(judge: LLMJudge) -> list[Job]:
    """The judge's calibration and labelling jobs, newest first: their params name one of
    its versions, or the judge itself."""
    versions = set(JudgeVersion.objects.filter(judge=judge).values_list("pk", flat=True))
    jobs = Job.objects.filter(project=judge.project, kind__in=JOB_KINDS).order_by("-pk")[:50]
    return [
        job
        for job in jobs
        if (job.params or {}).get("version_id") in versions
        or (job.params or {}).get("judge_id") == judge.pk
    ]


def _latest_job(judge: LLMJudge, *, active_only: bool) -> Job | None:
    for job in _judge_jobs(judge):
        if job.active or not active_only:
            return job
    return None


def _last_label(judge: LLMJudge) -> Job | None:
    for job in _judge_jobs(judge):
        if job.kind == "llm_label" and job.state == JobState.DONE:
            return job
    return None


# --------------------------------------------------------------------------- actions


@login_required
@require_POST
def judge_calibrate(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    judge = _judge(access, name)
    try:
        job_enqueue(calibration_start(judge=judge, user=request.user))  # type: ignore[arg-type]
    except (JudgeError, CalibrationError, QueueUnavailable) as error:
        messages.error(request, f"Not started: {error}")
    else:
        messages.info(request, f"Calibrating {judge.name} on the double-judged pairs.")
    return redirect("llm_judge_detail", slug, judge.name)


@login_required
@require_POST
def judge_label(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    return _label(request, slug, name, "label")


@login_required
@require_POST
def judge_prefilter(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    return _label(request, slug, name, "prefilter")


def _label(request: HttpRequest, slug: str, name: str, mode: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    judge = _judge(access, name)
    try:
        llm_label_start(judge=judge, mode=mode, user=request.user)  # type: ignore[arg-type]
    except GateRefused as error:
        messages.error(request, f"Refused: {error}")
    except (JudgeError, QueueUnavailable) as error:
        messages.error(request, f"Not started: {error}")
    else:
        what = "Labelling at scale" if mode == "label" else "Pre-filtering"
        messages.info(request, f"{what} with {judge.name}; the human-only slice is left out.")
    return redirect("llm_judge_detail", slug, judge.name)


# --------------------------------------------------------------------------- calibration


@login_required
def judge_calibration(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    if (refused := _no_protocol(request, access)) is not None:
        return refused
    judge = _judge(access, name)
    version = judge_version_of(judge=judge)
    calibration = latest_calibration(version=version)
    context: dict[str, Any] = {
        "project": access.project,
        "judge": judge,
        "version": version,
        "calibration": calibration,
    }
    if calibration is not None:
        view = report_view(_report(calibration))
        context |= {
            "view": view,
            "plot": kappa_plot(view.plot_rows, round(view.bar, 3) if view.bar is not None else 0.0),
            "heat": heatmap(view.confusion, view.labels) if view.confusion else None,
            "differences": _differences(access.project, version),
        }
    return render(request, "evaluation/llm_judge_calibration.html", context)


DIFFERENCES_SHOWN = 25


@dataclass(frozen=True)
class Difference:
    row: LLMJudgment
    humans: tuple[int, ...]
    gap: int


def _differences(project: Project, version: JudgeVersion) -> list[Difference]:
    """The pairs where the judge's grade is none of the humans', widest gap first: what a lead
    reads to see why. Query, document and reason are the judge's or the corpus's words, never
    trusted: the template escapes them."""
    humans = {p.pair_id: p.grades for p in pair_grades(project=project) if p.grades}
    rows = (
        LLMJudgment.objects.filter(version=version, repeat=0, status="ok", pair_id__in=humans)
        .select_related("pair__query", "pair__document")
        .only("grade", "reason", "pair__query__qid", "pair__query__text", "pair__document__docid",
              "pair__document__title")
    )  # fmt: skip
    differ = [
        Difference(row, humans[row.pair_id], min(abs(int(row.grade or 0) - g) for g in grades))
        for row in rows
        if row.grade not in (grades := humans[row.pair_id])
    ]
    differ.sort(key=lambda d: (-d.gap, d.row.pair_id))
    return differ[:DIFFERENCES_SHOWN]


# --------------------------------------------------------------------------- settings


@login_required
def judge_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """The gate's conditions and the judge's shares; bounds checked before anything is saved.
    One row of one model, so the form saves it itself."""
    access = _get_project_for_lead(request, slug)
    settings = judge_settings_of(project=access.project)
    form = JudgeSettingsForm(request.POST or None, instance=settings)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.info(request, "Saved. A new calibration is decided under these settings.")
        return redirect(reverse("llm_judge_settings", args=[slug]))
    context = {"project": access.project, "form": form}
    return render(
        request, "evaluation/llm_judge_settings.html", context, status=400 if form.errors else 200
    )
