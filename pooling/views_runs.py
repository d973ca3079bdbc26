"""The pool page's runs and queries: download the queries for the team's systems, upload
their runs, run the built-in baselines; each upload and baseline run is a background job whose
progress the page polls (`runs_status`)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_lead
from annotation.models import Project
from formats.beir import write_queries
from jobs.errors import QueueUnavailable
from jobs.models import Job, JobState
from jobs.services import job_enqueue, latest_job
from jobs.uploads import too_big

from .baselines import BASELINES
from .services import PoolingError
from .services_runs import (
    MAX_BASELINE_K,
    RUN_BASELINES,
    RUN_IMPORT,
    RunReport,
    baselines_queue,
    queries_for_export,
    query_rows,
    run_reports,
    runs_upload_create,
)

# format -> (media type, file extension, label); one entry per writer of formats.beir
QUERY_DOWNLOADS = {
    "tsv": ("text/tab-separated-values", "tsv", "TSV (qid, text)"),
    "jsonl": ("application/x-ndjson", "jsonl", "JSONL (qid, text, description, stratum)"),
    "xml": ("application/xml", "xml", "TREC topics XML"),
}


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


def _back(slug: str, anchor: str) -> HttpResponse:
    return redirect(f"{reverse('pool_detail', args=[slug])}#{anchor}")


# --------------------------------------------------------------------------- queries out


@login_required
def queries_download(request: HttpRequest, slug: str) -> HttpResponseBase:
    access = _get_project_for_lead(request, slug)
    fmt = request.GET.get("format", "tsv")
    if fmt not in QUERY_DOWNLOADS:
        known = ", ".join(QUERY_DOWNLOADS)
        return HttpResponseBadRequest(f"format: one of {known}", content_type="text/plain")
    without = request.GET.get("without_runs", "") in ("1", "on", "true")
    queries = queries_for_export(project=access.project, without_runs=without)
    pieces = write_queries(query_rows(queries), fmt)
    try:
        # The first piece is made before the answer starts: a file the readers would misread
        # (see write_queries_tsv) is refused with a 400, not cut off mid-download.
        first = next(pieces, "")
    except ValueError as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain")
    media_type, extension, _ = QUERY_DOWNLOADS[fmt]
    response = StreamingHttpResponse(
        chain([first], pieces), content_type=f"{media_type}; charset=utf-8"
    )
    name = f"{slug}-queries{'-without-runs' if without else ''}.{extension}"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# --------------------------------------------------------------------------- runs in


@login_required
@require_POST
def runs_upload(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    # The announced length first (the CSRF check has parsed the form by now, but nothing of it
    # is kept), then the files themselves, for a body sent without one.
    refusal = _too_big(request.META.get("CONTENT_LENGTH"))
    uploads = [] if refusal else request.FILES.getlist("run_files")
    refusal = refusal or _too_big(sum(upload.size or 0 for upload in uploads))
    if refusal:
        messages.error(request, refusal)
        return _back(slug, "runs")
    try:
        job = runs_upload_create(
            project=access.project,
            uploads=uploads,
            name=request.POST.get("name", "").strip(),
            user=request.user,  # type: ignore[arg-type]
        )
        job_enqueue(job)  # committed by now: views run in autocommit
    except (PoolingError, QueueUnavailable) as error:
        messages.error(request, str(error))
    else:
        files = f"{len(uploads)} run file{'s' if len(uploads) != 1 else ''}"
        messages.info(request, f"Importing {files}: all are stored, or none.")
    return _back(slug, "runs")


def _too_big(size: object) -> str:
    limit = settings.RUN_UPLOAD_MAX_BYTES
    return too_big(size, limit, setting="RUN_UPLOAD_MAX_BYTES", command="import_runs", what="run")


@login_required
@require_POST
def baselines_start(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    try:
        job = baselines_queue(
            project=access.project,
            k=_whole(request.POST.get("k", "100")),
            only=request.POST.getlist("only") or [],
            user=request.user,  # type: ignore[arg-type]
        )
        job_enqueue(job)
    except (PoolingError, QueueUnavailable) as error:
        messages.error(request, str(error))
    else:
        messages.info(request, f"Running {', '.join(job.params['only'])}.")
    return _back(slug, "runs")


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0  # refused by the service, which states the range


@login_required
def runs_status(request: HttpRequest, slug: str) -> HttpResponse:
    """Polled (htmx) while an upload or a baseline run is under way; once none is, the page is
    loaded again, as the runs and their notes have changed."""
    access = _get_project_for_lead(request, slug)
    context = {"project": access.project, **_jobs_context(access.project)}
    if not context["runs_active"]:
        return HttpResponse(headers={"HX-Refresh": "true"})
    return render(request, "pooling/pool_detail.html#runs-jobs", context)


# --------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class RunJob:
    """The latest job of a kind, as the page shows it."""

    title: str
    job: Job
    reports: list[RunReport]


def runs_context(project: Project) -> dict[str, Any]:
    """What the pool page's Runs and Queries sections show."""
    reports = run_reports(project)
    runs = list(project.runs.all())
    return {
        **_jobs_context(project),
        "run_rows": [(run, reports.get(run.pk)) for run in runs],
        "run_upload_limit": settings.RUN_UPLOAD_MAX_BYTES,
        "baseline_names": list(BASELINES),
        "max_baseline_k": MAX_BASELINE_K,
        "documents_count": project.documents.count(),
        "queries_count": project.queries.count(),
        "queries_without_runs": queries_for_export(project=project, without_runs=True).count(),
        "query_downloads": [(fmt, label) for fmt, (_, _, label) in QUERY_DOWNLOADS.items()],
    }


def _jobs_context(project: Project) -> dict[str, Any]:
    titles = {RUN_IMPORT: "Latest run import", RUN_BASELINES: "Latest baseline run"}
    shown: list[RunJob] = []
    for kind, title in titles.items():
        job = latest_job(project=project, kind=kind)
        if job is None or job.state == JobState.DISCARDED:
            continue
        results = (job.result or {}).get("runs", []) if job.state == JobState.DONE else []
        shown.append(RunJob(title, job, [RunReport.from_dict(data) for data in results]))
    return {"run_jobs": shown, "runs_active": any(item.job.active for item in shown)}
