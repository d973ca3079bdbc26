"""Blind double-judging: the second judge can learn nothing of the first from anything they
can fetch, pages, htmx partials or the API."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import Claim, Judgment, WorkUnit
from tests.conftest import World
from tests.judging_helpers import answer, judge_page, shown_item, undo

pytestmark = pytest.mark.django_db

SECRET_NOTE = "first-judge-private-note"


def make_everything_double(world: World) -> None:
    WorkUnit.objects.filter(pool__project=world.project).update(judges_needed=2)


def judge_whole_query(client: Client, slug: str) -> dict[int, int]:
    """Judge the query on screen; returns item id -> grade. Uses unsure and undo on the way."""
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    page = answer(client, slug, page, kind="unsure", note=SECRET_NOTE)
    page = undo(client, slug, page)
    grades: dict[int, int] = {}
    while (item := shown_item(page)) is not None and item.query == first.query:
        grades[item.pk] = 3 if len(grades) % 2 else 2
        page = answer(client, slug, page, grades[item.pk])
    return grades


def normalised(html: str) -> str:
    """A page without what differs between two renderings anyway: keys, CSRF tokens, times."""
    html = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "KEY", html)
    return re.sub(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+', r"\1TOKEN", html)


def everything_bob_can_fetch(world: World, bob: Client) -> list[str]:
    slug = world.project.slug
    gets = ["judge", "project_detail", "protocol_detail", "api_queue", "api_next", "home"]
    bodies = []
    for name in gets:
        url = reverse(name) if name == "home" else reverse(name, args=[slug])
        response = bob.get(url)
        assert response.status_code == 200, name
        bodies.append(response.content.decode())
    for name in ("judge_claim", "api_next"):  # what claiming answers (reading never claims)
        response = bob.post(reverse(name, args=[slug]), headers={"HX-Request": "true"})
        assert response.status_code == 200, name
        bodies.append(response.content.decode())
    for name in (
        "qrels_download",
        "judging_overview",
        "agreement_dashboard",
        "agreement_noise",
        "api_agreement",
    ):
        response = bob.get(reverse(name, args=[slug]))
        assert response.status_code == 403, name  # exports and lead pages stay closed
    return bodies


def test_it_hides_the_first_judges_work_from_the_second(world: World) -> None:
    make_everything_double(world)
    slug = world.project.slug
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    grades = judge_whole_query(alice, slug)
    unit = Claim.objects.get(user=world.alice, state="done").unit

    bodies = everything_bob_can_fetch(world, bob)
    assert Claim.objects.get(user=world.bob, state="active").unit == unit  # bob is the second
    page = judge_page(bob, slug)
    done = 0
    while (item := shown_item(page)) is not None and item.pk in grades:
        bodies.append(page)
        api = bob.post(reverse("api_next", args=[slug])).json()
        bodies.append(json.dumps(api))
        assert set(api["item"]) == {"id", "query", "document"}
        assert api["done_in_query"] == done  # bob's own count, never alice's
        page = answer(bob, slug, page, 0)
        bodies.append(page)
        done += 1
    assert done == len(grades)
    for body in bodies:
        assert "alice" not in body
        assert SECRET_NOTE not in body
        assert not re.search(r"double|second judge|other judge|judged by", body, re.IGNORECASE)


def test_it_shows_the_second_judge_the_same_page_whatever_the_first_said(world: World) -> None:
    make_everything_double(world)
    slug = world.project.slug
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    grades = judge_whole_query(alice, slug)
    before = [normalised(judge_page(bob, slug))]
    before.append(normalised(bob.get(reverse("api_queue", args=[slug])).content.decode()))
    item_id = next(iter(grades))
    # alice changes her mind through the API: a new row, a different current grade
    Claim.objects.filter(user=world.alice, state="active").update(state="released")
    Claim.objects.filter(user=world.alice, state="done").update(state="active")
    response = alice.post(
        reverse("api_judgments", args=[slug]),
        {"item": item_id, "grade": 0, "idempotency_key": "0b4f8f0e-1d7a-4c1e-9d41-8f0c2e0a5f11"},
        content_type="application/json",
    )
    assert response.status_code == 201
    Claim.objects.filter(user=world.alice, state="active").update(state="done")
    after = [normalised(judge_page(bob, slug))]
    after.append(normalised(bob.get(reverse("api_queue", args=[slug])).content.decode()))
    assert after == before
    latest = Judgment.objects.filter(user=world.alice, pair_id=item_id).latest("pk")
    assert (latest.kind, latest.grade) == ("grade", 0)


def test_it_refuses_to_replay_another_judges_submission_key(world: World) -> None:
    make_everything_double(world)
    slug = world.project.slug
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    judge_whole_query(alice, slug)
    stolen = str(Judgment.objects.filter(user=world.alice, kind="grade").first().idempotency_key)  # type: ignore[union-attr]
    page = judge_page(bob, slug)
    reply = answer(bob, slug, page, 1, key=stolen, status=409)
    assert "alice" not in reply
    assert not Judgment.objects.filter(user=world.bob).exists()
