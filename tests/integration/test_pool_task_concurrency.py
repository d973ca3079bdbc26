"""Two deliveries of one pool task at once on PostgreSQL build one pool, not two."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from annotation.services import project_create
from formats.trec import RunRow
from judging.services import pool_open_once
from pooling.models import Pool
from pooling.services import run_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_redelivered_pool_task_waits_for_the_first_and_reuses_its_pool() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are only exercised on PostgreSQL")
    project = project_create(slug="twice", name="Twice")
    for q in range(40):
        project.queries.create(qid=f"q{q}", text=f"query {q}")
    for d in range(20):
        project.documents.create(docid=f"d{d}", title="T", text="text")
    ranked = {f"q{q}": [RunRow(f"q{q}", f"d{d}", d + 1, 1.0 / (d + 1), "r") for d in range(20)]
              for q in range(40)}  # fmt: skip
    run = run_create(project=project, name="r", ranked=ranked)
    start, results, errors = threading.Barrier(4), [], []

    def deliver() -> None:
        try:
            start.wait()
            results.append(
                pool_open_once(project_id=project.pk, run_ids=[run.pk], depth=10, seed=3).pk
            )
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert Pool.objects.filter(project=project).count() == 1
    assert set(results) == {Pool.objects.get(project=project).pk}
