"""The lead's pool page: runs, pool statistics, and building a new pool."""

from __future__ import annotations

import random
from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from annotation.access import Access, project_for_lead
from judging.services import current_pool

from .pooling import pool_stats
from .services import pool_entries
from .tasks import pool_build_task


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


@login_required
def pool_create(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    if request.method != "POST":
        return redirect("pool_detail", slug=slug)
    run_ids = [int(pk) for pk in request.POST.getlist("runs") if pk.isdigit()]
    try:
        depth = int(request.POST.get("depth", "10"))
    except ValueError:
        depth = 0
    if not run_ids or not 1 <= depth <= 1000:
        messages.error(request, "Choose at least one run and a depth between 1 and 1000.")
        return redirect("pool_detail", slug=slug)
    seed = random.SystemRandom().randrange(2**31)
    task = partial(pool_build_task.delay, access.project.pk, run_ids, depth, seed)
    transaction.on_commit(task)
    messages.info(request, f"Building a depth-{depth} pool of {len(run_ids)} runs.")
    return redirect("pool_detail", slug=slug)
