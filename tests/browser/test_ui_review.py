"""The judging and lead pages as people use them: narrow screens, focus, search, confirmations."""

from __future__ import annotations

import pytest

from annotation.models import Project, Role
from annotation.services import membership_set
from tests.browser.panel import press_and_wait, shown
from tests.conftest import PASSWORD, make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, live_server, username: str, then: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next={then}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    # The judging page claims a query as it loads: wait for it (at once on other pages).
    page.wait_for_function("() => !document.getElementById('claim-form')")


def a_project(**people: str) -> Project:
    project = small_project()
    for username, role in people.items():
        membership_set(project=project, user=make_user(username), role=Role(role))
    return project


def overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_it_fits_a_phone_screen(live_server, page) -> None:
    project = a_project(alice="annotator", lena="lead")
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server, "alice", f"/p/{project.slug}/judge/")
    assert overflow(page) == 0
    assert page.locator("#progress-bar").bounding_box()["width"] > 100  # not squeezed to nothing
    page.keyboard.press("u")
    send_key = page.locator("#note-form button.primary kbd")
    colours = send_key.evaluate(
        "k => [getComputedStyle(k).color, getComputedStyle(k).backgroundColor]"
    )
    assert colours[0] != colours[1] and colours[1] != "rgb(250, 251, 252)"  # not white on white
    assert overflow(page) == 0

    log_in(page, live_server, "lena", f"/p/{project.slug}/judging/")
    assert page.locator("#per-query").is_visible()
    assert overflow(page) == 0  # the wide tables scroll inside their cards


def focused(page) -> str:
    return page.evaluate("document.activeElement.id")


def test_it_keeps_the_keyboard_where_it_is_needed(live_server, page) -> None:
    from annotation.services import protocol_publish

    project = a_project(alice="annotator")
    project.documents.update(text="A long page. " * 600)
    page.set_viewport_size({"width": 900, "height": 700})
    log_in(page, live_server, "alice", f"/p/{project.slug}/judge/")
    assert focused(page) == "doc-text"  # Page Down scrolls the document at once
    page.keyboard.press("PageDown")
    # A function, not an expression: Playwright polls an expression with eval, which the
    # Content-Security-Policy refuses.
    page.wait_for_function("() => document.getElementById('doc-text').scrollTop > 0")
    press_and_wait(page, "2")
    assert focused(page) == "doc-text"  # and again after the swap, not <body>

    page.keyboard.press("/")  # a search without a match leaves no orphan headings
    page.keyboard.type("zzzz 3")
    assert page.locator("#protocol-hits").inner_text() == "No match."
    assert page.locator("#protocol h3:visible, #protocol .protocol-block:visible").count() == 0
    page.keyboard.press("Escape")  # the search is emptied and the protocol whole again
    assert page.locator("#protocol-search").input_value() == ""
    assert page.locator("#protocol-hits").is_hidden()
    assert page.locator("#protocol .protocol-block:visible").count() > 0
    assert focused(page) == "doc-text"

    page.keyboard.press("s")  # a cancelled skip reason does not come back as an unsure note
    page.keyboard.type("broken page")
    page.keyboard.press("Escape")
    page.keyboard.press("u")
    assert page.locator("#note-input").input_value() == ""
    page.keyboard.press("Escape")

    protocol_publish(project=project, text="Grade 3: answers it fully. Grade 0: unrelated.")
    page.reload()
    page.locator("#protocol-change").wait_for()
    assert focused(page) == "ack-button"  # Enter acknowledges, no tabbing through the page
    page.keyboard.press("Enter")
    page.wait_for_function("() => !!document.getElementById('judge-panel').dataset.item")
    assert focused(page) == "doc-text"


def test_it_asks_before_releasing_a_claim_or_publishing(live_server, page) -> None:
    from django.contrib.auth.models import User

    from annotation.models import ProtocolVersion
    from judging.models import Claim, ClaimState
    from judging.services_claims import claim_next
    from pooling.services import current_pool

    project = a_project(alice="annotator", lena="lead")
    pool = current_pool(project)
    assert pool is not None
    claim = claim_next(pool=pool, user=User.objects.get(username="alice"))
    assert claim is not None
    asked: list[str] = []
    answer = {"yes": False}

    def on_dialog(dialog) -> None:
        asked.append(dialog.message)
        dialog.accept() if answer["yes"] else dialog.dismiss()

    page.on("dialog", on_dialog)
    log_in(page, live_server, "lena", f"/p/{project.slug}/judging/")
    assert "alice working on it 0/" in page.locator("#per-query").inner_text()  # as in the claims
    page.click("#claims button:has-text('Release')")
    assert "alice" in asked[-1]
    page.click("#claims button:has-text('Reassign')")
    assert len(asked) == 2
    claim.refresh_from_db()
    assert claim.state == ClaimState.ACTIVE  # dismissed: nothing was sent

    answer["yes"] = True
    with page.expect_navigation():
        page.click("#claims button:has-text('Release')")
    assert Claim.objects.get(pk=claim.pk).state == ClaimState.RELEASED

    answer["yes"] = False
    page.goto(f"{live_server.url}/p/{project.slug}/protocol/edit/")
    page.click("button[value=publish]")
    assert "never be edited" in asked[-1]
    assert ProtocolVersion.objects.filter(project=project).count() == 1


def test_it_shows_the_protocol_page_whole(live_server, page) -> None:
    from annotation.services import protocol_publish

    project = a_project(alice="annotator")
    protocol_publish(project=project, text="Grade 3: answers it.\n\n" + "A long rule. " * 900)
    page.set_viewport_size({"width": 1200, "height": 700})
    log_in(page, live_server, "alice", f"/p/{project.slug}/protocol/")
    panel = page.locator("#protocol")
    assert panel.evaluate("p => p.scrollHeight <= p.clientHeight")  # no box scrolling inside
    assert panel.get_by_text("open in full").count() == 0  # no link to the page itself
    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    assert page.locator("#protocol").get_by_text("open in full").count() == 1


def test_no_key_grades_while_the_help_covers_the_item(live_server, page) -> None:
    from judging.models import Judgment

    project = a_project(alice="annotator")
    log_in(page, live_server, "alice", f"/p/{project.slug}/judge/")
    first = shown(page)
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    page.keyboard.press("2")
    page.wait_for_timeout(300)
    assert shown(page) == first and not Judgment.objects.exists()
    page.keyboard.press("Escape")
    assert not page.locator("#help").is_visible()
    press_and_wait(page, "2")
    assert Judgment.objects.count() == 1
