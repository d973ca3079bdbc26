"""An annotator judges with the keyboard alone, in a real browser."""

from __future__ import annotations

import pytest

from annotation.models import Role
from annotation.services import membership_set
from judging.models import Judgment
from tests.conftest import PASSWORD, make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_judges_three_items_with_the_keyboard_and_moves_the_progress(live_server, page) -> None:
    project = small_project()
    annotator = make_user("alice")
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    total = project.pools.get().items.count()

    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.keyboard.type("alice")  # the login form focuses the username field
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/judge/")
    progress = page.locator("#progress-text")
    assert progress.inner_text() == f"0 / {total} judged"
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    shown = []
    for done, key in enumerate("203", start=1):
        shown.append(page.locator("#judge-panel").get_attribute("data-item"))
        page.keyboard.press(key)
        page.wait_for_function(
            "t => document.getElementById('progress-text').innerText === t",
            arg=f"{done} / {total} judged",
        )
        assert page.locator("#progress-bar").get_attribute("value") == str(done)

    assert page.evaluate("window.__sameDocument") is True  # swapped in by htmx, no reload
    judgments = list(Judgment.objects.filter(user=annotator).order_by("created_at"))
    assert [j.grade for j in judgments] == [2, 0, 3]
    assert [str(j.pool_item_id) for j in judgments] == shown
    assert all(j.seconds_spent > 0 for j in judgments)
    assert len(set(shown)) == 3
