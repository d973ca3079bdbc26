"""A real Celery worker on Redis builds a pool that the web request asked for."""

from __future__ import annotations

import pytest
from django.urls import reverse

from pooling.models import Pool
from tests.conftest import World
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_it_builds_a_pool_on_a_real_worker(world: World, worker: None) -> None:
    project = world.project
    runs = list(project.runs.values_list("pk", flat=True))
    client = world.client_for(world.lead)
    response = client.post(reverse("pool_create", args=[project.slug]), {"runs": runs, "depth": 2})
    assert response.status_code == 302
    wait_for(lambda: project.pools.count() == 2)
    pool = Pool.objects.filter(project=project).order_by("-pk").first()
    assert pool is not None and pool.depth == 2
    # depth 2 of runs a and b: q1 -> d1, d2, d3, d4; q2 -> d1, d2
    assert pool.items.count() == 6


def test_it_ingests_an_uploaded_log_on_a_real_worker(world: World, worker: None) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from sampling.models import LogStatus, QueryLog
    from tests.test_sampling_web import make_log

    client = world.client_for(world.lead)
    url = reverse("log_list", args=[world.project.slug])
    response = client.post(url, {"log": SimpleUploadedFile("log.csv", make_log())})
    assert response.status_code == 302
    query_log = QueryLog.objects.get(project=world.project)

    def done() -> bool:
        # The job is marked done before its file is deleted: wait for both.
        query_log.job.refresh_from_db()
        finished = query_log.status == LogStatus.DONE and not query_log.job.files
        return finished or query_log.status == LogStatus.FAILED

    wait_for(done)
    assert query_log.status == LogStatus.DONE, query_log.error
    assert query_log.stats.filter(query="pricing", frequency=6).exists()
    assert query_log.job.files == []  # the raw file is gone
