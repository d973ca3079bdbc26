"""Work units and claims, through the services: who gets which query, and when."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from annotation.models import Project, Role
from annotation.services import membership_set
from formats.trec import RunRow
from judging import services_claims
from judging.models import Claim, ClaimState, JudgingPolicy, WorkUnit
from judging.services import JudgingError, claim_next, pool_open
from judging.services_claims import claim_reassign, claim_release, claims_expire
from pooling.models import Pair, Pool
from pooling.services import run_create
from tests.conftest import World, make_user
from tests.judging_helpers import answer, before_calling, judge_page, places_out_of_step

pytestmark = pytest.mark.django_db


def wide_project(queries: int = 10, strata: tuple[str, ...] = ("",)) -> tuple[Project, Pool]:
    """`queries` queries of two documents each, spread over `strata`, pooled at depth 2."""
    from annotation.services import project_create

    project = project_create(slug="wide", name="Wide")
    for d in range(2):
        project.documents.create(docid=f"d{d}", title=f"T{d}", text=f"text {d}")
    for q in range(queries):
        project.queries.create(qid=f"q{q}", text=f"query {q}", stratum=strata[q % len(strata)])
    ranked = {
        f"q{q}": [RunRow(f"q{q}", f"d{d}", d + 1, 1.0 - d, "r") for d in range(2)]
        for q in range(queries)
    }
    pool = pool_open(
        project=project,
        runs=[run_create(project=project, name="r", ranked=ranked)],
        depth=2,
        seed=1,
    )
    return project, pool


def finish(claim: Claim) -> None:
    """Mark a claim finished the way answering its last item would."""
    claim.state, claim.finished_at = ClaimState.DONE, timezone.now()
    claim.save()


def test_it_creates_one_unit_per_query_in_the_pool_order(world: World) -> None:
    pool = world.project.pools.get()
    units = list(WorkUnit.objects.filter(pool=pool).order_by("position"))
    first_items = list(pool.items.order_by("position").values_list("pair__query_id", flat=True))
    assert [u.query_id for u in units] == list(dict.fromkeys(first_items))


def reopened(project: Project, seed: int = 1) -> Pool:
    """The project pooled again from scratch: its pools and pairs gone, the same runs."""
    Pool.objects.filter(project=project).delete()
    Pair.objects.filter(query__project=project).delete()
    return pool_open(project=project, runs=list(project.runs.all()), depth=2, seed=seed)


def test_it_doubles_a_share_of_each_stratum_with_a_seed() -> None:
    project, pool = wide_project(queries=30, strata=("head", "tail", "failures"))
    doubles = WorkUnit.objects.filter(pool=pool, judges_needed=2)
    assert {s: doubles.filter(stratum=s).count() for s in ("head", "tail", "failures")} == {
        "head": 2,
        "tail": 2,
        "failures": 2,
    }
    chosen = set(doubles.values_list("query__qid", flat=True))
    again = WorkUnit.objects.filter(pool=reopened(project), judges_needed=2)
    assert set(again.values_list("query__qid", flat=True)) == chosen  # same seed, same draw
    JudgingPolicy.objects.create(project=project, double_share=0.5)
    assert WorkUnit.objects.filter(pool=reopened(project), judges_needed=2).count() == 15


def test_it_uses_the_projects_double_share(world: World) -> None:
    JudgingPolicy.objects.create(project=world.project, double_share=1.0)
    pool = reopened(world.project)
    assert set(WorkUnit.objects.filter(pool=pool).values_list("judges_needed", flat=True)) == {2}


def test_it_keeps_one_active_claim_per_annotator(world: World) -> None:
    pool = world.project.pools.get()
    first = claim_next(pool=pool, user=world.alice)
    again = claim_next(pool=pool, user=world.alice)
    assert first is not None and again == first
    assert Claim.objects.filter(user=world.alice).count() == 1


def test_it_never_gives_a_single_query_to_two_people() -> None:
    _, pool = wide_project(queries=4)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=1)
    users = [make_user(f"u{i}") for i in range(6)]
    claims = [claim_next(pool=pool, user=u) for u in users]
    taken = [c.unit_id for c in claims if c is not None]
    assert len(taken) == 4 == len(set(taken))
    assert claims[4] is None and claims[5] is None
    assert set(WorkUnit.objects.values_list("claims_taken", flat=True)) == {1}


def test_it_gives_a_double_query_to_two_different_people() -> None:
    _, pool = wide_project(queries=1)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=2)
    alice, bob = make_user("alice"), make_user("bob")
    first = claim_next(pool=pool, user=alice)
    assert first is not None
    finish(first)
    assert claim_next(pool=pool, user=alice) is None  # never the same person twice
    second = claim_next(pool=pool, user=bob)
    assert second is not None and second.unit_id == first.unit_id
    assert WorkUnit.objects.get().claims_taken == 2


def hold(pool: Pool, unit: WorkUnit, user: User) -> Claim:
    now = timezone.now()
    WorkUnit.objects.filter(pk=unit.pk).update(claims_taken=unit.claims_taken + 1)
    return Claim.objects.create(
        pool=pool, unit=unit, user=user, state="active", claimed_at=now, touched_at=now
    )


def test_it_rotates_the_pairs_of_double_judges() -> None:
    _, pool = wide_project(queries=4)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=2)
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    units = list(WorkUnit.objects.order_by("position"))
    for user in (alice, bob):  # alice and bob have judged q0 together
        claim = claim_next(pool=pool, user=user)
        assert claim is not None and claim.unit == units[0]
        finish(claim)
    hold(pool, units[1], alice)  # alice is on q1, carol on q2: both wait for a second judge
    hold(pool, units[2], carol)
    # bob prefers carol's query (never paired) to alice's (paired once), though it comes later.
    b = claim_next(pool=pool, user=bob)
    assert b is not None and b.unit_id == units[2].pk


def test_it_keeps_the_pool_order_among_never_paired_queries() -> None:
    _, pool = wide_project(queries=3)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=2)
    units = list(WorkUnit.objects.order_by("position"))
    hold(pool, units[1], make_user("alice"))
    b = claim_next(pool=pool, user=make_user("bob"))
    assert b is not None and b.unit_id == units[0].pk  # position order among never-paired


def test_it_releases_and_gives_a_released_query_back_only_at_the_end() -> None:
    _, pool = wide_project(queries=2)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=1)
    alice = make_user("alice")
    first = claim_next(pool=pool, user=alice)
    assert first is not None
    claim_release(claim=first)
    second = claim_next(pool=pool, user=alice)
    assert second is not None and second.unit_id != first.unit_id
    finish(second)
    third = claim_next(pool=pool, user=alice)
    assert third is not None and third.pk == first.pk  # re-activated, not a new row
    assert third.state == ClaimState.ACTIVE
    with pytest.raises(JudgingError):
        claim_release(claim=second)  # a finished query cannot be released


def test_it_expires_idle_claims_lazily(world: World) -> None:
    pool = world.project.pools.get()
    claim = claim_next(pool=pool, user=world.alice)
    assert claim is not None
    assert claims_expire(pool=pool) == 0
    # the limit (30 minutes) and the minute an answer may leave `touched_at` behind
    Claim.objects.filter(pk=claim.pk).update(touched_at=timezone.now() - timedelta(minutes=32))
    assert claims_expire(pool=pool) == 1
    claim.refresh_from_db()
    assert claim.state == ClaimState.EXPIRED
    assert WorkUnit.objects.get(pk=claim.unit_id).claims_taken == 0
    resumed = claim_next(pool=pool, user=world.alice)  # her own work comes back first
    assert resumed is not None and resumed.pk == claim.pk


def test_it_honours_the_projects_idle_limit(world: World) -> None:
    JudgingPolicy.objects.create(project=world.project, claim_idle_minutes=5)
    pool = world.project.pools.get()
    claim = claim_next(pool=pool, user=world.alice)
    assert claim is not None
    Claim.objects.filter(pk=claim.pk).update(touched_at=timezone.now() - timedelta(minutes=7))
    assert claims_expire(pool=pool) == 1


def test_it_never_expires_the_claim_of_someone_still_answering(world: World) -> None:
    JudgingPolicy.objects.create(project=world.project, claim_idle_minutes=1)
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    start = timezone.now()
    touched = start - timedelta(seconds=50)
    Claim.objects.filter(user=world.alice).update(touched_at=touched)
    answer(client, slug, page, 2)  # answered now: too soon after the last touch to write one
    assert Claim.objects.get(user=world.alice).touched_at == touched
    pool = world.project.pools.get()
    assert claims_expire(pool=pool, now=start + timedelta(seconds=50)) == 0  # 50 s idle
    # Idle for longer than the limit whenever the answer came: the limit plus a minute on.
    assert claims_expire(pool=pool, now=touched + timedelta(minutes=2, seconds=1)) == 1


def test_it_reassigns_a_claim_to_another_member(world: World) -> None:
    pool = world.project.pools.get()
    alices = claim_next(pool=pool, user=world.alice)
    assert alices is not None
    moved = claim_reassign(claim=alices, to=world.bob)
    assert (moved.user, moved.state, moved.unit_id) == (world.bob, "active", alices.unit_id)
    alices.refresh_from_db()
    assert alices.state == ClaimState.RELEASED
    assert WorkUnit.objects.get(pk=alices.unit_id).claims_taken == 1
    with pytest.raises(JudgingError):
        claim_reassign(claim=moved, to=world.bob)


def test_it_queues_a_reassigned_query_behind_the_current_one(world: World) -> None:
    pool = world.project.pools.get()
    alices = claim_next(pool=pool, user=world.alice)
    bobs = claim_next(pool=pool, user=world.bob)
    assert alices is not None and bobs is not None
    moved = claim_reassign(claim=alices, to=world.bob)
    assert moved.state == ClaimState.ASSIGNED
    finish(bobs)
    nxt = claim_next(pool=pool, user=world.bob)
    assert nxt is not None and nxt.pk == moved.pk and nxt.state == ClaimState.ACTIVE


def test_it_leaves_an_assignment_released_while_it_was_being_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, pool = wide_project(queries=4)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=1)
    alice, bob = make_user("alice"), make_user("bob")
    alices, bobs = claim_next(pool=pool, user=alice), claim_next(pool=pool, user=bob)
    assert alices is not None and bobs is not None
    moved = claim_reassign(claim=bobs, to=alice)  # queued behind her current query
    finish(alices)
    # The lead changes their mind just as alice's next claim reads the assignment.
    release = partial(claim_release, claim=moved)
    before_calling(monkeypatch, services_claims, "claim_state_set", release)
    taken = claim_next(pool=pool, user=alice)
    assert taken is not None and taken.unit_id not in (alices.unit_id, moved.unit_id)
    assert Claim.objects.get(pk=moved.pk).state == ClaimState.RELEASED
    assert places_out_of_step(pool) == {}


def test_it_keeps_the_compare_and_set_within_the_judges_needed(world: World) -> None:
    pool = world.project.pools.get()
    units = WorkUnit.objects.filter(pool=pool)
    units.update(claims_taken=1)  # as if someone else had taken every place meanwhile
    assert claim_next(pool=pool, user=world.alice) is None
    assert not Claim.objects.exists()


def test_it_lets_a_lead_add_a_member_and_reassign_from_the_page(world: World) -> None:
    from django.urls import reverse

    newcomer = User.objects.create_user(username="nina", password="x" * 12)
    client = world.client_for(world.lead)
    slug = world.project.slug
    response = client.post(
        reverse("judging_member_add", args=[slug]), {"username": "nina", "role": "annotator"}
    )
    assert response.status_code == 302
    assert world.project.memberships.get(user=newcomer).role == Role.ANNOTATOR
    claim = claim_next(pool=world.project.pools.get(), user=world.alice)
    assert claim is not None
    client.post(reverse("judging_claim_reassign", args=[slug, claim.pk]), {"to": "nina"})
    assert Claim.objects.get(user=newcomer).state == ClaimState.ACTIVE
    page = client.get(reverse("judging_overview", args=[slug])).content.decode()
    assert "nina" in page and "q1" in page


def test_it_releases_a_claim_from_the_lead_page(world: World) -> None:
    from django.urls import reverse

    membership_set(project=world.project, user=world.bob, role=Role.ANNOTATOR)
    claim = claim_next(pool=world.project.pools.get(), user=world.bob)
    assert claim is not None
    client = world.client_for(world.lead)
    client.post(reverse("judging_claim_release", args=[world.project.slug, claim.pk]))
    claim.refresh_from_db()
    assert claim.state == ClaimState.RELEASED


def test_it_counts_items_per_query_as_the_pool_has_them(world: World) -> None:
    pool = world.project.pools.get()
    sizes = {
        u.query_id: Pair.objects.filter(query=u.query).count()
        for u in WorkUnit.objects.filter(pool=pool)
    }
    assert sum(sizes.values()) == pool.items.count()
