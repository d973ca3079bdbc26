"""Adjudication stays the leads' business: annotators get 403 on its pages, outsiders 404, and
nothing an annotator can fetch shows an adjudication, another judge's grade or a gold item."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from agreement.models import Adjudication
from judging.models import GoldItem, GoldSource, Judgment
from pooling.models import Pair
from tests.conftest import World
from tests.judging_helpers import answer, judge_page, shown_item
from tests.test_blind import make_everything_double, normalised

pytestmark = pytest.mark.django_db

SECRET_RULING = "adjudicated-secret-ruling"


def adjudication_urls(world: World) -> list[tuple[str, str]]:
    slug = world.project.slug
    p = Pair.objects.filter(query__project=world.project).first()
    assert p is not None
    adjudication = Adjudication.objects.create(pair=p, grade=2, ruling="r", lead=world.lead)
    return [
        ("get", reverse("adjudicate_queue", args=[slug])),
        ("get", reverse("adjudicate_queue", args=[slug]) + "?show=adjudicated"),
        ("get", reverse("adjudicate_pair", args=[slug, p.pk])),
        ("post", reverse("adjudicate_pair", args=[slug, p.pk])),
        ("post", reverse("adjudication_promote", args=[slug, adjudication.pk])),
        ("get", reverse("qrels_download", args=[slug]) + "?unresolved=higher"),
    ]


def call(client: Client, method: str, url: str) -> int:
    return getattr(client, method)(url, {"grade": "3", "ruling": "x"}).status_code


def test_annotators_get_403_and_outsiders_404_and_nothing_changes(world: World) -> None:
    urls = adjudication_urls(world)
    for user, status in ((world.alice, 403), (world.outsider, 404)):
        client = world.client_for(user)
        for method, url in urls:
            assert call(client, method, url) == status, (user, url)
    assert Adjudication.objects.count() == 1
    assert Adjudication.objects.get().promoted_at is None
    anonymous = Client().get(urls[0][1])
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def judge_query(client: Client, slug: str, grade: int) -> list[int]:
    """Judge the whole query on screen with one grade; the pairs judged, in order."""
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    judged = []
    while (item := shown_item(page)) is not None and item.query == first.query:
        judged.append(item.pk)
        page = answer(client, slug, page, grade, note="alice-note" if grade == 1 else "")
    return judged


def what_alice_sees(world: World, alice: Client) -> list[str]:
    slug = world.project.slug
    bodies = [normalised(judge_page(alice, slug))]
    for name in ("project_detail", "protocol_detail", "api_queue", "api_next"):
        response = alice.get(reverse(name, args=[slug]))
        assert response.status_code == 200, name
        bodies.append(normalised(response.content.decode()))
    bodies.append(normalised(alice.get(reverse("home")).content.decode()))
    return bodies


def test_an_annotator_sees_nothing_of_an_adjudication_of_a_pair_they_judged(
    world: World,
) -> None:
    make_everything_double(world)
    slug = world.project.slug
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    judged = judge_query(alice, slug, 1)
    assert judge_query(bob, slug, 3) == judged  # the same query, judged blind
    GoldItem.objects.create(
        pair_id=judged[-1], grade=0, source=GoldSource.LEAD, marked_by=world.lead
    )
    before = what_alice_sees(world, alice)

    lead = world.client_for(world.lead)
    for pair_id in judged:
        url = reverse("adjudicate_pair", args=[slug, pair_id])
        assert lead.post(url, {"grade": "2", "ruling": SECRET_RULING}).status_code == 302
    assert Adjudication.objects.count() == len(judged)

    after = what_alice_sees(world, alice)
    assert after == before  # byte for byte, whatever the lead decided
    for body in after:
        assert SECRET_RULING not in body
        assert not any(word in body.lower() for word in ("adjudicat", "gold", "lena", "bob"))
    api = json.loads(after[4])
    assert set(api) >= {"state"} and "grade" not in json.dumps(api.get("item") or {})
    # her own answers are untouched, and her qrels are still hers alone
    hers = Judgment.objects.filter(user=world.alice, pair_id__in=judged)
    assert set(hers.values_list("grade", flat=True)) == {1}
    assert alice.get(reverse("qrels_download", args=[slug])).status_code == 403
