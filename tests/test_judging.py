"""The judging page through its real URLs."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import Judgment
from pooling.models import PoolItem
from tests.conftest import World

pytestmark = pytest.mark.django_db


def shown_item(html: str) -> PoolItem | None:
    match = re.search(r'data-item="(\d+)"', html)
    return PoolItem.objects.get(pk=int(match.group(1))) if match else None


def grade(client: Client, world: World, item: PoolItem, value: int, htmx: bool = False) -> str:
    url = reverse("judge_submit", args=[world.project.slug, item.pk])
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.post(url, {"grade": str(value), "seconds": "4.5"}, headers=headers)
    assert response.status_code == (200 if htmx else 302), response.content
    return response.content.decode()


def test_it_shows_one_item_then_the_next_after_a_grade(world: World) -> None:
    client = world.client_for(world.alice)
    page = client.get(reverse("judge", args=[world.project.slug])).content.decode()
    first = shown_item(page)
    assert first is not None
    assert first.query.text in page and first.document.text in page
    assert "0 / 8 judged" in page
    partial = grade(client, world, first, 2, htmx=True)
    assert "<html" not in partial  # htmx gets the panel only
    assert "1 / 8 judged" in partial
    second = shown_item(partial)
    assert second is not None and second != first
    judgment = Judgment.objects.get(user=world.alice)
    assert (judgment.pool_item, judgment.grade, judgment.seconds_spent) == (first, 2, 4.5)
    assert judgment.protocol == world.project.current_protocol()


def test_it_never_reveals_systems_or_ranks(world: World) -> None:
    client = world.client_for(world.alice)
    page = client.get(reverse("judge", args=[world.project.slug])).content.decode()
    item = shown_item(page)
    assert item is not None
    assert "provenance" not in page and "best_rank" not in page
    assert not re.search(r"\brank\b", page, re.IGNORECASE)


def test_it_stores_one_judgment_when_the_same_grade_is_sent_twice(world: World) -> None:
    client = world.client_for(world.alice)
    item = world.project.pools.get().items.first()
    assert item is not None
    grade(client, world, item, 3, htmx=True)
    grade(client, world, item, 1, htmx=True)  # a late second key press must not change the first
    assert list(Judgment.objects.values_list("grade", flat=True)) == [3]


def test_it_rejects_a_grade_outside_0_to_3(world: World) -> None:
    client = world.client_for(world.alice)
    item = world.project.pools.get().items.first()
    assert item is not None
    url = reverse("judge_submit", args=[world.project.slug, item.pk])
    for bad in ("4", "-1", "x", ""):
        assert client.post(url, {"grade": bad}).status_code == 400
    assert not Judgment.objects.exists()


def test_it_gives_each_annotator_their_own_queue(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    first = shown_item(alice.get(reverse("judge", args=[world.project.slug])).content.decode())
    assert first is not None
    grade(alice, world, first, 0)
    page = bob.get(reverse("judge", args=[world.project.slug])).content.decode()
    assert shown_item(page) == first  # bob still sees it, and nothing of alice's grade
    assert "0 / 8 judged" in page


def test_it_escapes_document_text(world: World) -> None:
    item = world.project.pools.get().items.order_by("position").first()
    assert item is not None
    item.document.text = '<script>alert("x")</script><b>bold</b> & more'
    item.document.title = "<img src=x onerror=alert(1)>"
    item.document.save()
    page = world.client_for(world.alice).get(reverse("judge", args=[world.project.slug]))
    html = page.content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>bold" not in html
    assert (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt; &amp; more"
        in html
    )


def test_it_says_when_everything_is_judged(world: World) -> None:
    client = world.client_for(world.alice)
    for item in world.project.pools.get().items.all():
        grade(client, world, item, 1)
    page = client.get(reverse("judge", args=[world.project.slug])).content.decode()
    assert shown_item(page) is None
    assert "All done" in page and "8 / 8 judged" in page


def test_it_orders_items_query_by_query(world: World) -> None:
    items = list(world.project.pools.get().items.order_by("position"))
    qids = [item.query_id for item in items]
    # each query's items are contiguous in the display order
    assert len({q for q in qids}) == len(
        [q for i, q in enumerate(qids) if i == 0 or qids[i - 1] != q]
    )
