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


def test_two_leads_building_at_once_one_wins_and_the_other_is_told() -> None:
    """Both confirmed a preview of the same project state: one build runs, the other waits
    for the lock, finds a pool newer than its preview, and refuses; nothing is half built."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are only exercised on PostgreSQL")
    from judging.models import WorkItem, WorkUnit
    from judging.pools import PoolChanged
    from pooling.models import Pair, PoolItem

    project = project_create(slug="rivals", name="Rivals")
    for q in range(60):
        project.queries.create(qid=f"q{q}", text=f"query {q}")
    for d in range(30):
        project.documents.create(docid=f"d{d}", title="T", text="text")
    ranked = {f"q{q}": [RunRow(f"q{q}", f"d{d}", d + 1, 1.0 / (d + 1), "r") for d in range(30)]
              for q in range(60)}  # fmt: skip
    run = run_create(project=project, name="r", ranked=ranked)
    start, built, refused, errors = threading.Barrier(2), [], [], []

    def confirm(depth: int) -> None:
        try:
            start.wait()
            pool = pool_open_once(
                project_id=project.pk, run_ids=[run.pk], depth=depth, seed=depth,
                after=None, check_after=True,
            )  # fmt: skip
            built.append(pool.pk)
        except PoolChanged as error:
            refused.append(str(error))
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm, args=(depth,)) for depth in (10, 20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(built) == 1 and len(refused) == 1 and "after you looked" in refused[0]
    pool = Pool.objects.get(project=project)
    assert pool.pk == built[0]
    # everything of the winner, nothing of the loser
    assert PoolItem.objects.filter(pool__project=project).count() == pool.selected
    assert Pair.objects.filter(query__project=project).count() == pool.selected
    assert WorkItem.objects.filter(unit__pool=pool).count() == pool.to_judge == pool.selected
    assert WorkUnit.objects.filter(pool__project=project).count() == 60
