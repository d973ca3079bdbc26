"""Undo under real concurrency on PostgreSQL: parallel undos of one person, each with its own
key and connection, undo distinct answers, newest first, never the same answer twice."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from django.contrib.auth.models import User
from django.db import connection

from annotation.services import project_create
from formats.trec import RunRow
from judging.models import Judgment, Kind
from judging.services import (
    Answer,
    NotYours,
    judgment_submit,
    judgment_undo_last,
    pool_open,
    screen_for,
)
from pooling.models import Pool
from pooling.services import run_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

UNDOS = 4
DOCUMENTS = 6


@pytest.fixture(autouse=True)
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks between connections are only exercised on PostgreSQL")


def build() -> tuple[Pool, User]:
    project = project_create(slug="undo", name="Undo")
    for d in range(DOCUMENTS):
        project.documents.create(docid=f"d{d}", title="T", text="text")
    project.queries.create(qid="q0", text="query")
    ranked = {"q0": [RunRow("q0", f"d{d}", d + 1, 1.0, "r") for d in range(DOCUMENTS)]}
    run = run_create(project=project, name="r", ranked=ranked)
    pool = pool_open(project=project, runs=[run], depth=DOCUMENTS, seed=3)
    return pool, User.objects.create_user("judge")


def answer(pool: Pool, user: User, times: int) -> list[int]:
    """Grade the next `times` items as the page would; returns the answers' ids."""
    ids = []
    for _ in range(times):
        screen = screen_for(pool=pool, user=user)
        assert screen.item is not None
        done = judgment_submit(
            pool=pool,
            user=user,
            item_id=screen.item.pk,
            answer=Answer("grade", 2),
            key=uuid.uuid4(),
        )
        ids.append(done.judgment.pair_id)
    return ids


def undo_at_once(pool: Pool, user: User) -> list[str]:
    outcomes: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(UNDOS)

    def body() -> None:
        try:
            start.wait()
            judgment_undo_last(pool=pool, user=user, key=uuid.uuid4())
            outcomes.append("undone")
        except NotYours:
            outcomes.append("nothing")
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=body) for _ in range(UNDOS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return outcomes


def undone_items(user: User) -> Counter[int]:
    rows = Judgment.objects.filter(user=user, kind=Kind.UNDO)
    return Counter(rows.values_list("pair_id", flat=True))


def test_parallel_undos_undo_distinct_answers_newest_first() -> None:
    pool, user = build()
    items = answer(pool, user, 5)
    outcomes = undo_at_once(pool, user)
    assert outcomes.count("undone") == UNDOS
    undone = undone_items(user)
    assert max(undone.values()) == 1  # never the same answer twice
    assert set(undone) == set(items[-UNDOS:])  # the latest four, the first answer kept


def test_parallel_undos_stop_when_the_answers_run_out() -> None:
    pool, user = build()
    items = answer(pool, user, 2)
    outcomes = undo_at_once(pool, user)
    assert sorted(outcomes) == ["nothing", "nothing", "undone", "undone"]
    assert undone_items(user) == Counter(items)


def test_parallel_undos_reopen_a_just_finished_query_once() -> None:
    pool, user = build()
    items = answer(pool, user, DOCUMENTS)  # the whole query: it is finished
    outcomes = undo_at_once(pool, user)
    assert outcomes.count("undone") == UNDOS
    undone = undone_items(user)
    assert max(undone.values()) == 1 and set(undone) == set(items[-UNDOS:])
