"""Lead pages for search logs: upload (with progress), strata, sample preview and accept."""

from __future__ import annotations

import random

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_lead
from jobs.errors import QueueUnavailable
from jobs.services import job_enqueue
from jobs.uploads import too_big

from .charts import rank_frequency_svg
from .core import (
    DEFAULT_QUOTAS,
    SEED_LIMIT,
    STRATA,
    DefinitionError,
    StrataDefinition,
    parse_quotas,
    parse_seed,
)
from .models import QueryLog, QuerySample
from .options import DEFINITION_OPTIONS, describe_definition, requested_definition
from .services import (
    SamplingError,
    accepted_message,
    definition_ignored,
    log_create,
    sample_accept,
    sample_draw,
    stored_scheme,
)

_DEFINITION_KEPT = (
    "This project's strata definition was fixed by its first log: the cut points, failure "
    "thresholds, reformulation window and privacy option given were not used; the log is "
    "read with the project's definition."
)


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
def log_list(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    if request.method == "POST":
        # Checked on the announced length first (the CSRF check has parsed the form by now,
        # but nothing of it is kept), and on the file itself for a body sent without one.
        refusal = _too_big(request.META.get("CONTENT_LENGTH"))
        upload = None if refusal else request.FILES.get("log")
        if upload is not None:
            refusal = _too_big(upload.size)
        if refusal:
            messages.error(request, refusal)
            return redirect("log_list", slug=slug)
        if upload is None:
            messages.error(
                request, "Choose a log file (CSV, TSV, JSONL or Parquet, gzip accepted)."
            )
            return redirect("log_list", slug=slug)
        try:
            requested = _requested_definition(request)
            query_log = log_create(
                project=access.project,
                upload=upload,
                user=request.user,  # type: ignore[arg-type]
                columns=request.POST.get("columns", "").strip(),
                definition=requested,
            )
        except (SamplingError, DefinitionError) as error:
            messages.error(request, str(error))
            return redirect("log_list", slug=slug)
        try:
            job_enqueue(query_log.job)  # committed by now: views run in autocommit
        except QueueUnavailable as error:
            messages.error(request, str(error))
            return redirect("log_list", slug=slug)
        if definition_ignored(access.project, requested) is not None:
            messages.warning(request, _DEFINITION_KEPT)
        return redirect("log_detail", slug=slug, log_id=query_log.pk)
    stored = stored_scheme(access.project)
    context = {
        "project": access.project,
        "logs": access.project.logs.select_related("job"),
        "definition": stored or StrataDefinition(),
        "fixed": stored is not None,
        "described": describe_definition(stored or StrataDefinition()),
    }
    return render(request, "sampling/log_list.html", context)


def _too_big(size: object) -> str:
    """Why an upload of ``size`` bytes is refused, or "" when it is within the limit."""
    limit = settings.LOG_UPLOAD_MAX_BYTES
    return too_big(size, limit, setting="LOG_UPLOAD_MAX_BYTES", command="import_log", what="log")


def _requested_definition(request: HttpRequest) -> StrataDefinition | None:
    """The strata definition the upload form asks for, or None if it asks for none."""
    texts = {name: request.POST.get(name, "") for name in DEFINITION_OPTIONS}
    return requested_definition(**texts, mask_pii=request.POST.get("mask_pii") == "on")


def _log_context(access: Access, query_log: QueryLog) -> dict[str, object]:
    strata = query_log.strata or {}
    chart = rank_frequency_svg(strata.get("rank_frequency", []), strata.get("cut_ranks", []))
    used = strata.get("definition")
    return {
        "described": describe_definition(StrataDefinition.from_dict(used)) if used else "",
        "project": access.project,
        "log": query_log,
        "job": query_log.job,
        "strata": strata,
        # Safe: the chart is built from numbers and fixed labels only (annotation/charts.py).
        "chart": mark_safe(chart),
        "quotas": DEFAULT_QUOTAS,
        "strata_names": STRATA,
        "max_seed": SEED_LIMIT - 1,
        "samples": query_log.samples.all(),
    }


@login_required
def log_detail(request: HttpRequest, slug: str, log_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    logs = QueryLog.objects.select_related("job", "project")
    query_log = get_object_or_404(logs, pk=log_id, project=access.project)
    template = "sampling/log_detail.html"
    if request.htmx:  # type: ignore[attr-defined]
        template += "#status"  # the progress partial, polled while the worker runs
    return render(request, template, _log_context(access, query_log))


@login_required
@require_POST
def sample_create(request: HttpRequest, slug: str, log_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    query_log = get_object_or_404(QueryLog, pk=log_id, project=access.project)
    try:
        quotas = parse_quotas(
            ",".join(f"{name}={request.POST.get(name, '0') or 0}" for name in STRATA)
        )
        seed_text = request.POST.get("seed", "").strip()
        seed = parse_seed(seed_text) if seed_text else random.SystemRandom().randrange(2**31)
        sample = sample_draw(
            query_log=query_log,
            quotas=quotas,
            seed=seed,
            weighted=request.POST.get("weighted") == "on",
            user=request.user,  # type: ignore[arg-type]
        )
    except (SamplingError, ValueError) as error:
        messages.error(request, str(error))
        return redirect("log_detail", slug=slug, log_id=log_id)
    return redirect("sample_detail", slug=slug, sample_id=sample.pk)


@login_required
def sample_detail(request: HttpRequest, slug: str, sample_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    sample = get_object_or_404(QuerySample, pk=sample_id, project=access.project)
    context = {"project": access.project, "sample": sample, "log": sample.log}
    return render(request, "sampling/sample_detail.html", context)


@login_required
@require_POST
def sample_accept_view(request: HttpRequest, slug: str, sample_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    sample = get_object_or_404(QuerySample, pk=sample_id, project=access.project)
    try:
        accepted = sample_accept(sample=sample)
    except SamplingError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, accepted_message(accepted, access.project.name))
    return redirect("sample_detail", slug=slug, sample_id=sample_id)
