"""The judging and lead pages as people use them: narrow screens, focus, search, confirmations."""

from __future__ import annotations

import pytest

from annotation.models import Project, Role
from annotation.services import membership_set
from tests.conftest import PASSWORD, make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, live_server, username: str, then: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next={then}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")


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
