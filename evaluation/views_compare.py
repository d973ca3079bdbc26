"""The paired comparison of two runs under a release, and the must-never-break list (leads).

The comparison reads the runs' stored per-query values (nothing is scored here) and words them
with evaluation.comparison, as `compare` does on the downloaded files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from annotation.access import project_for_lead
from pooling.models import Run

from .comparison import (
    contract_text,
    difference_histogram,
    extremes,
    interval_plot,
    interval_text,
    sample_size,
    secondary_text,
    shape_text,
    verdict_text,
    worst_text,
)
from .forms_compare import CompareForm, MustNeverBreakForm, MustNeverBreakImportForm
from .models import Release, RunEvaluation
from .services_compare import (
    CompareError,
    ReleaseComparison,
    comparison_stored,
    must_never_break_add,
    must_never_break_export,
    must_never_break_import,
    must_never_break_remove,
    stored_measures,
)

DEFAULT_METRIC = "ndcg@10"


def inspector_url(release: Release, run_id: int, qid: str) -> str:
    """The per-query inspector of a run for one query."""
    slug, number = release.project.slug, release.number
    try:
        path = reverse("inspector", args=[slug, number, run_id])
    except NoReverseMatch:  # the inspector's URL, as the shared interface fixes it
        path = f"/p/{slug}/releases/{number}/inspect/{run_id}/"
    return f"{path}?{urlencode({'qid': qid})}"


@login_required
def compare_page(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    access = project_for_lead(request, slug)
    release = get_object_or_404(Release, project=access.project, number=number)
    scored = list(RunEvaluation.objects.filter(release=release).select_related("run"))
    runs = sorted(e.run.name for e in scored)
    measures = stored_measures(scored[0]) if scored else [DEFAULT_METRIC]
    query = request.GET.copy()
    query.setdefault("metric", DEFAULT_METRIC if DEFAULT_METRIC in measures else measures[0])
    form = CompareForm(query, runs=runs, measures=measures)
    context: dict[str, Any] = {"project": access.project, "release": release, "form": form}
    context["runs"] = runs
    if not (request.GET.get("baseline") and request.GET.get("candidate")):
        return render(request, "evaluation/compare_page.html", context)
    if not form.is_valid():
        return render(request, "evaluation/compare_page.html", context, status=400)
    data = form.cleaned_data
    try:
        result = comparison_stored(
            release=release,
            baseline=Run.objects.get(project=access.project, name=data["baseline"]),
            candidate=Run.objects.get(project=access.project, name=data["candidate"]),
            metric=data["metric"],
        )
    except CompareError as error:
        context["error"] = str(error)
        return render(request, "evaluation/compare_page.html", context, status=400)
    context |= _report_context(result, data)
    return render(request, "evaluation/compare_page.html", context)


def _report_context(result: ReleaseComparison, data: dict[str, Any]) -> dict[str, Any]:
    report = result.report
    base, cand = result.baseline, result.candidate
    named = Run.objects.filter(project=result.release.project, name__in=[base.name, cand.name])
    runs = {run.name: run.pk for run in named}
    worst, best = extremes(report)
    for row in (*worst, *best):
        row["candidate_url"] = inspector_url(result.release, runs[cand.name], row["qid"])
        row["baseline_url"] = inspector_url(result.release, runs[base.name], row["qid"])
    lines = [
        ("metric", contract_text(report, base, cand, result.contract)),
        ("set", f"{result.eval_set} · {report.comparison.summary.n} queries"),
        ("result", interval_text(report)),
        ("shape", f"{shape_text(report)}  ·  {worst_text(report)}"),
        ("verdict", verdict_text(report)),
    ]
    return {
        "comparison": result,
        "report": report,
        "lines": lines,
        "secondary": secondary_text(report),
        "plot": interval_plot(report),
        "histogram": difference_histogram(report.candidate - report.baseline),
        "worst": worst,
        "best": best,
        "violations": report.violations,
        "sample": _sample_size(report.candidate - report.baseline, data),
    }


def _sample_size(diffs: Any, data: dict[str, Any]) -> dict[str, Any]:
    power = data.get("power") or 0.8
    alpha = data.get("alpha") or 0.05
    try:
        return {"result": sample_size(diffs, effect=data.get("effect"), power=power, alpha=alpha)}
    except ValueError as error:
        return {"error": str(error)}


# ---------------------------------------------------------------------------------------------
# The must-never-break list
# ---------------------------------------------------------------------------------------------


@login_required
def must_never_break_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The list, a form to add a case and one to import a file; POST `action` add|import."""
    access = project_for_lead(request, slug)
    project = access.project
    user = request.user if isinstance(request.user, User) else None
    add_form, import_form = MustNeverBreakForm(), MustNeverBreakImportForm()
    error = ""
    if request.method == "POST" and request.POST.get("action") == "import":
        import_form = MustNeverBreakImportForm(request.POST, request.FILES)
        if import_form.is_valid():
            error = _import(request, project, import_form.cleaned_data["file"], user)
            if not error:
                return redirect("must_never_break", slug)
    elif request.method == "POST":
        add_form = MustNeverBreakForm(request.POST)
        if add_form.is_valid():
            try:
                case = must_never_break_add(project=project, user=user, **add_form.cleaned_data)
            except CompareError as refused:
                error = str(refused)
            else:
                messages.info(request, f"Added: {case.qid} must keep {case.docid} in its top 3.")
                return redirect("must_never_break", slug)
    context = {
        "project": project,
        "cases": project.must_never_break.select_related("added_by").order_by("qid", "docid"),
        "add_form": add_form,
        "import_form": import_form,
        "error": error,
        "releases": project.releases.order_by("-number")[:1],
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "evaluation/compare_must_never_break.html", context, status=status)


def _import(request: HttpRequest, project: Any, upload: Any, user: User | None) -> str:
    """Import an uploaded list; the error's text, or "" when it went in."""
    shown = Path(upload.name or "must-never-break.txt").name
    with tempfile.NamedTemporaryFile(suffix=".txt") as kept:
        for chunk in upload.chunks():
            kept.write(chunk)
        kept.flush()
        try:
            count = must_never_break_import(project=project, path=kept.name, shown=shown, user=user)
        except CompareError as error:
            return str(error)
    messages.info(request, f"Imported {count} case{'s' if count != 1 else ''} from {shown}.")
    return ""


@login_required
@require_POST
def must_never_break_remove_view(request: HttpRequest, slug: str, case_id: int) -> HttpResponse:
    access = project_for_lead(request, slug)
    if must_never_break_remove(project=access.project, case_id=case_id):
        messages.info(request, "Removed the case.")
    return redirect("must_never_break", slug)


@login_required
def must_never_break_download(request: HttpRequest, slug: str) -> HttpResponse:
    access = project_for_lead(request, slug)
    text = must_never_break_export(project=access.project)
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    filename = f"{access.project.slug}-must-never-break.txt"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
