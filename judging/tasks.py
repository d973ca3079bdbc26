"""Celery tasks of judging: thin wrappers that take ids and call one service."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction

from annotation.models import Project
from pooling.models import Run
from pooling.services import PoolingError

from .services import pool_open

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
@transaction.atomic
def pool_open_task(project_id: int, run_ids: list[int], depth: int, seed: int) -> int | None:
    """Build a pool and open it for judging; idempotent: a pool with the same project, depth,
    seed and runs is reused.

    The project row is locked first, so that a delivery of the same task while the first is
    still building (a broker's visibility timeout running out on a long build) waits for it
    and then finds its pool, instead of building a second one.
    """
    project = Project.objects.select_for_update().get(pk=project_id)
    runs = list(Run.objects.filter(project=project, pk__in=run_ids).order_by("name"))
    try:
        if len(runs) != len(set(run_ids)):
            raise PoolingError("some of the runs asked for are not this project's")
        existing = project.pools.filter(depth=depth, seed=seed).order_by("pk")
        for pool in existing.prefetch_related("runs"):
            if {r.pk for r in pool.runs.all()} == {r.pk for r in runs}:
                return pool.pk
        return pool_open(project=project, runs=runs, depth=depth, seed=seed).pk
    except PoolingError as error:
        # Not transient: retrying cannot help, so report it and stop.
        log.warning("pool for project %s not built: %s", project.slug, error)
        return None
