"""The lead's pool page: runs, pool statistics, and the state of the latest pool build
(building a new pool opens it for judging: `judging.views_lead.pool_create`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.access import Access, project_for_lead
from jobs.models import JobState
from jobs.services import latest_job

from .pooling import pool_stats
from .services import POOL_BUILD, current_pool, pool_entries
from .views_runs import runs_context

SHOWN_BUILD_STATES = (JobState.QUEUED, JobState.RUNNING, JobState.FAILED)


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
def pool_detail(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    project = access.project
    build = latest_job(project=project, kind=POOL_BUILD)
    if build is not None and build.state not in SHOWN_BUILD_STATES:
        build = None  # built (the pool below is it) or discarded
    if request.htmx:  # type: ignore[attr-defined]
        # Polled while the build runs; once it has ended the whole page changes (a new pool,
        # or the failure with its buttons), so the browser loads it again.
        if build is None or not build.active:
            return HttpResponse(headers={"HX-Refresh": "true"})
        return render(
            request, "pooling/pool_detail.html#build", {"project": project, "build": build}
        )
    pool = current_pool(project)
    stats = None
    if pool is not None:
        stats = pool_stats(pool_entries(pool), [run.name for run in pool.runs.all()])
    context = {
        "project": project, "pool": pool, "stats": stats, "runs": project.runs.all(),
        "build": build,
    }  # fmt: skip
    context.update(runs_context(project))  # the Runs and Queries sections (views_runs.py)
    return render(request, "pooling/pool_detail.html", context)
