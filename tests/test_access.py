"""Who sees what: outsiders get 404 everywhere, annotators get 403 on lead pages."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import Claim, WorkUnit
from judging.services import claim_next
from tests.conftest import World

pytestmark = pytest.mark.django_db


def lead_urls(world: World) -> list[tuple[str, str]]:
    slug = world.project.slug
    pool = world.project.pools.get()
    item = pool.items.first()
    unit = WorkUnit.objects.filter(pool=pool).first()
    claim = claim_next(pool=pool, user=world.bob)
    assert item is not None and unit is not None and isinstance(claim, Claim)
    return [
        ("get", reverse("pool_detail", args=[slug])),
        ("post", reverse("pool_create", args=[slug])),
        ("get", reverse("qrels_download", args=[slug])),
        ("get", reverse("judging_overview", args=[slug])),
        ("get", reverse("judging_unit", args=[slug, unit.pk])),
        ("get", reverse("judging_item", args=[slug, item.pair_id])),
        ("post", reverse("pool_preview", args=[slug])),
        ("get", reverse("pool_view", args=[slug, pool.pk])),
        ("post", reverse("judging_claim_release", args=[slug, claim.pk])),
        ("post", reverse("judging_claim_reassign", args=[slug, claim.pk])),
        ("post", reverse("judging_member_add", args=[slug])),
        ("post", reverse("judging_policy", args=[slug])),
        ("get", reverse("protocol_edit", args=[slug])),
        ("post", reverse("protocol_edit", args=[slug])),
    ]


def member_urls(world: World) -> list[tuple[str, str]]:
    slug = world.project.slug
    item = world.project.pools.get().items.first()
    assert item is not None
    return [
        ("get", reverse("project_detail", args=[slug])),
        ("get", reverse("judge", args=[slug])),
        ("post", reverse("judge_submit", args=[slug, item.pair_id])),
        ("post", reverse("judge_undo", args=[slug])),
        ("post", reverse("judge_release", args=[slug])),
        ("post", reverse("judge_acknowledge", args=[slug, 1])),
        ("get", reverse("protocol_detail", args=[slug])),
        ("get", reverse("protocol_diff", args=[slug]) + "?to=1"),
        ("get", reverse("api_queue", args=[slug])),
        ("get", reverse("api_next", args=[slug])),
        ("post", reverse("api_judgments", args=[slug])),
        ("post", reverse("api_protocol_ack", args=[slug])),
    ]


def call(client: Client, method: str, url: str) -> int:
    return getattr(client, method)(
        url, {"grade": "3", "to": "alice", "username": "olaf"}
    ).status_code


def test_it_hides_every_project_url_from_outsiders(world: World) -> None:
    client = world.client_for(world.outsider)
    for method, url in member_urls(world) + lead_urls(world):
        assert call(client, method, url) == 404, url
    assert world.project.name not in client.get(reverse("home")).content.decode()


def test_it_answers_404_for_a_project_that_does_not_exist(world: World) -> None:
    client = world.client_for(world.alice)
    assert client.get(reverse("project_detail", args=["nope"])).status_code == 404
    assert client.get(reverse("api_next", args=["nope"])).status_code == 404


def test_it_keeps_annotators_out_of_lead_pages(world: World) -> None:
    client = world.client_for(world.alice)
    for method, url in lead_urls(world):
        assert call(client, method, url) == 403, url
    slug = world.project.slug
    for name in ("project_detail", "judge", "protocol_detail", "api_queue", "api_next"):
        assert client.get(reverse(name, args=[slug])).status_code == 200, name
    assert not world.project.memberships.filter(user=world.outsider).exists()


def test_it_lets_leads_open_lead_pages(world: World) -> None:
    client = world.client_for(world.lead)
    for method, url in lead_urls(world):
        if method == "get":
            assert client.get(url).status_code == 200, url


def test_it_sends_anonymous_visitors_to_the_login_page(world: World) -> None:
    response = Client().get(reverse("judge", args=[world.project.slug]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert Client().get(reverse("api_next", args=[world.project.slug])).status_code in (401, 403)


def test_it_refuses_a_grade_for_an_item_of_another_project(world: World) -> None:
    from tests.conftest import small_project

    other = small_project("other")
    foreign_item = other.pools.get().items.first()
    assert foreign_item is not None
    foreign_pair = foreign_item.pair
    assert foreign_item is not None
    client = world.client_for(world.alice)
    url = reverse("judge_submit", args=[world.project.slug, foreign_pair.pk])
    data = {"grade": "3", "key": "9f1c2b1e-34a7-4d5e-9d54-0e4f7a6f2b11"}
    assert client.post(url, data).status_code == 404
    assert not foreign_pair.judgments.exists()


def test_a_lead_cannot_read_another_projects_pair_or_pool_through_their_own(
    world: World,
) -> None:
    from tests.conftest import small_project

    other = small_project("other")
    pool = other.pools.get()
    item = pool.items.first()
    assert item is not None
    lead = world.client_for(world.lead)
    slug = world.project.slug
    assert lead.get(reverse("judging_item", args=[slug, item.pair_id])).status_code == 404
    assert lead.get(reverse("pool_view", args=[slug, pool.pk])).status_code == 404
