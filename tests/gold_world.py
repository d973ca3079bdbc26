"""A project for gold checks: eight queries of two documents each (small units), judged once
each, a lead who judges the first three through the judging page, and two annotators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotation.models import Project, Role
from annotation.services import membership_set, project_create, protocol_publish
from formats.trec import RunRow
from judging.models import Claim, ClaimState, JudgingPolicy, WorkUnit
from judging.services import pool_open
from judging.services_claims import claim_release
from pooling.models import Pair, Pool, Run
from pooling.services import run_create
from tests.conftest import make_user
from tests.judging_helpers import answer, judge_page, shown_item

QUERIES = 8


@dataclass
class GoldWorld:
    project: Project
    lead: User
    alice: User
    bob: User
    outsider: User
    run: Run

    @property
    def slug(self) -> str:
        return self.project.slug

    def client_for(self, user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client

    def pool(self) -> Pool:
        return self.project.pools.order_by("-pk").first()  # type: ignore[return-value]


def lead_grade(pair: Pair) -> int:
    """The lead's grade, which becomes the key: 2 for even documents, 0 for odd ones."""
    return 2 if int(pair.document.docid[1:]) % 2 == 0 else 0


def gold_project(slug: str = "gilt") -> GoldWorld:
    project = project_create(slug=slug, name="Gilt search")
    JudgingPolicy.objects.create(project=project, double_share=0.0)  # nothing judged twice
    for i in range(1, 7):
        project.documents.create(docid=f"d{i}", title=f"Title {i}", text=f"Text of document {i}")
    ranked = {}
    for q in range(1, QUERIES + 1):
        project.queries.create(qid=f"q{q}", text=f"question number {q}")
        docs = [f"d{(q + k) % 6 + 1}" for k in range(3)]
        ranked[f"q{q}"] = [RunRow(f"q{q}", d, r, 10.0 - r, "a") for r, d in enumerate(docs, 1)]
    protocol_publish(project=project, text="Grade 3: answers it. Grade 0: unrelated.")
    run = run_create(project=project, name="a", ranked=ranked)
    pool_open(project=project, runs=[run], depth=2, seed=11)
    world = GoldWorld(
        project, make_user("lena"), make_user("alice"), make_user("bob"), make_user("olaf"), run
    )
    membership_set(project=project, user=world.lead, role=Role.LEAD)
    membership_set(project=project, user=world.alice, role=Role.ANNOTATOR)
    membership_set(project=project, user=world.bob, role=Role.ANNOTATOR)
    return world


def judge_queries(
    client: Client, slug: str, grade: Callable[[Pair], int], queries: int | None = None
) -> list[Pair]:
    """Judge through the judging page, query after query (all of them, or `queries`); returns
    the items in the order they were shown."""
    page = judge_page(client, slug)
    shown: list[Pair] = []
    seen: list[int] = []
    while (item := shown_item(page)) is not None:
        if item.query_id not in seen:
            if queries is not None and len(seen) == queries:
                break
            seen.append(item.query_id)
        shown.append(item)
        page = answer(client, slug, page, grade(item))
    return shown


def lead_makes_gold(world: GoldWorld, queries: int = 3) -> list[Pair]:
    """The lead judges `queries` queries through the page and marks every pair of them gold
    from the gold page; returns the gold pairs."""
    lead = world.client_for(world.lead)
    pairs = judge_queries(lead, world.slug, lead_grade, queries=queries)
    # The page has handed the lead their next query by now: give it back for the others.
    for claim in Claim.objects.filter(user=world.lead, state=ClaimState.ACTIVE):
        claim_release(claim=claim)
    for pair in pairs:
        response = lead.post(reverse("gold_mark", args=[world.slug, pair.pk]))
        assert response.status_code == 302
    return pairs


def share_set(world: GoldWorld, percent: str) -> str:
    """Save the gold share from the gold page; returns the page shown after it."""
    lead = world.client_for(world.lead)
    response = lead.post(
        reverse("gold_share", args=[world.slug]), {"gold_share_percent": percent}, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def is_gold(unit: WorkUnit) -> bool:
    return unit.gold_for_id is not None
