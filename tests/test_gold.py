"""Gold checks in annotators' queues, through the real judging page and API: the share they come
at, what they look like (exactly like any other query), how they are scored, and that they are
never labels, never carried to a newer pool and never anyone's work in the leads' progress."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from judging.answers import current_answers
from judging.assignment import gold_due
from judging.gold import gold_accuracy, gold_checks
from judging.models import Claim, ClaimState, GoldItem, Judgment, WorkUnit
from judging.pools import pool_open, pool_plan
from judging.reports import judging_summary, strata_progress
from judging.services_claims import gold_received
from tests.gold_world import (
    QUERIES,
    GoldWorld,
    gold_project,
    is_gold,
    judge_queries,
    lead_grade,
    lead_makes_gold,
    share_set,
)
from tests.judging_helpers import PANEL, answer, form_key, judge_page, shown_item, undo
from tests.test_judging_answer import (
    STATEMENTS_PER_ANSWER,
    STATEMENTS_PER_API_ANSWER,
    statements,
)

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
GOLD_WORD = re.compile(r"\bgold(?!en)", re.IGNORECASE)  # a "golden set" is the product


@pytest.fixture
def gw(db: None) -> GoldWorld:
    return gold_project()


def ready(world: GoldWorld, percent: str = "50") -> list[Any]:
    """Three queries judged by the lead and made gold, and the share set from the gold page."""
    gold = lead_makes_gold(world)
    share_set(world, percent)
    return gold


def claims_of(world: GoldWorld, user: Any) -> list[Claim]:
    return list(Claim.objects.filter(user=user).select_related("unit").order_by("pk"))


def test_it_hands_gold_checks_out_at_the_configured_share(gw: GoldWorld) -> None:
    gold = ready(gw, "50")
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 2)

    claims = claims_of(gw, gw.alice)
    kinds = ["gold" if is_gold(c.unit) else "work" for c in claims]
    # 2 items per query: work, then gold while gold < half of all; the three gold queries
    # used up, work to the end.
    assert kinds == ["work", "gold", "work", "gold", "work", "gold", "work", "work"]
    assert all(c.state == ClaimState.DONE for c in claims)
    gold_g, received = 0, 0
    left = len({p.query_id for p in gold})
    for claim in claims:  # the rule, replayed claim by claim
        due = gold_due(gold=gold_g, received=received, share=0.5) and left > 0
        assert is_gold(claim.unit) == due
        size = claim.unit.items.count()
        received += size
        gold_g += size if due else 0
        left -= due
    assert gold_received(project_id=gw.project.pk, user_id=gw.alice.pk) == {gw.alice.pk: (6, 16)}


def test_it_makes_a_gold_check_of_a_query_never_judged_holding_its_gold_pairs(
    gw: GoldWorld,
) -> None:
    gold = ready(gw, "50")
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 2)
    claims = claims_of(gw, gw.alice)
    worked = {c.unit.query_id for c in claims if not is_gold(c.unit)}
    for unit in (c.unit for c in claims if is_gold(c.unit)):
        assert unit.gold_for_id == gw.alice.pk and unit.pool_id == gw.pool().pk
        assert (unit.judges_needed, unit.claims_taken) == (1, 1)
        assert unit.query_id not in worked
        items = set(unit.items.values_list("pair_id", flat=True))
        assert items == {p.pk for p in gold if p.query_id == unit.query_id}
    positions = list(WorkUnit.objects.filter(pool=gw.pool()).values_list("position", flat=True))
    assert len(positions) == len(set(positions)) == QUERIES + 3


def test_it_gives_no_gold_check_with_a_share_of_0_nor_to_a_lead(gw: GoldWorld) -> None:
    ready(gw, "0")
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 1, queries=3)
    assert not WorkUnit.objects.exclude(gold_for=None).exists()
    share_set(gw, "50")
    judge_queries(gw.client_for(gw.lead), gw.slug, lambda pair: 1)  # the lead judges on
    assert not WorkUnit.objects.filter(gold_for=gw.lead).exists()


def test_it_never_uses_a_retired_gold_item(gw: GoldWorld) -> None:
    gold = ready(gw, "50")
    lead = gw.client_for(gw.lead)
    for pair in gold:
        assert lead.post(reverse("gold_retire", args=[gw.slug, pair.pk])).status_code == 302
    assert GoldItem.objects.filter(retired_at=None).count() == 0
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 2)
    assert not WorkUnit.objects.exclude(gold_for=None).exists()


def test_it_keeps_a_released_gold_check_for_its_annotator_alone(gw: GoldWorld) -> None:
    ready(gw, "50")
    alice = gw.client_for(gw.alice)
    page = judge_page(alice, gw.slug)
    page = answer(alice, gw.slug, answer(alice, gw.slug, page, 1), 1)
    gold = Claim.objects.get(user=gw.alice, state=ClaimState.ACTIVE)
    assert is_gold(gold.unit)
    released = alice.post(reverse("judge_release", args=[gw.slug]), headers=HTMX)
    assert released.status_code == 200
    gold.refresh_from_db()
    assert gold.state == ClaimState.RELEASED

    share_set(gw, "0")  # bob gets no gold check of his own: all that is open is work, or hers
    judge_queries(gw.client_for(gw.bob), gw.slug, lambda pair: 1)
    assert Claim.objects.filter(user=gw.bob).count() == QUERIES - 3 - 2  # alice holds two
    assert not Claim.objects.filter(user=gw.bob).exclude(unit__gold_for=None).exists()
    share_set(gw, "50")
    judge_queries(alice, gw.slug, lambda pair: 1)
    gold.refresh_from_db()
    assert gold.state == ClaimState.DONE  # given back to her when gold was due again
    assert WorkUnit.objects.filter(gold_for=gw.alice).count() >= 1


def test_it_hands_the_same_gold_check_again_after_an_undo_gave_the_last_query_back(
    gw: GoldWorld,
) -> None:
    ready(gw, "50")
    alice = gw.client_for(gw.alice)
    page = judge_page(alice, gw.slug)
    page = answer(alice, gw.slug, answer(alice, gw.slug, page, 1), 1)
    gold = Claim.objects.get(user=gw.alice, state=ClaimState.ACTIVE).unit
    assert is_gold(gold)
    page = undo(alice, gw.slug, page)  # back to the first query's last item
    assert not is_gold(Claim.objects.get(user=gw.alice, state=ClaimState.ACTIVE).unit)
    page = answer(alice, gw.slug, page, 3)
    again = Claim.objects.get(user=gw.alice, state=ClaimState.ACTIVE).unit
    assert again == gold
    assert WorkUnit.objects.filter(gold_for=gw.alice).count() == 1


# --- looking exactly like any other query ---------------------------------------------------


class Skeleton(HTMLParser):
    """The markup without its text: tags, and the attributes that make the page's structure."""

    KEPT = {"id", "class", "name", "type", "method", "role", "hx-target", "hx-swap", "hx-sync"}

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, tuple[tuple[str, str], ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        kept = tuple(sorted((k, (v or "") if k in self.KEPT else "*") for k, v in attrs))
        self.tags.append((tag, kept))


def skeleton(html: str) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    parser = Skeleton()
    parser.feed(html)
    return parser.tags


def shape(value: Any) -> Any:
    """A JSON value's keys and types, not its values."""
    if isinstance(value, dict):
        return {key: shape(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [shape(inner) for inner in value[:1]]
    return type(value).__name__


def views_of_item(client: Client, world: GoldWorld, page: str) -> dict[str, Any]:
    slug = world.slug
    return {
        "page": skeleton(page),
        "panel": skeleton(PANEL.search(page).group(0)),  # type: ignore[union-attr]
        "next": shape(client.get(reverse("api_next", args=[slug])).json()),
        "next_post": shape(client.post(reverse("api_next", args=[slug])).json()),
        "queue": shape(client.get(reverse("api_queue", args=[slug])).json()),
        "project": skeleton(client.get(reverse("project_detail", args=[slug])).content.decode()),
    }


def test_it_shows_a_gold_item_exactly_like_any_other(gw: GoldWorld) -> None:
    ready(gw, "50")
    alice = gw.client_for(gw.alice)
    page = judge_page(alice, gw.slug)
    normal = views_of_item(alice, gw, page)
    page = answer(alice, gw.slug, page, 1)
    page = answer(alice, gw.slug, page, 1)  # the first query done: the next is a gold check
    held = Claim.objects.get(user=gw.alice, state=ClaimState.ACTIVE)
    assert is_gold(held.unit)
    item = shown_item(page)
    assert item is not None and item.query_id == held.unit.query_id
    page = judge_page(alice, gw.slug)  # the full page, as a reload shows it
    gold = views_of_item(alice, gw, page)
    assert gold == normal
    api = alice.get(reverse("api_next", args=[gw.slug])).json()
    assert api["state"] == "item" and api["item"]["id"] == item.pk  # ids are pair ids
    assert set(api["item"]) == {"id", "query", "document"}


def test_it_reveals_gold_nowhere_an_annotator_can_look(gw: GoldWorld) -> None:
    ready(gw, "50")
    alice = gw.client_for(gw.alice)
    slug = gw.slug
    bodies: list[str] = []
    page = judge_page(alice, slug)
    while (item := shown_item(page)) is not None:
        bodies.append(page)
        for name in ("api_next", "api_queue", "project_detail", "protocol_detail"):
            bodies.append(alice.get(reverse(name, args=[slug])).content.decode())
        unsure = {
            "item": item.pk,
            "kind": "unsure",
            "note": "not sure",
            "idempotency_key": form_key(page),
        }
        reply = alice.post(
            reverse("api_judgments", args=[slug]), unsure, content_type="application/json"
        )
        assert reply.status_code == 201
        bodies.append(json.dumps(reply.json()))
        response = alice.post(
            reverse("judge_undo", args=[slug]), {"key": form_key(page, "undo-form")}, headers=HTMX
        )
        bodies.append(response.content.decode())
        page = answer(alice, slug, judge_page(alice, slug), 2)
        bodies.append(page)
    bodies.append(alice.get(reverse("home")).content.decode())
    assert Claim.objects.filter(user=gw.alice).exclude(unit__gold_for=None).count() == 3
    for name in ("gold_items", "qrels_download", "judging_overview"):
        assert alice.get(reverse(name, args=[slug])).status_code == 403, name
    pair = Judgment.objects.filter(user=gw.lead).first().pair  # type: ignore[union-attr]
    for name in ("gold_mark", "gold_retire"):
        assert alice.post(reverse(name, args=[slug, pair.pk])).status_code == 403, name
    assert (
        alice.post(reverse("gold_share", args=[slug]), {"gold_share_percent": "0"}).status_code
        == 403
    )
    for body in bodies:
        assert not GOLD_WORD.search(body)
        assert "lena" not in body  # nobody else's judgments either


# --- scoring -----------------------------------------------------------------------------


def test_it_scores_gold_checks_against_the_key_and_never_makes_them_labels(
    gw: GoldWorld,
) -> None:
    gold = ready(gw, "50")
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 2)

    checks = gold_checks(project_id=gw.project.pk)
    assert {c.username for c in checks} == {"alice"}
    assert len(checks) == 6
    for check in checks:
        pair = next(p for p in gold if p.pk == check.pair_id)
        assert check.expected == lead_grade(pair)
        assert (check.kind, check.grade) == ("grade", 2)
        assert check.correct == (lead_grade(pair) == 2)
    [person] = gold_accuracy(checks)
    right = sum(1 for c in checks if c.expected == 2)
    assert (person.overall.checks, person.overall.correct) == (6, right)

    labels = {(a.pair_id, a.username): a.grade for a in current_answers(project_id=gw.project.pk)}
    gold_ids = {p.pk for p in gold}
    assert not any(pair in gold_ids for pair, who in labels if who == "alice")
    assert all(labels[(p.pk, "lena")] == lead_grade(p) for p in gold)
    lead = gw.client_for(gw.lead)
    qrels = lead.get(reverse("qrels_download", args=[gw.slug])).content.decode().splitlines()
    for p in gold:  # the final labels are the lead's: alice's 2s on them are no label
        assert f"{p.query.qid} 0 {p.document.docid} {lead_grade(p)}" in qrels
    hers = lead.get(reverse("qrels_download", args=[gw.slug]), {"annotator": "alice"})
    assert not any(
        f" {p.document.docid} " in line and line.startswith(f"{p.query.qid} ")
        for p in gold
        for line in hers.content.decode().splitlines()
    )


def test_it_counts_accuracy_per_iso_week(gw: GoldWorld) -> None:
    gold = ready(gw, "50")
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 2)
    first_gold = Claim.objects.filter(user=gw.alice).exclude(unit__gold_for=None).order_by("pk")[0]
    early = first_gold.unit.items.values_list("pair_id", flat=True)
    moved = Judgment.objects.filter(user=gw.alice, pair_id__in=list(early))
    moved.update(created_at=moved[0].created_at - timedelta(days=7))

    [person] = gold_accuracy(gold_checks(project_id=gw.project.pk))
    assert len(person.weeks) == 2
    (week1, a1), (week2, a2) = person.weeks.items()
    assert week1 < week2 and (a1.checks, a2.checks) == (2, 4)
    assert a1.correct + a2.correct == person.overall.correct
    page = gw.client_for(gw.lead).get(reverse("gold_items", args=[gw.slug])).content.decode()
    assert week1 in page and week2 in page
    chart = page[page.index('<svg class="chart" id="gold-chart"') : page.index("</svg>")]
    assert chart.count("<circle") == 2 and "<polyline" in chart
    assert f"alice {week1}: {a1.correct}/2" in chart
    assert len(gold) == 6


# --- never carried, never anyone's work -----------------------------------------------------


def hold_a_gold_check(world: GoldWorld) -> Claim:
    """alice finishes her first query and answers one item of the gold check that follows."""
    alice = world.client_for(world.alice)
    page = judge_page(alice, world.slug)
    for _ in range(3):
        page = answer(alice, world.slug, page, 1)
    claim = Claim.objects.select_related("unit").get(user=world.alice, state=ClaimState.ACTIVE)
    assert is_gold(claim.unit)
    return claim


def test_it_never_carries_a_gold_check_to_a_new_pool(gw: GoldWorld) -> None:
    ready(gw, "50")
    held = hold_a_gold_check(gw)
    old = gw.pool()
    pairs = set(held.unit.items.values_list("pair__query_id", "pair__document_id"))
    plan = pool_plan(project=gw.project, runs=[gw.run], depth=3, seed=12)
    assert not pairs & set(plan.carried)

    new = pool_open(project=gw.project, runs=[gw.run], depth=3, seed=12)

    held.refresh_from_db()
    assert (held.pool_id, held.state) == (old.pk, ClaimState.ACTIVE)  # left where it was
    assert not WorkUnit.objects.filter(pool=new).exclude(gold_for=None).exists()
    assert not Claim.objects.filter(pool=new, user=gw.alice).exists()
    # the gold query has new work (a deeper document): never alice's, now or later
    assert WorkUnit.objects.filter(pool=new, query_id=held.unit.query_id).exists()
    judge_queries(gw.client_for(gw.alice), gw.slug, lambda pair: 1)
    assert Claim.objects.filter(pool=new, user=gw.alice).exists()
    mine = Claim.objects.filter(user=gw.alice, unit__query_id=held.unit.query_id)
    assert list(mine) == [held]
    left = WorkUnit.objects.get(pool=new, query_id=held.unit.query_id, gold_for=None)
    assert left.claims_taken == 0  # left for somebody else


def test_it_leaves_gold_checks_out_of_the_leads_progress_and_claims(gw: GoldWorld) -> None:
    ready(gw, "50")
    held = hold_a_gold_check(gw)
    pool = gw.pool()
    lead = gw.client_for(gw.lead)
    page = lead.get(reverse("judging_overview", args=[gw.slug])).content.decode()
    assert reverse("judging_unit", args=[gw.slug, held.unit_id]) not in page
    assert reverse("judging_claim_release", args=[gw.slug, held.pk]) not in page
    listed = page[
        page.index('id="per-query"') : page.index("</table>", page.index('id="per-query"'))
    ]
    assert listed.count("/judging/queries/") == QUERIES
    assert sum(s.queries for s in strata_progress(pool=pool)) == QUERIES
    summary = {s.username: s for s in judging_summary(pool=pool)}
    assert summary["alice"].finished_queries == 1  # her first query; the check is no work
    assert summary["alice"].judgments == 3  # answers all count: time spent judging
    assert lead.get(reverse("judging_unit", args=[gw.slug, held.unit_id])).status_code == 404
    release = reverse("judging_claim_release", args=[gw.slug, held.pk])
    assert lead.post(release).status_code == 404
    reassign = reverse("judging_claim_reassign", args=[gw.slug, held.pk])
    assert lead.post(reassign, {"to": "bob"}).status_code == 404
    held.refresh_from_db()
    assert held.state == ClaimState.ACTIVE
    answered = Judgment.objects.filter(user=gw.alice, pair__in=held.unit.items.values("pair"))
    history = lead.get(reverse("judging_item", args=[gw.slug, answered[0].pair_id]))
    assert "gold check" in history.content.decode()  # leads may know


# --- cost ----------------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["page", "api"])
def test_an_answer_costs_the_same_statements_in_a_gold_check_and_out(
    gw: GoldWorld, via: str
) -> None:
    ready(gw, "50")
    alice = gw.client_for(gw.alice)
    page = judge_page(alice, gw.slug)  # the first query (work) is claimed by now
    counts = []
    for unit in ("work", "gold"):
        item = shown_item(page)
        assert item is not None
        held = Claim.objects.get(user=gw.alice, state=ClaimState.ACTIVE)
        assert ("gold" if is_gold(held.unit) else "work") == unit
        with CaptureQueriesContext(connection) as queries:
            if via == "page":
                url = reverse("judge_submit", args=[gw.slug, item.pk])
                alice.post(url, {"grade": "2", "key": form_key(page)}, headers=HTMX)
            else:
                body = {"item": item.pk, "grade": 2, "idempotency_key": form_key(page)}
                url = reverse("api_judgments", args=[gw.slug])
                alice.post(url, body, content_type="application/json")
        counts.append(len(statements(queries)))
        page = answer(alice, gw.slug, judge_page(alice, gw.slug), 2)  # the unit's last item
    expected = STATEMENTS_PER_ANSWER if via == "page" else STATEMENTS_PER_API_ANSWER
    assert counts == [expected, expected]
