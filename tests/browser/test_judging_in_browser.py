"""An annotator judges a whole query with the keyboard alone, in a real browser."""

from __future__ import annotations

import pytest

from annotation.models import Role
from annotation.services import membership_set
from judging.models import Judgment, WorkItem
from pooling.models import Pair
from tests.browser.panel import press_and_wait, shown
from tests.conftest import PASSWORD, make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def expect_progress(page, done: int, total: int) -> None:
    page.wait_for_function(
        "t => document.getElementById('progress-text').innerText === t",
        arg=f"{done} / {total} judged",
    )
    assert page.locator("#progress-bar").get_attribute("value") == str(done)


def test_it_judges_a_whole_query_with_the_keyboard_only(live_server, page) -> None:
    project = small_project()
    annotator = make_user("alice")
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)

    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.keyboard.type("alice")  # the login form focuses the username field
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/judge/")
    first = Pair.objects.get(pk=int(shown(page)))
    items = [
        str(pk)
        for pk in WorkItem.objects.filter(unit__query=first.query)
        .order_by("position")
        .values_list("pair_id", flat=True)
    ]
    total = len(items)
    assert total >= 4
    expect_progress(page, 0, total)
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    page.keyboard.press("?")  # the help lists the keys, and hides again
    assert page.locator("#help").is_visible()
    page.keyboard.press("?")
    assert not page.locator("#help").is_visible()

    press_and_wait(page, "2")
    expect_progress(page, 1, total)
    press_and_wait(page, "z")  # undo: the first item is back
    assert shown(page) == items[0]
    expect_progress(page, 0, total)
    press_and_wait(page, "3")
    page.keyboard.press("u")  # unsure, with a note; Enter sends it
    page.locator("#note-input").wait_for(state="visible")
    page.keyboard.type("is a changelog an answer? 2 or 3")  # digits typed are not grades
    before = shown(page)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "b => document.getElementById('judge-panel').dataset.item !== b", arg=before
    )
    expect_progress(page, 2, total)
    assert page.evaluate("window.__sameDocument") is True  # swapped in by htmx, no reload

    page.reload()  # half-way: the refresh resumes at the right item
    assert shown(page) == items[2]
    expect_progress(page, 2, total)

    for done in range(2, total):
        assert shown(page) == items[done]
        press_and_wait(page, "1")
    assert shown(page) not in items  # the next query has been claimed and shown
    expect_progress(page, 0, Pair.objects.get(pk=int(shown(page))).query.pairs.count())

    rows = list(Judgment.objects.filter(user=annotator).order_by("pk"))
    assert [(r.kind, r.grade) for r in rows] == [
        ("grade", 2),
        ("undo", None),
        ("grade", 3),
        ("unsure", None),
    ] + [("grade", 1)] * (total - 2)
    assert [str(r.pair_id) for r in rows[2:]] == items
    assert rows[3].note == "is a changelog an answer? 2 or 3"
    assert all(r.seconds_spent > 0 for r in rows if r.kind != "undo")


def test_it_says_so_when_the_query_was_taken_away_meanwhile(live_server, page) -> None:
    from judging.models import Claim
    from judging.services_claims import claim_reassign

    project = small_project()
    alice, bob = make_user("alice"), make_user("bob")
    for user in (alice, bob):
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/judge/")
    first = Pair.objects.get(pk=int(shown(page)))
    claim_reassign(claim=Claim.objects.get(user=alice), to=bob)  # a lead moves the query

    page.keyboard.press("2")  # answered on a stale page: refused (409), and the panel says why
    page.locator(".flash").wait_for()
    assert "not in the query you are working on" in page.locator(".flash").inner_text()
    assert Pair.objects.get(pk=int(shown(page))).query != first.query  # the next query
    assert not Judgment.objects.exists()
