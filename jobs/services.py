"""Creating, publishing, retrying, discarding and reaping jobs (see `jobs.models`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from annotation.models import Project

from .errors import JobStateError, QueueUnavailable
from .models import Job, JobState
from .run import files_remove
from .tasks import job_publish

log = logging.getLogger(__name__)


def job_create(
    *,
    project: Project,
    kind: str,
    handler: str,
    params: dict[str, Any],
    files: Sequence[str | Path] = (),
    user: User | None = None,
) -> Job:
    """A queued job; publish it with `job_enqueue` once the transaction has committed."""
    return Job.objects.create(
        project=project,
        kind=kind,
        handler=handler,
        params=params,
        files=[str(name) for name in files],
        created_by=user,
        max_attempts=settings.JOB_MAX_ATTEMPTS,
        heartbeat_at=timezone.now(),
    )


def job_enqueue(job: Job) -> None:
    """Publish a committed job. If the queue is unreachable the job is withdrawn — its row
    (and the records that cascade from it) and its files deleted — and QueueUnavailable
    raised, so that nothing is left waiting for a message that was never sent."""
    try:
        job_publish(job.pk)
    except QueueUnavailable:
        files_remove(job)
        Job.objects.filter(pk=job.pk).delete()
        raise


def job_retry(*, job: Job) -> None:
    """Queue a job that failed with a retryable error again, with fresh attempts."""
    reopened = Job.objects.filter(pk=job.pk, state=JobState.FAILED, retryable=True).update(
        state=JobState.QUEUED, attempts=0, progress=0.0, message="queued again", error="",
        heartbeat_at=timezone.now(), finished_at=None,
    )  # fmt: skip
    if not reopened:
        raise JobStateError("only a job that failed for a reason a retry may cure can be retried")
    try:
        job_publish(job.pk)
    except QueueUnavailable:
        Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
            state=JobState.FAILED, error=job.error, message=job.message
        )
        raise


def job_discard(*, job: Job) -> None:
    """Abandon a failed job: it ends `discarded` and its files are deleted."""
    if not Job.objects.filter(pk=job.pk, state=JobState.FAILED).update(
        state=JobState.DISCARDED, retryable=False, message="discarded"
    ):
        raise JobStateError("only a failed job can be discarded")
    files_remove(job)


def job_cancel(*, job: Job) -> None:
    """Stop a queued or running job: a queued one ends `discarded` at once; a running one is
    asked to stop, and its handler ends it at its next check (`run.job_check_cancel`)."""
    now = timezone.now()
    if Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
        state=JobState.DISCARDED, cancel_requested=True, message="cancelled before it started",
        finished_at=now, retryable=False,
    ):  # fmt: skip
        files_remove(job)
        return
    if not Job.objects.filter(pk=job.pk, state=JobState.RUNNING).update(cancel_requested=True):
        raise JobStateError("only a queued or running job can be cancelled")


@dataclass
class Reaped:
    """What one pass of the reaper did, by job id."""

    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    republished: list[int] = field(default_factory=list)
    cleaned: list[int] = field(default_factory=list)
    discarded: list[int] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {name: len(ids) for name, ids in vars(self).items()}


def reap(*, now: datetime | None = None) -> Reaped:
    """End or restart the jobs nobody is running any more. Safe to run anywhere, any number
    of times at once: every change is a compare-and-set on the state it saw.

    - running, heartbeat older than JOB_HEARTBEAT_TIMEOUT: its worker died. Queued and
      published again while attempts are left, else failed (retryable);
    - queued, not picked up within JOB_QUEUED_TIMEOUT: its message was lost; published again;
    - failed for a reason a retry may cure, and left so for JOB_KEEP_FAILED_DAYS: nobody is
      going to retry it; discarded (its uploaded file would otherwise stay for ever);
    - ended for good (done, discarded, failed for a reason a retry cannot cure) but still
      holding files: the files are deleted.
    """
    now = now or timezone.now()
    reaped = Reaped()
    stale = now - timedelta(seconds=settings.JOB_HEARTBEAT_TIMEOUT)
    for job in Job.objects.filter(state=JobState.RUNNING, heartbeat_at__lt=stale):
        _reap_running(job, stale, now, reaped)
    lost = now - timedelta(seconds=settings.JOB_QUEUED_TIMEOUT)
    for job in Job.objects.filter(state=JobState.QUEUED, heartbeat_at__lt=lost):
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED, heartbeat_at__lt=lost).update(
            heartbeat_at=now
        ):
            _publish(job, reaped.republished)
    forgotten = now - timedelta(days=settings.JOB_KEEP_FAILED_DAYS)
    abandoned = Job.objects.filter(state=JobState.FAILED, retryable=True, finished_at__lt=forgotten)
    for pk in abandoned.values_list("pk", flat=True):
        if Job.objects.filter(pk=pk, state=JobState.FAILED, retryable=True).update(
            state=JobState.DISCARDED, retryable=False,
            message=f"discarded: not retried within {settings.JOB_KEEP_FAILED_DAYS} days",
        ):  # fmt: skip
            reaped.discarded.append(pk)
    ended = Q(state__in=[JobState.DONE, JobState.DISCARDED]) | Q(
        state=JobState.FAILED, retryable=False
    )
    for job in Job.objects.filter(ended).exclude(files=[]):
        files_remove(job)
        reaped.cleaned.append(job.pk)
    return reaped


def _reap_running(job: Job, stale: datetime, now: datetime, reaped: Reaped) -> None:
    seen = Job.objects.filter(
        pk=job.pk, state=JobState.RUNNING, attempts=job.attempts, heartbeat_at__lt=stale
    )
    silent = "the worker running it stopped (killed, or lost its connection)"
    if job.attempts >= job.max_attempts:
        error = f"Gave up after {job.attempts} attempts: {silent}."
        if seen.update(
            state=JobState.FAILED, error=error, message="failed", retryable=True, finished_at=now
        ):
            reaped.failed.append(job.pk)
        return
    if seen.update(state=JobState.QUEUED, message=f"re-queued: {silent}", heartbeat_at=now):
        _publish(job, reaped.requeued)


def _publish(job: Job, done: list[int]) -> None:
    try:
        job_publish(job.pk)
    except QueueUnavailable:
        log.warning("job %s stays queued: the broker is down", job.pk)
    else:
        done.append(job.pk)


def latest_job(*, project: Project, kind: str) -> Job | None:
    """The project's most recent job of a kind (the pool page shows its build)."""
    return Job.objects.filter(project=project, kind=kind).order_by("-created_at", "-pk").first()
