"""Running one attempt of a job: claim it, keep its heartbeat, call its handler, end it.

A delivery runs the job only if it wins an atomic UPDATE from `queued` (or from `running`
with a stopped heartbeat) to `running`: a duplicate or redelivered message for a job that is
done, failed or running elsewhere does nothing. Every write of an attempt is conditioned on
the job still being `running` at this attempt's number, so a worker that was given up for
dead cannot overwrite the state its successor wrote.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.db.models import F, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from .errors import JobCancelled, JobInputError, JobLost
from .models import Job, JobState

log = logging.getLogger(__name__)

Progress = Callable[[float, str], None]
Handler = Callable[[Job, Progress], dict[str, Any] | None]

# Errors a later attempt may not meet: the database or the network went away for a while.
TRANSIENT: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, ConnectionError)
PROGRESS_EVERY = 0.5  # seconds between progress writes: a smooth bar, few UPDATEs
REASON_LIMIT = 300


def job_claim(job_id: int) -> Job | None:
    """Take the job for this attempt, or None when this delivery must do nothing."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.JOB_HEARTBEAT_TIMEOUT)
    claimable = Q(state=JobState.QUEUED) | Q(state=JobState.RUNNING, heartbeat_at__lt=stale)
    taken = Job.objects.filter(claimable, pk=job_id, attempts__lt=F("max_attempts")).update(
        state=JobState.RUNNING,
        attempts=F("attempts") + 1,
        heartbeat_at=now,
        started_at=now,
        worker=f"{socket.gethostname()}:{os.getpid()}"[:200],
        progress=0.0,
        message="starting",
        error="",
    )
    return Job.objects.get(pk=job_id) if taken else None


def job_execute(job_id: int, *, heartbeat: bool) -> float | None:
    """Run one delivery of a job; returns the seconds after which to publish it again (a
    transient error with attempts left), else None. Never raises for the handler's errors:
    the job's state records them.

    ``heartbeat`` starts a thread that keeps the job's heartbeat fresh on its own database
    connection; without it (eager Celery, SQLite) only progress reports refresh it.
    """
    job = job_claim(job_id)
    if job is None:
        log.info("job %s: not claimable by this delivery (a duplicate); nothing done", job_id)
        return None
    beat = Heartbeat(job) if heartbeat else None
    try:
        return _attempt(job, beat)
    finally:
        if beat is not None:
            beat.stop()


def job_run_inline(job_id: int) -> None:
    """Run a job to its end in this process (a command), sleeping between transient retries."""
    while (pause := job_execute(job_id, heartbeat=False)) is not None:
        time.sleep(pause)


def _attempt(job: Job, beat: Heartbeat | None) -> float | None:
    try:
        handler: Handler = import_string(job.handler)
        result = handler(job, _progress(job, beat))
    except JobLost:
        log.warning("job %s: attempt %s lost the job to another; stopped", job.pk, job.attempts)
    except JobInputError as error:
        _end(job, JobState.FAILED, error=str(error), retryable=False)
    except JobCancelled as error:
        _end(job, JobState.DISCARDED, message=(str(error) or "cancelled")[:500], retryable=False)
    except TRANSIENT as error:
        return _transient(job, error)
    except SoftTimeLimitExceeded:
        limit = settings.JOB_TIME_LIMIT
        _end(
            job, JobState.FAILED, error=f"Stopped after {limit} s (JOB_TIME_LIMIT).", retryable=True
        )
    except Exception as error:
        # A defect, not bad input: record a short reason, keep the traceback in the log, and
        # keep the job's files so that a retry after the fix can run it.
        log.exception("job %s (%s) failed unexpectedly", job.pk, job.handler)
        _end(job, JobState.FAILED, error=f"Internal error: {_reason(error)}", retryable=True)
    else:
        summary = (result or {}).get("summary", "done")
        _end(job, JobState.DONE, result=result, progress=1.0, message=str(summary)[:500])
    return None


def _transient(job: Job, error: BaseException) -> float | None:
    reason = _reason(error)
    if job.attempts >= job.max_attempts:
        text = f"Gave up after {job.attempts} attempts; the last failed with: {reason}"
        _end(job, JobState.FAILED, error=text, retryable=True)
        return None
    log.warning("job %s attempt %s: transient error, re-queued: %s", job.pk, job.attempts, reason)
    moved = _fresh_write(
        lambda: _owned(job).update(
            state=JobState.QUEUED,
            message=f"retrying after a transient error ({reason})"[:500],
            heartbeat_at=timezone.now(),
        )
    )
    if not moved:
        return None
    return float(settings.JOB_RETRY_BACKOFF * 2 ** (job.attempts - 1))


def _end(job: Job, state: JobState, **fields: Any) -> None:
    now = timezone.now()
    if state == JobState.FAILED:
        fields.setdefault("message", "failed")
    ended = _fresh_write(
        lambda: _owned(job).update(state=state, finished_at=now, heartbeat_at=now, **fields)
    )
    if ended and (state == JobState.DONE or not fields.get("retryable")):
        files_remove(job)


def job_keep_result(job: Job, result: dict[str, Any]) -> None:
    """Record an attempt's result inside the transaction that stores its work, so that the
    two commit together: an attempt restarted after that commit finds the result (the work is
    done; its handler returns it), and an attempt that no longer owns the job stores nothing
    (JobLost rolls its transaction back)."""
    if not _owned(job).update(result=result):
        raise JobLost(f"job {job.pk} is no longer this attempt's")
    job.result = result


def job_check_cancel(job: Job) -> None:
    """Raise JobCancelled when a lead asked to stop the job: a handler calls it between steps,
    so work already stored is kept and a later run resumes after it."""
    if Job.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise JobCancelled("cancelled by a lead; the work stored before is kept")


def files_remove(job: Job) -> None:
    """Delete the files a job owns (an upload waiting for its worker), then forget them."""
    for name in job.files:
        Path(name).unlink(missing_ok=True)
    Job.objects.filter(pk=job.pk).update(files=[])
    job.files = []


def _owned(job: Job) -> Any:
    """This attempt's job, as long as this attempt still owns it."""
    return Job.objects.filter(pk=job.pk, state=JobState.RUNNING, attempts=job.attempts)


def _fresh_write(write: Callable[[], int]) -> int:
    """A state write after a failure: on a fresh connection (the one the handler used may be
    the one that broke), tried a few times, so that a job is never left `running` because
    writing its end failed too. Inside a caller's transaction (eager Celery in a test or a
    request) the caller's connection is kept, as closing it would end that transaction."""
    for pause in (0.0, 0.5, 2.0):
        time.sleep(pause)
        if not connection.in_atomic_block:
            with contextlib.suppress(DatabaseError):
                connection.close()
        try:
            return write()
        except TRANSIENT as error:
            log.warning("writing a job's state failed, trying again: %s", error)
    log.error("could not write a job's state; the reaper will end it")
    return 0


def _progress(job: Job, beat: Heartbeat | None) -> Progress:
    """The handler's progress callback. With a heartbeat thread (a worker), the thread writes
    the progress on its own connection: a handler inside a long transaction (an all-or-nothing
    import) would otherwise hide its progress from the page until it commits, and hold the
    job's row locked against the heartbeat and the reaper."""
    last = 0.0

    def report(fraction: float, message: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_EVERY and fraction < 1.0:
            return
        last = now
        fields = {"progress": min(max(fraction, 0.0), 1.0), "message": message[:500]}
        if beat is not None:
            beat.report(fields)
            return
        if connection.in_atomic_block:
            # No thread of its own to write it (eager Celery, SQLite): on the handler's
            # connection, inside its transaction nobody else could see it before the commit,
            # and in the middle of a COPY (an import streaming rows) it would wait for itself.
            return
        if not _owned(job).update(heartbeat_at=timezone.now(), **fields):
            raise JobLost(f"job {job.pk} is no longer this attempt's")

    return report


def _reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()
    first = text[0] if text else type(error).__name__
    return first[:REASON_LIMIT]


class Heartbeat:
    """Keeps `heartbeat_at` fresh while a long step reports no progress, and writes the
    progress the handler reports, on its own database connection (closed when it stops): the
    reaper tells a dead worker by a stopped heartbeat."""

    def __init__(self, job: Job) -> None:
        self._job_id = job.pk
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._pending: dict[str, Any] = {}
        self._lost = False
        self._thread = threading.Thread(
            target=self._run,
            args=(job.pk, job.attempts),
            name=f"job-{job.pk}-heartbeat",
            daemon=True,
        )
        self._thread.start()

    def report(self, fields: dict[str, Any]) -> None:
        """Have the thread write these fields now (from the handler's thread); raises
        JobLost once a write found the job no longer this attempt's."""
        if self._lost:
            raise JobLost(f"job {self._job_id} is no longer this attempt's")
        with self._lock:
            self._pending = fields
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=settings.JOB_HEARTBEAT_INTERVAL + 5)

    def _run(self, job_id: int, attempt: int) -> None:
        owned = Job.objects.filter(pk=job_id, state=JobState.RUNNING, attempts=attempt)
        try:
            while True:
                self._wake.wait(settings.JOB_HEARTBEAT_INTERVAL)
                self._wake.clear()
                if self._stop.is_set():
                    return
                with self._lock:
                    fields, self._pending = self._pending, {}
                try:
                    if not owned.update(heartbeat_at=timezone.now(), **fields):
                        self._lost = True
                        return  # the job ended or is another attempt's now
                except DatabaseError as error:
                    log.warning("job %s heartbeat failed, reconnecting: %s", job_id, error)
                    with contextlib.suppress(DatabaseError):
                        connection.close()
        finally:
            with contextlib.suppress(DatabaseError):
                connection.close()  # this thread's own connection
