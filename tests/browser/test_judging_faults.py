"""An answer that fails on its way (a 5xx, a lost connection) is kept on the page and sent
again with the same idempotency key, by itself and with "Retry": stored once, never graded
again. Playwright's routing plays the faults between the browser and the live server."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from annotation.models import Role
from annotation.services import membership_set
from judging.models import Judgment
from tests.browser.panel import shown
from tests.conftest import PASSWORD, make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def judging(live_server, page) -> str:
    """Alice signed in on the judging page of a small project, an item on screen."""
    project = small_project()
    membership_set(project=project, user=make_user("alice"), role=Role.ANNOTATOR)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/judge/")
    assert shown(page)
    return project.slug


def wait_for_next_item(page, before: str) -> None:
    page.wait_for_function(
        "b => (document.getElementById('judge-panel').dataset.item || '') !== b",
        arg=before,
        timeout=20_000,
    )


def test_an_answer_stored_but_answered_503_is_retried_with_its_key_and_stored_once(
    live_server, page
) -> None:
    slug = judging(live_server, page)
    item = shown(page)
    sent: list[dict[str, list[str]]] = []

    def lose_the_first_response(route) -> None:
        sent.append(parse_qs(route.request.post_data or ""))
        if len(sent) == 1:
            route.fetch()  # the server stores the answer, but its answer never arrives
            route.fulfill(status=503, body="Service Unavailable")
        else:
            route.continue_()

    page.route(f"**/p/{slug}/judge/{item}/", lose_the_first_response)
    page.keyboard.press("2")
    status = page.locator("#judge-status")
    status.wait_for(state="visible")
    assert "Not saved yet (the server answered 503)" in status.inner_text()
    assert shown(page) == item  # the item stays, with its answer kept
    wait_for_next_item(page, item)  # sent again by itself a second later
    assert len(sent) == 2
    assert sent[0]["key"] == sent[1]["key"] and sent[0]["grade"] == sent[1]["grade"] == ["2"]
    assert list(Judgment.objects.values_list("pair_id", "grade")) == [(int(item), 2)]
    assert status.is_hidden()


def test_a_lost_connection_shows_a_message_and_retry_sends_the_same_answer(
    live_server, page
) -> None:
    slug = judging(live_server, page)
    item = shown(page)
    sent: list[dict[str, list[str]]] = []
    down = [True]

    def network(route) -> None:
        sent.append(parse_qs(route.request.post_data or ""))
        if down[0]:
            route.abort("connectionfailed")
        else:
            route.continue_()

    page.route(f"**/p/{slug}/judge/{item}/", network)
    page.keyboard.press("u")  # an unsure note: the text typed is kept too
    page.locator("#note-input").wait_for(state="visible")
    page.keyboard.type("two readings")
    page.keyboard.press("Enter")
    status = page.locator("#judge-status")
    status.wait_for(state="visible")
    assert "no connection to the server" in status.inner_text()
    page.wait_for_function("() => document.activeElement.id === 'retry-button'")
    page.wait_for_function(  # the automatic retries keep failing while the network is down
        "() => /attempt 3/.test(document.getElementById('judge-status').innerText)",
        timeout=10_000,
    )
    assert not Judgment.objects.exists() and shown(page) == item
    down[0] = False
    page.keyboard.press("Enter")  # on the focused Retry button
    wait_for_next_item(page, item)
    keys = {tuple(body["key"]) for body in sent}
    assert len(sent) >= 3 and len(keys) == 1  # every attempt with the same key
    rows = list(Judgment.objects.values_list("pair_id", "kind", "note"))
    assert rows == [(int(item), "unsure", "two readings")]
    assert status.is_hidden()
    assert page.evaluate("document.activeElement.id") == "doc-text"  # back to judging
