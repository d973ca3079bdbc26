"""The judging page: one pool item at a time, graded with the keys 0-3, swapped in by htmx."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_member
from pooling.models import Pool

from .models import Grade
from .services import current_pool, item_next, judgment_submit, progress_of


def _get_project_for_judge(request: HttpRequest, slug: str) -> Access:
    # Leads may judge too; every member judges only through their own queue.
    return project_for_member(request, slug)


def _panel_context(access: Access, pool: Pool | None, request: HttpRequest) -> dict[str, Any]:
    item = item_next(pool=pool, user=request.user) if pool else None  # type: ignore[arg-type]
    return {
        "project": access.project,
        "pool": pool,
        "item": item,
        "grades": Grade.choices,
        "progress": progress_of(pool=pool, user=request.user) if pool else None,  # type: ignore[arg-type]
        "protocol": access.project.current_protocol(),
    }


@login_required
def judge(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_judge(request, slug)
    context = _panel_context(access, current_pool(access.project), request)
    return render(request, "judging/judge.html", context)


@login_required
@require_POST
def judge_submit(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    access = _get_project_for_judge(request, slug)
    pool = current_pool(access.project)
    if pool is None:
        raise Http404("this project has no pool yet")
    item = get_object_or_404(pool.items.select_related("pool__project"), pk=item_id)
    try:
        grade = int(request.POST["grade"])
        seconds = float(request.POST.get("seconds", "0") or 0)
        judgment_submit(item=item, user=request.user, grade=grade, seconds_spent=seconds)  # type: ignore[arg-type]
    except (KeyError, ValueError):
        return HttpResponseBadRequest("grade must be 0, 1, 2 or 3")
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect("judge", slug=slug)
    return render(request, "judging/judge.html#panel", _panel_context(access, pool, request))
