"""Background jobs through the real URLs (eager Celery): every job ends, failures reach the
page that started the work, a refused start leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Role
from annotation.services import membership_set, project_create
from assay.celery import app
from formats.trec import RunRow
from jobs.errors import JobStateError
from jobs.models import Job, JobState
from jobs.run import job_check_cancel, job_execute
from jobs.services import job_cancel, job_create, reap
from pooling.models import Pool
from pooling.services import run_create
from sampling.models import QueryLog
from tests.conftest import World
from tests.test_sampling_web import make_log

UNREACHABLE = "redis://127.0.0.1:9/0"  # the discard port: nothing listens


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def broker_down() -> Iterator[None]:
    """Publishing goes to a closed port, as when Redis is down."""
    before = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    app.conf.update(broker_url=UNREACHABLE, task_always_eager=False)
    app._after_fork()  # drop pooled connections made for another broker setting
    try:
        yield
    finally:
        app.conf.update(before)
        app._after_fork()


def files_in(media: Path) -> list[Path]:
    return [path for path in media.rglob("*") if path.is_file()] if media.exists() else []


def post_log(client: Client, world: World, name: str = "log.csv", columns: str = ""):
    data = {"log": SimpleUploadedFile(name, make_log()), "columns": columns}
    return client.post(reverse("log_list", args=[world.project.slug]), data)


def shown(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


# --- refusing cleanly --------------------------------------------------------------------


def test_it_refuses_an_upload_when_the_task_queue_is_down_and_keeps_nothing(
    world: World, media: Path, broker_down: None
) -> None:
    response = post_log(world.client_for(world.lead), world)
    assert response.status_code == 302
    assert "task queue is unreachable" in shown(response)
    assert not QueryLog.objects.exists() and not Job.objects.exists()
    assert files_in(media) == []


def test_it_refuses_a_pool_build_when_the_task_queue_is_down(
    world: World, broker_down: None
) -> None:
    runs = list(world.project.runs.values_list("pk", flat=True))
    client = world.client_for(world.lead)
    url = reverse("pool_create", args=[world.project.slug])
    response = client.post(url, {"runs": runs, "depth": 2})
    assert response.status_code == 302
    assert "task queue is unreachable" in shown(response)
    assert not Job.objects.exists() and Pool.objects.count() == 1


def test_it_refuses_a_nul_in_the_column_mapping_and_keeps_nothing(
    world: World, media: Path
) -> None:
    response = post_log(world.client_for(world.lead), world, columns="query=q\x00")
    assert response.status_code == 302
    assert "NUL" in shown(response)
    assert not QueryLog.objects.exists() and not Job.objects.exists()
    assert files_in(media) == []


def test_it_ingests_a_log_whose_file_name_is_longer_than_the_file_system_takes(
    world: World, media: Path
) -> None:
    # The browser's name (cut to 255 characters by Django) is shown; the file on disk, which
    # had the stored prefix added to it, has a generated name of its own.
    response = post_log(world.client_for(world.lead), world, name="x" * 300 + ".csv")
    assert response.status_code == 302
    query_log = QueryLog.objects.get()
    assert query_log.status == JobState.DONE, query_log.error
    assert len(query_log.name) == 255 and query_log.name.endswith("x.csv")
    assert files_in(media) == []


# --- failures reach the page ----------------------------------------------------------------


def test_a_failed_pool_build_shows_its_reason_on_the_pool_page(world: World) -> None:
    empty = project_create(slug="empty", name="Empty")
    membership_set(project=empty, user=world.lead, role=Role.LEAD)
    run = run_create(project=empty, name="r", ranked={"q1": [RunRow("q1", "d1", 1, 1.0, "r")]})
    client = world.client_for(world.lead)
    response = client.post(reverse("pool_create", args=["empty"]), {"runs": [run.pk], "depth": 2})
    assert response.status_code == 302
    job = Job.objects.get(project=empty)
    assert (job.state, job.retryable) == (JobState.FAILED, False)
    page = client.get(reverse("pool_detail", args=["empty"])).content.decode()
    assert "could not be built" in page and "has no queries to pool" in page
    assert "hx-trigger" not in page  # nothing polls a job that has ended
    assert ">Discard<" in page and ">Retry<" not in page  # retrying cannot cure bad input
    assert 'data-confirm="Discard this pool build?' in page  # asks before deleting anything
    client.post(reverse("job_discard", args=["empty", job.pk]), {"next": "/"})
    assert (
        "could not be built"
        not in client.get(reverse("pool_detail", args=["empty"])).content.decode()
    )


def test_the_pool_page_polls_a_running_build_and_reloads_when_it_ends(world: World) -> None:
    job = job_create(project=world.project, kind="pool_build", handler="x.y", params={"depth": 4})
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, progress=0.25, message="pooling")
    client = world.client_for(world.lead)
    url = reverse("pool_detail", args=[world.project.slug])
    page = client.get(url).content.decode()
    assert "Building a pool of depth 4" in page and 'value="25"' in page and "hx-trigger" in page
    partial = client.get(url, headers={"HX-Request": "true"})
    assert "pool-build" in partial.content.decode()
    Job.objects.filter(pk=job.pk).update(state=JobState.DONE)
    assert client.get(url, headers={"HX-Request": "true"})["HX-Refresh"] == "true"


def test_a_lead_retries_a_failed_ingest_and_an_annotator_cannot(
    world: World, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sampling import services

    real = services.ingest_log
    monkeypatch.setattr(services, "ingest_log", lambda *a, **k: 1 / 0)  # a defect
    client = world.client_for(world.lead)
    post_log(client, world)
    query_log = QueryLog.objects.get()
    detail = reverse("log_detail", args=[world.project.slug, query_log.pk])
    page = client.get(detail).content.decode()
    assert "Internal error: ZeroDivisionError" in page and "Retry" in page
    assert len(files_in(media)) == 1  # kept for the retry
    retry = reverse("job_retry", args=[world.project.slug, query_log.job_id])
    assert world.client_for(world.alice).post(retry).status_code == 403
    assert client.get(retry).status_code == 405
    monkeypatch.setattr(services, "ingest_log", real)  # the defect is fixed
    assert client.post(retry, {"next": detail})["Location"] == detail
    query_log.job.refresh_from_db()
    assert query_log.job.state == JobState.DONE and query_log.stats.exists()
    assert files_in(media) == []


def test_discarding_a_failed_ingest_deletes_its_file(
    world: World, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sampling import services

    monkeypatch.setattr(services, "ingest_log", lambda *a, **k: 1 / 0)
    client = world.client_for(world.lead)
    post_log(client, world)
    job = QueryLog.objects.get().job
    client.post(reverse("job_discard", args=[world.project.slug, job.pk]))
    job.refresh_from_db()
    assert job.state == JobState.DISCARDED and files_in(media) == []
    assert client.post(reverse("job_retry", args=[world.project.slug, job.pk])).status_code == 302
    job.refresh_from_db()
    assert job.state == JobState.DISCARDED  # a discarded job stays discarded


# --- claiming, transient errors, the reaper ---------------------------------------------------

CALLS: list[int] = []


def flaky(job: Job, progress) -> dict:
    """Fails with a lost database connection on its first attempt."""
    CALLS.append(job.attempts)
    progress(0.5, "half way")
    if job.attempts == 1:
        raise OperationalError("server closed the connection unexpectedly")
    return {"summary": "fine"}


def a_job(world: World, **fields) -> Job:
    CALLS.clear()
    job = job_create(project=world.project, kind="test", handler="tests.test_jobs.flaky", params={})
    if fields:
        Job.objects.filter(pk=job.pk).update(**fields)
        job.refresh_from_db()
    return job


def test_a_transient_error_queues_the_job_again_and_it_ends_done(world: World) -> None:
    job = a_job(world)
    assert job_execute(job.pk, heartbeat=False) == 0  # back-off 0 s in the test settings
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and "transient" in job.message
    assert job_execute(job.pk, heartbeat=False) is None
    job.refresh_from_db()
    assert (job.state, job.attempts, job.message, CALLS) == (JobState.DONE, 2, "fine", [1, 2])


def test_a_duplicate_delivery_does_nothing(world: World) -> None:
    done = a_job(world, state=JobState.DONE)
    live = a_job(world, state=JobState.RUNNING, heartbeat_at=timezone.now(), attempts=1)
    for job in (done, live):
        assert job_execute(job.pk, heartbeat=False) is None
    assert CALLS == []
    assert Job.objects.get(pk=live.pk).state == JobState.RUNNING


def test_the_reaper_restarts_a_job_whose_worker_died_and_fails_it_when_attempts_are_used(
    world: World, settings
) -> None:
    silent = timezone.now() - timedelta(seconds=settings.JOB_HEARTBEAT_TIMEOUT + 1)
    dead = a_job(world, state=JobState.RUNNING, heartbeat_at=silent, attempts=1)
    spent = a_job(world, state=JobState.RUNNING, heartbeat_at=silent, attempts=3)
    reaped = reap()
    assert (reaped.requeued, reaped.failed) == ([dead.pk], [spent.pk])
    dead.refresh_from_db()
    spent.refresh_from_db()
    assert dead.state == JobState.DONE  # re-published; eager, so it ran here (attempt 2)
    assert spent.state == JobState.FAILED and spent.retryable and "stopped" in spent.error


def test_the_reaper_publishes_a_lost_queued_job_and_deletes_files_of_ended_jobs(
    world: World, settings, media: Path
) -> None:
    media.mkdir(parents=True)
    left = media / "left.csv"
    left.write_text("query\n")
    long_ago = timezone.now() - timedelta(seconds=settings.JOB_QUEUED_TIMEOUT + 1)
    lost = a_job(world, heartbeat_at=long_ago)
    ended = a_job(world, state=JobState.FAILED, retryable=False, files=[str(left)])
    reaped = reap()
    assert (reaped.republished, reaped.cleaned) == ([lost.pk], [ended.pk])
    assert Job.objects.get(pk=lost.pk).state == JobState.DONE
    assert not left.exists() and Job.objects.get(pk=ended.pk).files == []


def test_the_reaper_discards_a_retryable_failure_nobody_retried_and_deletes_its_file(
    world: World, settings, media: Path
) -> None:
    media.mkdir(parents=True)
    kept, old = media / "kept.csv", media / "old.csv"
    for path in (kept, old):
        path.write_text("query\n")
    days = settings.JOB_KEEP_FAILED_DAYS
    recent = a_job(world, state=JobState.FAILED, retryable=True, files=[str(kept)],
                   finished_at=timezone.now() - timedelta(days=days - 1))  # fmt: skip
    stale = a_job(world, state=JobState.FAILED, retryable=True, files=[str(old)],
                  finished_at=timezone.now() - timedelta(days=days, minutes=1))  # fmt: skip
    reaped = reap()
    assert (reaped.discarded, reaped.cleaned) == ([stale.pk], [stale.pk])
    stale.refresh_from_db()
    assert stale.state == JobState.DISCARDED and stale.files == [] and not old.exists()
    assert Job.objects.get(pk=recent.pk).state == JobState.FAILED and kept.exists()


def test_the_reap_jobs_command_prints_what_it_did(world: World) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("reap_jobs", stdout=out)
    assert out.getvalue().strip() == ("requeued 0, failed 0, republished 0, cleaned 0, discarded 0")


def stoppable(job: Job, progress) -> dict:
    """Stores a step, then stops if a lead asked it to, before the next."""
    CALLS.append(job.attempts)
    job_check_cancel(job)
    return {"summary": "ran to the end"}


def test_a_lead_cancels_a_queued_job_and_an_annotator_cannot(world: World) -> None:
    job = job_create(project=world.project, kind="test", handler="tests.test_jobs.flaky", params={})
    url = reverse("job_cancel", args=[world.project.slug, job.pk])
    assert world.client_for(world.alice).post(url).status_code == 403
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED
    world.client_for(world.lead).post(url)
    job.refresh_from_db()
    assert (job.state, job.message) == (JobState.DISCARDED, "cancelled before it started")
    assert job_execute(job.pk, heartbeat=False) is None  # a late delivery does nothing


def test_a_cancelled_running_job_stops_at_its_next_check_and_ends_discarded(world: World) -> None:
    CALLS.clear()
    job = job_create(
        project=world.project, kind="test", handler="tests.test_jobs.stoppable", params={}
    )
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    job_execute(job.pk, heartbeat=False)
    job.refresh_from_db()
    assert job.state == JobState.DISCARDED and "cancelled" in job.message and CALLS == [1]
    with pytest.raises(JobStateError):
        job_cancel(job=job)  # it has ended: nothing left to cancel
