"""The lead's pool page: runs, pool statistics, and the state of the latest pool build
(building a new pool opens it for judging: `judging.views_lead.pool_create`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotation.access import Access, project_for_lead
from annotation.models import Project
from jobs.models import JobState
from jobs.services import latest_job

from .models import Pool
from .pooling import PoolStats, pool_stats
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
    context = {
        "project": project, "pool": pool, "stats": _stats(pool), "runs": project.runs.all(),
        "build": build, "pools": _history(project),
    }  # fmt: skip
    context.update(runs_context(project))  # the Runs and Queries sections (views_runs.py)
    return render(request, "pooling/pool_detail.html", context)


@login_required
def pool_view(request: HttpRequest, slug: str, pool_id: int) -> HttpResponse:
    """One pool, current or earlier, with its provenance: runs, depth, what it added."""
    access = _get_project_for_lead(request, slug)
    pool = get_object_or_404(access.project.pools.prefetch_related("runs"), pk=pool_id)
    context = {
        "project": access.project,
        "pool": pool,
        "stats": _stats(pool),
        "current": current_pool(access.project) == pool,
    }
    return render(request, "pooling/pool_view.html", context)


def _stats(pool: Pool | None) -> PoolStats | None:
    if pool is None:
        return None
    return pool_stats(pool_entries(pool), [run.name for run in pool.runs.all()])


def _history(project: Project) -> QuerySet[Pool]:
    pools = project.pools.select_related("created_by").prefetch_related("runs")
    return pools.order_by("-pk")
