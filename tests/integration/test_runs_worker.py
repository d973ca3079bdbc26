"""A real Celery worker on Redis imports uploaded runs and runs the baselines, as the pool page
asks: all files or none, the uploaded files deleted once read."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from jobs.models import Job, JobState
from pooling.services_runs import RUN_BASELINES, RUN_IMPORT
from tests.conftest import World
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def ended(kind: str) -> Job:
    wait_for(lambda: Job.objects.filter(kind=kind, state__in=[JobState.DONE, JobState.FAILED],
                                        files=[]).exists())  # fmt: skip
    return Job.objects.get(kind=kind)


def test_it_imports_uploaded_runs_and_runs_the_baselines_on_a_real_worker(
    world: World, worker: None
) -> None:
    world.project.documents.create(docid="d9", title="First", text="the first question")
    client = world.client_for(world.lead)
    files = [
        SimpleUploadedFile("up1.run", b"q1 Q0 d1 1 2.0 up1\nq1 Q0 nope 2 1.0 up1\n"),
        SimpleUploadedFile("up2.run", b"q2 Q0 d2 1 2.0 up2\n"),
    ]
    response = client.post(reverse("runs_upload", args=["acme"]), {"run_files": files})
    assert response.status_code == 302
    job = ended(RUN_IMPORT)
    assert job.state == JobState.DONE, job.error
    assert set(world.project.runs.values_list("name", flat=True)) >= {"up1", "up2"}
    assert job.result is not None and job.result["runs"][0]["missing_examples"] == ["nope"]
    assert not any(Path(settings.MEDIA_ROOT).rglob("*.run"))

    response = client.post(reverse("runs_baselines", args=["acme"]), {"only": ["bm25"], "k": 5})
    assert response.status_code == 302
    job = ended(RUN_BASELINES)
    assert job.state == JobState.DONE, job.error
    assert world.project.runs.get(name="bm25").results.exists()
