"""Who sees what: outsiders get 404 everywhere, annotators get 403 on lead pages."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.conftest import World

pytestmark = pytest.mark.django_db


def project_urls(world: World) -> list[tuple[str, str]]:
    slug = world.project.slug
    item = world.project.pools.get().items.first()
    assert item is not None
    return [
        ("get", reverse("project_detail", args=[slug])),
        ("get", reverse("judge", args=[slug])),
        ("post", reverse("judge_submit", args=[slug, item.pk])),
        ("get", reverse("pool_detail", args=[slug])),
        ("post", reverse("pool_create", args=[slug])),
        ("get", reverse("qrels_download", args=[slug])),
    ]


def test_it_hides_every_project_url_from_outsiders(world: World) -> None:
    client = world.client_for(world.outsider)
    for method, url in project_urls(world):
        response = getattr(client, method)(url, {"grade": "3"})
        assert response.status_code == 404, url
    assert world.project.name not in client.get(reverse("home")).content.decode()


def test_it_answers_404_for_a_project_that_does_not_exist(world: World) -> None:
    client = world.client_for(world.alice)
    assert client.get(reverse("project_detail", args=["nope"])).status_code == 404


def test_it_keeps_annotators_out_of_lead_pages(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    assert client.get(reverse("pool_detail", args=[slug])).status_code == 403
    assert client.post(reverse("pool_create", args=[slug]), {"depth": 5}).status_code == 403
    assert client.get(reverse("qrels_download", args=[slug])).status_code == 403
    assert client.get(reverse("project_detail", args=[slug])).status_code == 200
    assert client.get(reverse("judge", args=[slug])).status_code == 200


def test_it_lets_leads_open_lead_pages(world: World) -> None:
    client = world.client_for(world.lead)
    slug = world.project.slug
    for name in ("pool_detail", "qrels_download", "project_detail", "judge"):
        assert client.get(reverse(name, args=[slug])).status_code == 200, name


def test_it_sends_anonymous_visitors_to_the_login_page(world: World) -> None:
    from django.test import Client

    response = Client().get(reverse("judge", args=[world.project.slug]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_refuses_a_grade_for_an_item_of_another_project(world: World) -> None:
    from tests.conftest import small_project

    other = small_project("other")
    foreign_item = other.pools.get().items.first()
    assert foreign_item is not None
    client = world.client_for(world.alice)
    url = reverse("judge_submit", args=[world.project.slug, foreign_item.pk])
    assert client.post(url, {"grade": "3"}).status_code == 404
    assert not foreign_item.judgments.exists()
