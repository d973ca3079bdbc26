"""The annotator's API: token authentication, queue, next item, idempotent submissions."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from judging import services
from judging.models import Claim, ClaimState, Judgment
from judging.services_claims import claim_release
from tests.conftest import PASSWORD, World
from tests.judging_helpers import before_calling, places_out_of_step

pytestmark = pytest.mark.django_db


def token_client(world: World, username: str) -> APIClient:
    client = APIClient()
    response = client.post(reverse("api_token"), {"username": username, "password": PASSWORD})
    assert response.status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    return client


def submit(client: APIClient, slug: str, **data: object) -> tuple[int, dict]:
    response = client.post(reverse("api_judgments", args=[slug]), data, format="json")
    return response.status_code, response.json()


def test_it_serves_the_next_item_and_stores_a_grade(world: World) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    nxt = client.post(reverse("api_next", args=[slug])).json()
    assert nxt["state"] == "item" and nxt["done_in_query"] == 0
    item = nxt["item"]
    assert set(item) == {"id", "query", "document"}
    assert set(item["document"]) == {"docid", "title", "text"}
    status, body = submit(
        client, slug, item=item["id"], grade=2, seconds_spent=3.5,
        idempotency_key=nxt["idempotency_key"],
    )  # fmt: skip
    assert status == 201 and body["created"] is True
    assert (body["grade"], body["kind"], body["protocol"]) == (2, "grade", 1)
    after = client.post(reverse("api_next", args=[slug])).json()
    assert after["done_in_query"] == 1 and after["item"]["id"] != item["id"]


def test_it_stores_one_judgment_for_a_repeated_key(world: World) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    nxt = client.post(reverse("api_next", args=[slug])).json()
    key = nxt["idempotency_key"]
    first = submit(client, slug, item=nxt["item"]["id"], grade=3, idempotency_key=key)
    again = submit(client, slug, item=nxt["item"]["id"], grade=0, idempotency_key=key)
    assert (first[0], again[0]) == (201, 200)
    assert again[1]["id"] == first[1]["id"] and again[1]["grade"] == 3
    assert again[1]["created"] is False
    assert Judgment.objects.count() == 1


def to_last_item(client: APIClient, slug: str) -> dict:
    """Answer the query held until one item is left; returns that item's `next` reply."""
    nxt = client.post(reverse("api_next", args=[slug])).json()
    while nxt["done_in_query"] < nxt["total_in_query"] - 1:
        key = nxt["idempotency_key"]
        assert submit(client, slug, item=nxt["item"]["id"], grade=1, idempotency_key=key)[0] == 201
        nxt = client.post(reverse("api_next", args=[slug])).json()
    return nxt


def test_it_keeps_a_late_last_answer_but_not_as_closing_a_released_query(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    last = to_last_item(client, slug)
    claim = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    # A lead releases the query just as its last answer is about to close it.
    release = partial(claim_release, claim=claim)
    before_calling(monkeypatch, services, "_finish_if_complete", release)
    key = last["idempotency_key"]
    status, body = submit(client, slug, item=last["item"]["id"], grade=2, idempotency_key=key)
    assert status == 201 and Judgment.objects.filter(pk=body["id"]).exists()  # answer kept
    claim.refresh_from_db()
    assert (claim.state, claim.finished_at) == (ClaimState.RELEASED, None)
    assert places_out_of_step(world.project.pools.get()) == {}


def test_it_refuses_a_key_already_used_for_another_answer(world: World) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    nxt = client.post(reverse("api_next", args=[slug])).json()
    item, key = nxt["item"]["id"], nxt["idempotency_key"]
    first = submit(client, slug, item=item, grade=3, idempotency_key=key)
    other = client.post(reverse("api_next", args=[slug])).json()["item"]["id"]
    status, body = submit(client, slug, item=other, grade=1, idempotency_key=key)
    assert status == 409 and "already used for another answer" in body["detail"]
    status, _ = submit(client, slug, item=item, kind="undo", idempotency_key=key)
    assert status == 409  # an undo of the same item is another answer too
    again = submit(client, slug, item=item, grade=3, idempotency_key=key)
    assert again[0] == 200 and again[1]["id"] == first[1]["id"]  # a true repeat
    assert list(Judgment.objects.values_list("pair_id", "kind")) == [(item, "grade")]


@pytest.mark.parametrize("seconds", ["nan", "inf", "-Infinity"])
def test_it_refuses_seconds_that_are_not_a_finite_number(world: World, seconds: str) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    item = client.post(reverse("api_next", args=[slug])).json()["item"]["id"]
    data = {"item": item, "grade": 2, "seconds_spent": seconds, "idempotency_key": uuid.uuid4()}
    response = client.post(reverse("api_judgments", args=[slug]), data)  # a form, as a browser
    assert response.status_code == 400
    assert not Judgment.objects.exists()


def test_it_shows_the_queue_without_claiming(world: World) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    queue = client.get(reverse("api_queue", args=[slug])).json()
    assert queue == {"protocol": 1, "protocol_change": None, "active": None, "finished_queries": 0}
    assert not Claim.objects.exists()
    client.post(reverse("api_next", args=[slug]))
    queue = client.get(reverse("api_queue", args=[slug])).json()
    assert queue["active"]["done"] == 0 and queue["active"]["total"] in (3, 5)


def test_it_refuses_items_outside_the_claim_and_bad_answers(world: World) -> None:
    alice, bob = token_client(world, "alice"), token_client(world, "bob")
    slug = world.project.slug
    alices = alice.post(reverse("api_next", args=[slug])).json()["item"]["id"]
    bob.post(reverse("api_next", args=[slug]))
    status, body = submit(bob, slug, item=alices, grade=1, idempotency_key=str(uuid.uuid4()))
    assert status == 409 and "not in the query you are working on" in body["detail"]
    status, _ = submit(alice, slug, item=alices, grade=7, idempotency_key=str(uuid.uuid4()))
    assert status == 400
    status, _ = submit(alice, slug, item=alices, kind="skip", idempotency_key=str(uuid.uuid4()))
    assert status == 400  # a skip needs a reason
    status, _ = submit(alice, slug, item=10**9, grade=1, idempotency_key=str(uuid.uuid4()))
    assert status == 404
    assert not Judgment.objects.exists()


def test_it_records_unsure_skip_and_undo(world: World) -> None:
    client = token_client(world, "alice")
    slug = world.project.slug
    item = client.post(reverse("api_next", args=[slug])).json()["item"]["id"]
    for data in (
        {"kind": "unsure", "note": "hmm"},
        {"kind": "undo"},
        {"kind": "skip", "note": "broken page"},
    ):
        status, _ = submit(client, slug, item=item, idempotency_key=str(uuid.uuid4()), **data)
        assert status == 201, data
    status, _ = submit(client, slug, item=item, kind="undo", idempotency_key=str(uuid.uuid4()))
    assert status == 201
    status, _ = submit(client, slug, item=item, kind="undo", idempotency_key=str(uuid.uuid4()))
    assert status == 409  # nothing left to undo
    kinds = list(Judgment.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == ["unsure", "undo", "skip", "undo"]


def test_it_applies_the_page_access_rules(world: World) -> None:
    slug = world.project.slug
    outsider = token_client(world, "olaf")
    assert outsider.get(reverse("api_next", args=[slug])).status_code == 404
    assert APIClient().get(reverse("api_next", args=[slug])).status_code in (401, 403)
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert bad.get(reverse("api_next", args=[slug])).status_code in (401, 403)
    assert ApiToken.objects.filter(user__username="olaf").exists()


def test_it_acknowledges_a_protocol_version(world: World) -> None:
    from annotation.services import protocol_publish

    client = token_client(world, "alice")
    slug = world.project.slug
    nxt = client.post(reverse("api_next", args=[slug])).json()
    submit(client, slug, item=nxt["item"]["id"], grade=1, idempotency_key=nxt["idempotency_key"])
    protocol_publish(project=world.project, text="Grade 3: answers it fully.")
    blocked = client.post(reverse("api_next", args=[slug])).json()
    assert blocked["state"] == "acknowledge" and blocked["item"] is None
    assert client.post(reverse("api_protocol_ack", args=[slug]), {"version": 2}).status_code == 200
    assert client.post(reverse("api_next", args=[slug])).json()["state"] == "item"


def test_it_describes_the_endpoints_in_the_openapi_schema(world: World) -> None:
    client = token_client(world, "alice")
    schema = client.get(reverse("api_schema"), {"format": "json"}).json()
    paths = schema["paths"]
    for path in ("queue", "next", "judgments", "protocol/ack"):
        assert f"/api/projects/{{slug}}/{path}/" in paths, path
    post = paths["/api/projects/{slug}/judgments/"]["post"]
    assert {"200", "201", "409"} <= set(post["responses"])
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_it_never_claims_on_get_or_head_and_claims_on_post(world: World) -> None:
    client = token_client(world, "alice")
    url = reverse("api_next", args=[world.project.slug])
    head = client.head(url)
    got = client.get(url)
    assert (head.status_code, got.status_code) == (200, 200)
    assert not Claim.objects.exists()
    assert got.json()["state"] == "none" and got.json()["item"] is None
    claimed = client.post(url)
    assert claimed.status_code == 200
    assert Claim.objects.filter(user=world.alice, state=ClaimState.ACTIVE).count() == 1
    body = claimed.json()
    assert body["state"] == "item"
    # GET now reads the item held: the same body as the POST answered, bar the fresh key.
    again = client.get(url).json()
    assert set(again) == set(body) == set(got.json())
    assert {k: v for k, v in again.items() if k != "idempotency_key"} == {
        k: v for k, v in body.items() if k != "idempotency_key"
    }
    client.post(url)  # holding a query: nothing more is claimed
    assert Claim.objects.filter(user=world.alice).count() == 1


def test_it_documents_get_and_post_of_the_next_item(world: World) -> None:
    client = world.client_for(world.alice)
    schema = client.get(reverse("api_schema"), {"format": "json"}).json()
    operations = schema["paths"]["/api/projects/{slug}/next/"]
    assert {"get", "post"} <= set(operations)
    assert "read only" in operations["get"]["summary"]
    assert "Claim" in operations["post"]["summary"]
    for method in ("get", "post"):
        content = operations[method]["responses"]["200"]["content"]["application/json"]
        assert content["schema"]["$ref"].endswith("/NextOut")
