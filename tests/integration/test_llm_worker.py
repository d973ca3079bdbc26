"""The LLM judge on a real Celery worker (Redis): a worker killed mid-batch loses nothing and
duplicates nothing. The endpoint is a local OpenAI-compatible server in this process; its
per-pair request counts show which pairs were called again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from assay.celery import app
from jobs.models import Job, JobState
from judging.models import Calibration, LLMJudgment
from judging.services_llm import judge_version_current, llm_label_start
from pooling.models import Pair
from tests.integration.conftest import REDIS_URL, _drop_connections, redis_is_up, wait_for
from tests.integration.test_job_faults import Worker
from tests.llm_project import endpoint_judge, llm_project, pair_key
from tests.llm_server import LLMServer, Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


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


@pytest.fixture
def slow_server() -> Iterator[LLMServer]:
    running = LLMServer(delay=0.1)  # 4 calls at once: ~40 pairs a second
    running.default = lambda key: Reply.grade(int(key[1][-1]) % 4)
    try:
        yield running
    finally:
        running.stop()


def test_a_worker_killed_mid_batch_loses_and_duplicates_nothing(
    worker: Worker, slow_server: LLMServer
) -> None:
    project = llm_project("llmkill", queries=40)  # 160 pairs, ~4 s of calls
    judge = endpoint_judge(project, slow_server, concurrency=4)
    version = judge_version_current(judge=judge)
    Calibration.objects.create(version=version, n=120, passed=True)
    job = llm_label_start(judge=judge, mode="label")
    stored = LLMJudgment.objects.filter(version=version)
    wait_for(lambda: stored.count() >= 32, timeout=60)  # two chunks stored
    worker.kill()
    before = set(stored.values_list("pair_id", flat=True))
    assert 32 <= len(before) < 160
    time.sleep(1)
    worker.start()  # the reaper finds the job silent and queues it again
    wait_for(lambda: Job.objects.get(pk=job.pk).state in (JobState.DONE, JobState.FAILED), 90)
    job.refresh_from_db()
    assert job.state == JobState.DONE, job.error
    assert job.attempts == 2
    assert stored.count() == 160
    assert stored.values("pair_id").distinct().count() == 160
    pairs = Pair.objects.filter(query__project=project).select_related("query", "document")
    counts = {pair.pk: slow_server.counts[pair_key(pair)] for pair in pairs}
    assert all(counts[pk] == 1 for pk in before)  # a pair with a row is never called again
    assert all(n >= 1 for n in counts.values())
    # Only the calls under way when the worker died were made twice.
    assert sum(counts.values()) - 160 <= 16 + 4
    assert job.result is not None and job.result["skipped_existing"] >= len(before)
