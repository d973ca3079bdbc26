"""The lead's pool page: runs and pool statistics (building a new pool opens it for judging:
`judging.views_lead.pool_create`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.access import Access, project_for_lead

from .pooling import pool_stats
from .services import current_pool, pool_entries


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
def pool_detail(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    project = access.project
    pool = current_pool(project)
    stats = None
    if pool is not None:
        stats = pool_stats(pool_entries(pool), [run.name for run in pool.runs.all()])
    context = {"project": project, "pool": pool, "stats": stats, "runs": project.runs.all()}
    return render(request, "pooling/pool_detail.html", context)
