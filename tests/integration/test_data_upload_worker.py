"""A real Celery worker on Redis imports a corpus uploaded on the Data page, all or nothing,
and the page sees its progress while the import's transaction is still open."""

from __future__ import annotations

import gzip

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError, connection
from django.urls import reverse

from jobs.models import Job, JobState
from tests.conftest import World
from tests.integration.conftest import wait_for
from tests.test_projects_web import corpus_lines

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def upload(world: World, name: str, content: bytes) -> Job:
    client = world.client_for(world.lead)
    url = reverse("project_data", args=[world.project.slug])
    response = client.post(url, {"corpus": SimpleUploadedFile(name, content)})
    assert response.status_code == 302
    job = Job.objects.filter(project=world.project).latest("pk")

    def ended() -> bool:
        job.refresh_from_db()
        return not job.active

    wait_for(ended, timeout=120)
    return job


def test_a_worker_imports_an_uploaded_corpus_and_reports_progress_on_the_way(
    world: World, worker: None
) -> None:
    # SQLite keeps readers out while a large write commits: a smaller file there.
    postgresql = connection.vendor == "postgresql"
    rows = 200_000 if postgresql else 20_000
    content = gzip.compress(corpus_lines(rows))
    client = world.client_for(world.lead)
    url = reverse("project_data", args=[world.project.slug])
    client.post(url, {"corpus": SimpleUploadedFile("corpus.jsonl.gz", content)})
    job = Job.objects.filter(project=world.project).latest("pk")
    seen: set[float] = set()

    def ended() -> bool:
        try:
            job.refresh_from_db()
        except OperationalError:
            if postgresql:
                raise
            return False  # SQLite: "database is locked" while the worker commits
        if job.state == JobState.RUNNING:
            seen.add(job.progress)
        return not job.active

    wait_for(ended, timeout=120)
    assert job.state == JobState.DONE, job.error
    assert world.project.documents.count() == rows + 5
    assert job.files == []
    if postgresql:  # the heartbeat thread writes it; not on SQLite
        assert any(0 < fraction < 0.95 for fraction in seen), seen


def test_a_worker_keeps_nothing_of_a_corpus_whose_line_3000_is_malformed(
    world: World, worker: None
) -> None:
    job = upload(world, "corpus.jsonl", corpus_lines(20_000, bad_line=3000))
    assert job.state == JobState.FAILED
    assert job.error.startswith("corpus.jsonl:3000: invalid JSON")
    assert world.project.documents.count() == 5
    assert job.files == []
