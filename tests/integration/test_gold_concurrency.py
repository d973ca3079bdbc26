"""Gold checks made for many people at once on PostgreSQL: threads, each with its own
connection, every one of them due a gold check in the same pool."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from agreement.gold import gold_mark
from agreement.models import Adjudication
from annotation.models import Role
from annotation.services import membership_set, project_create
from formats.trec import RunRow
from judging.models import ClaimState, JudgingPolicy, WorkUnit
from judging.services import claim_next, gold_share_set, pool_open
from judging.services_claims import claim_state_set
from pooling.models import Pair
from pooling.services import run_create
from tests.integration.test_claim_concurrency import THREADS, run_threads

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks between connections: PostgreSQL")


def test_it_makes_gold_checks_for_everyone_at_once_each_in_its_own_place() -> None:
    project = project_create(slug="busy-gold", name="Busy gold")
    JudgingPolicy.objects.create(project=project, double_share=0.0)
    project.documents.create(docid="d0", title="T", text="text")
    qids = [f"q{q:03d}" for q in range(2 * THREADS + 8)]
    for qid in qids:
        project.queries.create(qid=qid, text=f"query {qid}")
    run = run_create(
        project=project, name="r", ranked={q: [RunRow(q, "d0", 1, 1.0, "r")] for q in qids}
    )
    pool = pool_open(project=project, runs=[run], depth=1, seed=5)
    lead = User.objects.create_user("lead")
    membership_set(project=project, user=lead, role=Role.LEAD)
    for pair in Pair.objects.filter(query__qid__in=qids[:8]):
        Adjudication.objects.create(pair=pair, grade=2, lead=lead)
        gold_mark(project=project, pair=pair, lead=lead)
    users = [User.objects.create_user(f"judge{i:02d}") for i in range(THREADS)]
    for user in users:  # one query each, finished: every one of them is due a gold check
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
        claim = claim_next(pool=pool, user=user)
        assert claim is not None and claim.unit.gold_for_id is None
        claim_state_set(claim, ClaimState.DONE, timezone.now())
    gold_share_set(project=project, share=0.5)
    taken: dict[int, int | None] = {}

    def claim_once(i: int) -> None:
        claim = claim_next(pool=pool, user=users[i])
        taken[i] = claim.unit_id if claim else None

    run_threads(claim_once)
    units = {u.pk: u for u in WorkUnit.objects.filter(pool=pool)}
    assert len(taken) == THREADS and None not in taken.values()
    assert all(units[unit].gold_for_id == users[i].pk for i, unit in taken.items())  # type: ignore[index]
    positions = [u.position for u in units.values()]
    assert len(positions) == len(set(positions))
