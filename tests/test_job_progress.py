"""A worker's progress reaches the page while the job's work is still inside one transaction
(an all-or-nothing import): the heartbeat thread writes it on its own connection."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction

from annotation.models import Document
from jobs.errors import JobLost
from jobs.models import Job, JobState
from jobs.run import job_execute
from jobs.services import job_create
from tests.conftest import small_project

pytestmark = pytest.mark.django_db(transaction=True)

SEEN: dict[str, Any] = {}


def read_elsewhere(job_id: int) -> tuple[float, str, int]:
    """The job's progress and the project's documents as another connection sees them."""
    out: list[tuple[float, str, int]] = []

    def read() -> None:
        try:
            job = Job.objects.get(pk=job_id)
            out.append((job.progress, job.message, Document.objects.filter(docid="t1").count()))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    return out[0]


def wait_for_progress(job_id: int, fraction: float) -> tuple[float, str, int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen = read_elsewhere(job_id)
        if seen[0] == fraction:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"progress {fraction} never became visible: {seen}")


def progress_inside_a_transaction(job: Job, progress) -> dict[str, Any]:
    with transaction.atomic():
        Document.objects.create(project_id=job.project_id, docid="t1", text="x")
        progress(0.5, "half way")
        SEEN["during"] = wait_for_progress(job.pk, 0.5)
    return {"summary": "done"}


def progress_after_losing_the_job(job: Job, progress) -> dict[str, Any]:
    progress(0.1, "started")
    wait_for_progress(job.pk, 0.1)
    Job.objects.filter(pk=job.pk).update(attempts=job.attempts + 1)  # another attempt took it
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            time.sleep(0.6)  # past the progress throttle
            progress(0.2, "still going")
        except JobLost:
            SEEN["lost"] = True
            raise
    return {"summary": "should not end"}


@pytest.fixture
def on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a second connection seeing committed rows only: PostgreSQL")


def test_progress_is_visible_while_the_work_is_uncommitted(on_postgresql: None) -> None:
    project = small_project()
    job = job_create(
        project=project, kind="test", handler=f"{__name__}.progress_inside_a_transaction", params={}
    )
    SEEN.clear()
    assert job_execute(job.pk, heartbeat=True) is None
    progress, message, documents = SEEN["during"]
    # The bar moved, and the work stayed invisible until it committed.
    assert (progress, message, documents) == (0.5, "half way", 0)
    job.refresh_from_db()
    assert job.state == JobState.DONE and Document.objects.filter(docid="t1").count() == 1


def test_an_attempt_that_lost_its_job_stops_at_its_next_report(on_postgresql: None) -> None:
    project = small_project()
    job = job_create(
        project=project, kind="test", handler=f"{__name__}.progress_after_losing_the_job", params={}
    )
    SEEN.clear()
    job_execute(job.pk, heartbeat=True)
    assert SEEN.get("lost") is True
    job.refresh_from_db()
    assert job.state == JobState.RUNNING  # left to the attempt that owns it now
