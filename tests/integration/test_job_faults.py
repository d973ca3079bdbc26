"""Faults during a background job on a real Celery worker (Redis): every job still ends.

The worker runs with small job timeouts and an embedded beat (the reaper every second); the
job is a slow handler reporting progress, so that each fault lands mid-job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from annotation.services import project_create
from assay.celery import app
from jobs.models import Job, JobState
from jobs.services import job_create, job_enqueue
from tests.integration.conftest import (
    REDIS_URL,
    REPO,
    _drop_connections,
    database_url_of_test_db,
    redis_is_up,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FAST_JOBS = {
    "JOB_HEARTBEAT_INTERVAL": "1",
    "JOB_HEARTBEAT_TIMEOUT": "3",
    "JOB_REAP_INTERVAL": "1",
    "JOB_QUEUED_TIMEOUT": "5",
    "JOB_RETRY_BACKOFF": "0",
    "JOB_TIME_LIMIT": "60",
}


def slow_job(job: Job, progress: Any) -> dict[str, Any]:
    """A job of `seconds` seconds that reads the database and reports progress all along (run
    by the worker). It reads as a real handler does: in a worker the progress goes through the
    heartbeat thread's connection, so a fault on the handler's own shows only when it uses it."""
    steps = int(job.params["seconds"] * 10)
    for step in range(steps):
        time.sleep(0.1)
        Job.objects.filter(pk=job.pk).exists()
        progress(step / steps, f"step {step}")
    return {"summary": "slept"}


class Worker:
    """A Celery worker process group (prefork, one child, embedded beat) we can kill."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, DATABASE_URL=database_url_of_test_db(), CELERY_BROKER_URL=REDIS_URL)
        env.update(FAST_JOBS, MEDIA_ROOT=str(settings.MEDIA_ROOT))
        env["DJANGO_SETTINGS_MODULE"] = "assay.settings.base"
        env.setdefault("SECRET_KEY", "worker-in-tests")
        command = [sys.executable, "-m", "celery", "-A", "assay", "worker", "--pool=prefork",
                   "--concurrency=1", "--loglevel=WARNING", "--without-heartbeat",
                   "--without-gossip", "--without-mingle", "-B",
                   f"--schedule={self.tmp / 'beat-schedule'}"]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True)

    def kill(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    if not redis_is_up():
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    settings.MEDIA_ROOT = tmp_path / "media"
    app.conf.update(broker_url=REDIS_URL, task_always_eager=False)
    _drop_connections()
    app.connection_for_write().default_channel.client.flushdb()
    process = Worker(tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        app.conf.update(task_always_eager=True)
        _drop_connections()


def started_job(seconds: float) -> Job:
    project = project_create(slug="faults", name="Faults")
    handler = "tests.integration.test_job_faults.slow_job"
    job = job_create(project=project, kind="test", handler=handler, params={"seconds": seconds})
    job_enqueue(job)
    wait_for(lambda: state(job)[0] == JobState.RUNNING and state(job)[1] > 0.1)
    return job


def state(job: Job) -> tuple[str, float, int]:
    job.refresh_from_db()
    return job.state, job.progress, job.attempts


def ends_done(job: Job, timeout: float = 40) -> Job:
    wait_for(lambda: state(job)[0] in (JobState.DONE, JobState.FAILED), timeout)
    assert job.state == JobState.DONE, job.error
    return job


def test_a_job_whose_worker_child_is_killed_is_run_again_and_ends_done(worker: Worker) -> None:
    job = started_job(seconds=4)
    child = int(job.worker.rsplit(":", 1)[1])
    assert child != worker.process.pid  # type: ignore[union-attr]
    os.kill(child, signal.SIGKILL)
    assert ends_done(job).attempts == 2


def test_a_job_whose_worker_is_killed_and_restarted_ends_done(worker: Worker) -> None:
    job = started_job(seconds=4)
    worker.kill()
    time.sleep(1)
    assert state(job)[0] == JobState.RUNNING  # nobody to say otherwise
    worker.start()
    assert ends_done(job).attempts == 2


def test_a_job_whose_database_connection_is_terminated_ends_done(worker: Worker) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    job = started_job(seconds=4)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1
    assert ends_done(job).attempts == 2
