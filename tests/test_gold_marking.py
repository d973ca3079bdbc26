"""The leads' gold page: which pairs can be gold and why not, retiring, the share setting, and
who may see it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agreement.gold import GoldRefused, gold_mark
from agreement.gold_chart import accuracy_chart
from agreement.models import Adjudication
from annotation.models import Role
from annotation.services import membership_set, protocol_publish
from judging.gold import GoldCheck, gold_accuracy
from judging.models import GoldItem, JudgingPolicy, Judgment
from pooling.models import Pair
from tests.conftest import World, small_project
from tests.gold_world import judge_queries

pytestmark = pytest.mark.django_db


def first_pair(world: World) -> Pair:
    return Pair.objects.filter(query__project=world.project).order_by("pk").first()  # type: ignore[return-value]


def mark(client: Client, world: World, pair: Pair) -> str:
    """Press "Mark gold" for the pair; returns the gold page shown after it."""
    response = client.post(reverse("gold_mark", args=[world.project.slug, pair.pk]), follow=True)
    assert response.status_code == 200
    return response.content.decode()


def adjudicate(world: World, pair: Pair, grade: int, promoted: bool = False) -> Adjudication:
    return Adjudication.objects.create(
        pair=pair,
        grade=grade,
        ruling="why",
        lead=world.lead,
        promoted_at=timezone.now() if promoted else None,
    )


def test_it_marks_an_adjudicated_pair_with_its_latest_adjudication(world: World) -> None:
    pair = first_pair(world)
    adjudicate(world, pair, 1)
    adjudicate(world, pair, 3)  # a changed mind: the latest stands
    lead = world.client_for(world.lead)
    page = mark(lead, world, pair)
    item = GoldItem.objects.get(pair=pair)
    assert (item.grade, item.source, item.marked_by, item.retired_at) == (
        3,
        "adjudicated",
        world.lead,
        None,
    )
    assert "is gold, grade 3" in page
    table = page[page.index('id="gold-items"') :]
    assert pair.document.docid in table and "Retire" in table


def test_it_marks_a_pair_a_lead_graded_on_the_judging_page(world: World) -> None:
    lead = world.client_for(world.lead)
    pairs = judge_queries(lead, world.project.slug, lambda p: 2, queries=1)
    page = lead.get(reverse("gold_items", args=[world.project.slug])).content.decode()
    candidates = page[page.index('id="gold-candidates"') :]
    assert all(f"/gold/{p.pk}/mark/" in candidates for p in pairs)
    mark(lead, world, pairs[0])
    item = GoldItem.objects.get(pair=pairs[0])
    assert (item.grade, item.source) == (2, "lead")


def test_it_refuses_a_pair_only_annotators_graded(world: World) -> None:
    alice = world.client_for(world.alice)
    [pair, *_] = judge_queries(alice, world.project.slug, lambda p: 3, queries=1)
    page = mark(world.client_for(world.lead), world, pair)
    assert "cannot be gold: it has neither an adjudication nor a grade from a lead" in page
    assert not GoldItem.objects.exists()


def test_it_refuses_a_pair_whose_ruling_was_promoted_into_the_protocol(world: World) -> None:
    pair = first_pair(world)
    adjudicate(world, pair, 2, promoted=True)
    adjudicate(world, pair, 2)  # a later one does not hide the promoted ruling
    lead = world.client_for(world.lead)
    page = mark(lead, world, pair)
    assert "ruling was promoted into the protocol" in page
    assert not GoldItem.objects.exists()
    candidates = page[page.index('id="gold-candidates"') :]
    assert "cannot be gold" in candidates and f"/gold/{pair.pk}/mark/" not in candidates


def test_it_refuses_an_anchor_example_of_the_protocol(world: World) -> None:
    pair = first_pair(world)
    adjudicate(world, pair, 3)
    anchor = {"query": pair.query.text, "docid": pair.document.docid, "grade": 3, "why": "x"}
    protocol_publish(project=world.project, text="v2", content={"anchors": [anchor]})
    with pytest.raises(GoldRefused, match="anchor example"):
        gold_mark(project=world.project, pair=pair, lead=world.lead)


def test_it_refuses_a_pair_the_leads_grade_differently(world: World) -> None:
    pair = first_pair(world)
    membership_set(project=world.project, user=world.bob, role=Role.LEAD)
    for user, grade in ((world.lead, 1), (world.bob, 3)):
        Judgment.objects.create(pair=pair, user=user, grade=grade, seconds_spent=2)
    page = mark(world.client_for(world.lead), world, pair)
    assert "the leads&#x27; grades differ (1 and 3): adjudicate it first" in page
    adjudicate(world, pair, 1)
    assert gold_mark(project=world.project, pair=pair, lead=world.lead).grade == 1


def test_it_retires_and_marks_again_with_the_key_as_it_is_now(world: World) -> None:
    pair = first_pair(world)
    adjudicate(world, pair, 2)
    lead = world.client_for(world.lead)
    mark(lead, world, pair)
    assert "is gold already" in mark(lead, world, pair)
    adjudicate(world, pair, 0)
    page = lead.get(reverse("gold_items", args=[world.project.slug])).content.decode()
    assert "the key is stale: the pair&#x27;s grade is 0 now" in page
    retire = reverse("gold_retire", args=[world.project.slug, pair.pk])
    assert lead.post(retire).status_code == 302
    item = GoldItem.objects.get(pair=pair)
    assert item.retired_at is not None
    again = lead.post(retire, follow=True).content.decode()
    assert "is not a gold item" in again
    mark(lead, world, pair)
    item.refresh_from_db()
    assert (item.grade, item.retired_at) == (0, None)


def test_it_lets_only_leads_in(world: World) -> None:
    pair = first_pair(world)
    adjudicate(world, pair, 2)
    slug = world.project.slug
    urls = [
        ("get", reverse("gold_items", args=[slug])),
        ("post", reverse("gold_mark", args=[slug, pair.pk])),
        ("post", reverse("gold_retire", args=[slug, pair.pk])),
        ("post", reverse("gold_share", args=[slug])),
    ]
    for user, status in ((world.alice, 403), (world.outsider, 404)):
        client = world.client_for(user)
        for method, url in urls:
            assert getattr(client, method)(url).status_code == status, (user, url)
    assert not GoldItem.objects.exists()
    other = small_project("other")
    foreign = Pair.objects.filter(query__project=other).first()
    assert foreign is not None
    lead = world.client_for(world.lead)
    assert lead.post(reverse("gold_mark", args=[slug, foreign.pk])).status_code == 404


def test_it_links_the_gold_page_for_leads_only(world: World) -> None:
    url = reverse("gold_items", args=[world.project.slug])
    project = reverse("project_detail", args=[world.project.slug])
    assert url in world.client_for(world.lead).get(project).content.decode()
    assert url not in world.client_for(world.alice).get(project).content.decode()


@pytest.mark.parametrize(
    ("typed", "saved", "message"),
    [
        ("12.5", 0.125, "Gold share saved: 12.5 %"),
        ("0", 0.0, "Gold share saved: 0 %"),
        ("60", 0.05, "Not saved: the gold share must be within 0–50 %"),
        ("-1", 0.05, "Not saved: the gold share must be within 0–50 %"),
        ("nan", 0.05, "Not saved: the gold share must be within 0–50 %"),
        ("five", 0.05, "Not saved: the gold share must be a number of percent"),
    ],
)
def test_it_saves_the_gold_share_within_bounds(
    world: World, typed: str, saved: float, message: str
) -> None:
    lead = world.client_for(world.lead)
    url = reverse("gold_share", args=[world.project.slug])
    page = lead.post(url, {"gold_share_percent": typed}, follow=True).content.decode()
    assert message in page
    policy = JudgingPolicy.objects.filter(project=world.project).first()
    assert (policy.gold_share if policy else 0.05) == saved
    form = page[page.index('id="gold-share"') - 200 : page.index('id="gold-share"') + 400]
    assert "data-confirm=" in form  # the browser asks before saving


def test_it_keeps_the_double_share_when_the_gold_share_changes(world: World) -> None:
    JudgingPolicy.objects.create(project=world.project, double_share=0.3, claim_idle_minutes=9)
    url = reverse("gold_share", args=[world.project.slug])
    world.client_for(world.lead).post(url, {"gold_share_percent": "10"})
    policy = JudgingPolicy.objects.get(project=world.project)
    assert (policy.double_share, policy.claim_idle_minutes, policy.gold_share) == (0.3, 9, 0.1)


# --- accuracy and its chart (plain arithmetic) ----------------------------------------------


def check(week: int, kind: str, grade: int | None, expected: int, who: str = "ann") -> GoldCheck:
    monday = datetime(2026, 1, 5, 12, tzinfo=UTC) + timedelta(weeks=week)  # ISO 2026-W02
    uid = 1 if who == "ann" else 2
    return GoldCheck(uid, who, 1, "q", "d", expected, kind, grade, monday, 3.0)


def test_it_counts_unsure_and_skipped_checks_as_not_right() -> None:
    checks = [
        check(0, "grade", 2, 2),
        check(0, "grade", 1, 2),
        check(0, "unsure", None, 2),
        check(1, "skip", None, 0),
        check(1, "grade", 0, 0),
        check(1, "grade", 3, 3, who="ben"),
    ]
    ann, ben = gold_accuracy(checks)
    assert (ann.overall.checks, ann.overall.correct) == (5, 2)
    assert (ann.overall.unsure, ann.overall.skipped) == (1, 1)
    assert ann.overall.rate == pytest.approx(0.4)
    assert {w: (a.correct, a.checks) for w, a in ann.weeks.items()} == {
        "2026-W02": (1, 3),
        "2026-W03": (1, 2),
    }
    assert (ben.username, ben.overall.rate) == ("ben", 1.0)


def test_it_draws_one_line_per_person_through_their_weeks() -> None:
    assert accuracy_chart([]) is None
    chart = accuracy_chart(
        [("ann", {"2026-W02": (1, 2), "2026-W03": (2, 2)}), ("ben", {"2026-W03": (0, 1)})]
    )
    assert chart is not None
    ann, ben = chart.series
    assert [d.label for d in ann.dots] == ["ann 2026-W02: 1/2", "ann 2026-W03: 2/2"]
    assert ann.dots[1].y == chart.top and ben.dots[0].y == chart.bottom  # 100 % and 0 %
    assert ann.dots[0].x == chart.left and ann.dots[1].x == chart.right
    assert ann.colour != ben.colour
    assert [t.label for t in chart.x_ticks] == ["2026-W02", "2026-W03"]
    gap = accuracy_chart([("ann", {"2026-W52": (1, 1), "2026-W53": (1, 1), "2027-W03": (0, 1)})])
    assert gap is not None  # 2026 has 53 ISO weeks: W53 is one week in, 2027-W03 four
    xs = [d.x for d in gap.series[0].dots]
    assert xs[1] - xs[0] == pytest.approx((xs[2] - xs[0]) / 4, abs=0.1)
    many = accuracy_chart([("ann", {f"2026-W{w:02d}": (1, 1) for w in range(1, 30)})])
    assert many is not None and len(many.x_ticks) <= 9
    assert many.x_ticks[-1].label == "2026-W29"
