"""The lead's buttons on a failed job: retry it, or discard it (its files are deleted)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_lead

from .errors import JobStateError, QueueUnavailable
from .models import Job
from .services import job_cancel, job_discard, job_retry


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
@require_POST
def job_retry_view(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    job = get_object_or_404(Job, pk=job_id, project=access.project)
    try:
        job_retry(job=job)
    except (JobStateError, QueueUnavailable) as error:
        messages.error(request, str(error))
    else:
        messages.info(request, f"The {job.label} was queued again.")
    return redirect(_back(request, slug))


@login_required
@require_POST
def job_discard_view(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    job = get_object_or_404(Job, pk=job_id, project=access.project)
    try:
        job_discard(job=job)
    except JobStateError as error:
        messages.error(request, str(error))
    else:
        messages.info(request, f"The failed {job.label} was discarded.")
    return redirect(_back(request, slug))


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    job = get_object_or_404(Job, pk=job_id, project=access.project)
    try:
        job_cancel(job=job)
    except JobStateError as error:
        messages.error(request, str(error))
    else:
        messages.info(request, f"The {job.label} was asked to stop; what it stored is kept.")
    return redirect(_back(request, slug))


def _back(request: HttpRequest, slug: str) -> str:
    """The page the button was on (a local URL only), else the project's page."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return reverse("project_detail", args=[slug])
