"""Celery tasks of pooling: thin wrappers that take ids and call one service."""

from __future__ import annotations

import logging

from celery import shared_task

from annotation.models import Project

from .models import Run
from .services import PoolingError, pool_build

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
def pool_build_task(project_id: int, run_ids: list[int], depth: int, seed: int) -> int | None:
    """Build a pool; idempotent: a pool with the same project, depth, seed and runs is reused."""
    project = Project.objects.get(pk=project_id)
    runs = list(Run.objects.filter(project=project, pk__in=run_ids).order_by("name"))
    existing = project.pools.filter(depth=depth, seed=seed).order_by("pk").prefetch_related("runs")
    for pool in existing:
        if {r.pk for r in pool.runs.all()} == {r.pk for r in runs}:
            return pool.pk
    try:
        return pool_build(project=project, runs=runs, depth=depth, seed=seed).pk
    except PoolingError as error:
        # Not transient: retrying cannot help, so report it and stop.
        log.warning("pool for project %s not built: %s", project.slug, error)
        return None
