"""The project's front page: what there is to judge and how far judging has come.

It lives in judging, not in annotation, because it reads the current pool and the judging
progress: annotation sits below pooling and judging and never imports them.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.access import Access, project_for_member

from .services import current_pool, judging_summary, progress_of


def _get_project_for_member(request: HttpRequest, slug: str) -> Access:
    return project_for_member(request, slug)


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_member(request, slug)
    project = access.project
    pool = current_pool(project)
    context = {
        "access": access,
        "project": project,
        "pool": pool,
        "progress": progress_of(pool=pool, user=request.user) if pool else None,  # type: ignore[arg-type]
    }
    if access.is_lead:
        context["counts"] = {
            "documents": project.documents.count(),
            "queries": project.queries.count(),
            "runs": project.runs.count(),
            "pool items": pool.items.count() if pool else 0,
        }
        context["summary"] = judging_summary(pool=pool) if pool else []
    return render(request, "judging/project_detail.html", context)
