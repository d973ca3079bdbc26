"""Judging through the annotator's API as a person would, for the agreement tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

Answer = int | str  # a grade, or "unsure" / "skip"


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    """The dashboard is cached by the newest judgment id, and ids start again in every test's
    database: each test starts with an empty cache, as a new server would. (Autouse in every
    module that imports it.)"""
    cache.clear()
    yield
    cache.clear()


def judge_through_api(
    client: Client,
    slug: str,
    answer_for: Callable[[str, str], Answer],
    leave_last: bool = False,
) -> int:
    """Claim query after query and answer every item with ``answer_for(qid, docid)`` until
    nothing is left; acknowledge a new protocol version when asked. With ``leave_last``, each
    query's last item is left unanswered and the query given back (released), so that two
    others can still claim it: how a third person's grades end up on a double-judged pair.
    When only given-back queries are left, the person holds one of them again: a lead then
    releases it (`release_as_lead`). Returns the number of answers sent."""
    sent = 0
    released: set[str] = set()
    while True:
        screen = client.post(reverse("api_next", args=[slug])).json()
        if screen["state"] == "acknowledge":
            version = screen["protocol_change"]["current"]
            acked = client.post(
                reverse("api_protocol_ack", args=[slug]),
                {"version": version},
                content_type="application/json",
            )
            assert acked.status_code == 200
            continue
        if screen["state"] != "item":
            return sent
        item = screen["item"]
        if item["query"]["qid"] in released:  # only the queries given back are left
            return sent
        if leave_last and screen["done_in_query"] == screen["total_in_query"] - 1:
            # As the judging page sends it (htmx): the answer is the panel of the next query.
            given_back = client.post(
                reverse("judge_release", args=[slug]), headers={"HX-Request": "true"}
            )
            assert given_back.status_code == 200
            released.add(item["query"]["qid"])
            continue
        given = answer_for(item["query"]["qid"], item["document"]["docid"])
        body: dict[str, object] = {"item": item["id"], "idempotency_key": str(uuid.uuid4())}
        if isinstance(given, int):
            body["grade"] = given
        else:  # a skip says why, as the judging page asks
            body |= {"kind": given, "note": "the document is broken" if given == "skip" else ""}
        response = client.post(
            reverse("api_judgments", args=[slug]), body, content_type="application/json"
        )
        assert response.status_code == 201, response.content
        sent += 1


def release_as_lead(lead: Client, slug: str, claim_id: int) -> None:
    """A lead takes a query away from whoever holds it, from the judging page."""
    url = reverse("judging_claim_release", args=[slug, claim_id])
    assert lead.post(url).status_code in (200, 302)
