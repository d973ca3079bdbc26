"""The one Celery task every background job runs through, and the reaper's task."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import connection
from kombu.exceptions import OperationalError as BrokerError

from .errors import QueueUnavailable
from .run import job_execute

log = logging.getLogger(__name__)


@shared_task(
    acks_late=True,  # a worker that dies mid-job leaves the message to be delivered again
    reject_on_worker_lost=True,  # ... including when only its child process is killed
    time_limit=settings.JOB_TIME_LIMIT + 60,
    soft_time_limit=settings.JOB_TIME_LIMIT,
)
def job_run(job_id: int) -> None:
    """Run the job if this delivery may claim it; publish it again after a transient error."""
    pause = job_execute(job_id, heartbeat=_in_worker())
    if pause is not None:
        try:
            job_publish(job_id, countdown=pause)
        except QueueUnavailable:
            log.warning("job %s stays queued: the broker is down; the reaper publishes it", job_id)


@shared_task
def jobs_reap() -> dict[str, int]:
    """Run by Celery beat every JOB_REAP_INTERVAL seconds, and once when a worker starts."""
    from .services import reap  # services publishes through this module

    return reap().counts()


def job_publish(job_id: int, *, countdown: float = 0) -> None:
    """Hand a committed job to the queue, failing fast (no retry loop) when the broker is
    unreachable. In eager mode (no broker) the job runs here and now."""
    try:
        job_run.apply_async((job_id,), countdown=countdown or None, retry=False)
    except (BrokerError, OSError) as error:
        log.warning("could not publish job %s: %s", job_id, error)
        raise QueueUnavailable() from error


def _in_worker() -> bool:
    # Eager: the request (or command) process is the worker; a second connection writing the
    # heartbeat could not see an uncommitted job and would contend with SQLite's one writer.
    return not job_run.request.is_eager and connection.vendor != "sqlite"


@worker_ready.connect
def _reap_when_a_worker_starts(**_: Any) -> None:
    # A worker killed and started again finds the jobs it was running: their heartbeat stopped.
    jobs_reap.delay()
