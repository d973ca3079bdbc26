"""Claims under real concurrency on PostgreSQL: threads, each with its own connection."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from annotation.services import project_create
from formats.trec import RunRow
from judging.models import Claim, ClaimState, WorkUnit
from judging.services import claim_next, pool_open
from pooling.models import Pool
from pooling.services import run_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

THREADS = 16


@pytest.fixture(autouse=True)
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("select_for_update(skip_locked=True) is only exercised on PostgreSQL")


def build(queries: int, double: int) -> tuple[Pool, list[User]]:
    project = project_create(slug="busy", name="Busy")
    project.documents.create(docid="d0", title="T", text="text")
    for q in range(queries):
        project.queries.create(qid=f"q{q:03d}", text=f"query {q}")
    ranked = {f"q{q:03d}": [RunRow(f"q{q:03d}", "d0", 1, 1.0, "r")] for q in range(queries)}
    run = run_create(project=project, name="r", ranked=ranked)
    pool = pool_open(project=project, runs=[run], depth=1, seed=5)
    units = WorkUnit.objects.filter(pool=pool).order_by("position")
    units.update(judges_needed=1)
    WorkUnit.objects.filter(pk__in=list(units.values_list("pk", flat=True)[:double])).update(
        judges_needed=2
    )
    users = [User.objects.create_user(f"judge{i:02d}") for i in range(THREADS)]
    return pool, users


def run_threads(work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def body(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as error:  # reported to the test below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors


def test_it_never_hands_a_query_out_twice_when_everyone_claims_at_once() -> None:
    pool, users = build(queries=24, double=8)
    taken: dict[int, int | None] = {}

    def claim_once(i: int) -> None:
        claim = claim_next(pool=pool, user=users[i])
        taken[i] = claim.unit_id if claim else None

    run_threads(claim_once)
    per_unit = Counter(unit for unit in taken.values() if unit is not None)
    assert sum(per_unit.values()) == THREADS  # 32 places for 16 people: everyone got one
    needed = dict(WorkUnit.objects.filter(pool=pool).values_list("pk", "judges_needed"))
    assert all(count <= needed[unit] for unit, count in per_unit.items())
    for unit in WorkUnit.objects.filter(pool=pool):
        assert unit.claims_taken == per_unit.get(unit.pk, 0)


def test_it_shares_out_the_whole_pool_without_duplicates() -> None:
    pool, users = build(queries=60, double=20)
    log: dict[int, list[int]] = defaultdict(list)

    def judge_until_done(i: int) -> None:
        while (claim := claim_next(pool=pool, user=users[i])) is not None:
            log[claim.unit_id].append(users[i].pk)
            Claim.objects.filter(pk=claim.pk).update(
                state=ClaimState.DONE, finished_at=timezone.now()
            )

    run_threads(judge_until_done)
    for unit in WorkUnit.objects.filter(pool=pool):
        judges = log[unit.pk]
        assert len(judges) == unit.judges_needed, unit  # single once, double twice
        assert len(set(judges)) == len(judges), unit  # never twice the same person
        assert unit.claims_taken == unit.judges_needed
    done = Claim.objects.filter(pool=pool, state=ClaimState.DONE)
    assert done.count() == 60 + 20


def test_it_keeps_one_active_claim_when_one_person_claims_from_many_tabs() -> None:
    pool, users = build(queries=30, double=0)
    got: list[int | None] = []

    def same_person(_i: int) -> None:
        claim = claim_next(pool=pool, user=users[0])
        got.append(claim.unit_id if claim else None)

    run_threads(same_person)
    active = Claim.objects.filter(pool=pool, user=users[0], state=ClaimState.ACTIVE)
    assert active.count() == 1
    assert set(got) == {active.get().unit_id}
    assert sum(WorkUnit.objects.filter(pool=pool).values_list("claims_taken", flat=True)) == 1
