"""A log whose ingestion fails, expectedly or not, is marked failed and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from jobs.services import job_discard
from sampling import services
from sampling.models import LogQueryStat, LogStatus, QueryLog, SamplingScheme
from sampling.services import log_ingest, log_queue
from tests.conftest import World
from tests.test_sampling_web import make_log

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def upload(world: World, capture, content: bytes, name: str) -> tuple[int, QueryLog]:
    """Upload as the lead; the ingestion task runs eagerly once the request has committed."""
    client = world.client_for(world.lead)
    data = {"log": SimpleUploadedFile(name, content), "columns": ""}
    with capture(execute=True):
        response = client.post(reverse("log_list", args=[world.project.slug]), data)
    return response.status_code, QueryLog.objects.filter(project=world.project).latest("pk")


def test_it_reads_a_jsonl_log_with_invalid_utf8_and_a_malformed_line(
    world: World, django_capture_on_commit_callbacks
) -> None:
    content = b'{"query":"caf\xe9"}\n{"query":"ok"}\n{"query": broken\n'
    status, query_log = upload(world, django_capture_on_commit_callbacks, content, "log.jsonl")
    assert status == 302
    assert query_log.status == LogStatus.DONE
    report = query_log.report or {}
    assert (report["rows"], report["malformed_rows"], report["invalid_utf8_lines"]) == (2, 1, 1)


def test_it_fails_a_jsonl_log_of_malformed_lines_naming_the_upload(
    world: World, django_capture_on_commit_callbacks
) -> None:
    content = b'{"query": broken\nnot json either\n'
    status, query_log = upload(world, django_capture_on_commit_callbacks, content, "log.jsonl")
    assert status == 302
    assert query_log.status == LogStatus.FAILED
    assert query_log.error.startswith("log.jsonl: no readable rows: 2 malformed line(s)")
    assert "media" not in query_log.error  # the upload's stored name is not shown


def test_it_reads_a_log_with_carriage_returns_only(
    world: World, django_capture_on_commit_callbacks
) -> None:
    content = b"query,session_id\rfoo,1\rbar,2\rfoo,3\r"
    status, query_log = upload(world, django_capture_on_commit_callbacks, content, "log.csv")
    assert status == 302 and query_log.status == LogStatus.DONE, query_log.error
    stats = dict(LogQueryStat.objects.filter(log=query_log).values_list("query", "frequency"))
    assert stats == {"foo": 2, "bar": 1}


def test_it_marks_a_log_failed_when_ingestion_breaks_unexpectedly(
    world: World, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the engine fell over")

    monkeypatch.setattr(services, "ingest_log", broken)
    media.mkdir(parents=True)
    path = media / "log.csv"
    path.write_bytes(make_log())
    query_log = log_queue(project=world.project, name="log.csv", path=path, owned=True)
    query_log = log_ingest(log_id=query_log.pk)  # the job records the error; nothing raised
    assert query_log.status == LogStatus.FAILED  # never left "running"
    assert "RuntimeError" in query_log.error and "the engine fell over" in query_log.error
    assert query_log.job.retryable and path.exists()  # kept for a retry after the fix
    assert not SamplingScheme.objects.exists() and not LogQueryStat.objects.exists()
    job_discard(job=query_log.job)
    assert not path.exists()  # abandoned: the raw rows are gone


def test_it_shows_an_unexpected_failure_on_the_log_page(
    world: World, django_capture_on_commit_callbacks, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("column")

    monkeypatch.setattr(services, "ingest_log", broken)
    status, query_log = upload(world, django_capture_on_commit_callbacks, make_log(), "log.csv")
    assert status == 302  # the job records the defect; the request does not fail
    assert query_log.status == LogStatus.FAILED
    page = world.client_for(world.lead).get(
        reverse("log_detail", args=[world.project.slug, query_log.pk])
    )
    assert "could not be read" in page.content.decode()


def test_it_stores_a_query_that_held_a_nul_character(
    world: World, django_capture_on_commit_callbacks
) -> None:
    # PostgreSQL text cannot hold NUL: the query arrives with U+FFFD in its place.
    content = b"query\nfoo\x00bar\nbaz\n"
    _, query_log = upload(world, django_capture_on_commit_callbacks, content, "log.csv")
    assert query_log.status == LogStatus.DONE, query_log.error
    queries = set(LogQueryStat.objects.filter(log=query_log).values_list("query", flat=True))
    assert queries == {"foo\ufffdbar", "baz"}
    assert query_log.report is not None and query_log.report["nul_lines"] == 1
