"""The agreement page in a browser: its charts draw, the noise floor arrives by htmx, a cell of
the matrix opens that pair of people, and nothing breaks the Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from annotation.models import Role
from annotation.services import membership_set
from judging.models import WorkUnit
from tests.agreement_judging import empty_cache, judge_through_api  # noqa: F401 (a fixture)
from tests.browser.test_csp import log_in, watched  # noqa: F401 (a fixture)
from tests.conftest import make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _grades(bias: int) -> Callable[[str, str], int]:
    return lambda qid, docid: (int(docid[1:]) + bias * int(qid[1:])) % 4


def test_the_lead_reads_agreement_in_the_browser(live_server, watched) -> None:  # noqa: F811
    page, reports = watched
    project = small_project()
    WorkUnit.objects.filter(pool__project=project).update(judges_needed=2)
    membership_set(project=project, user=make_user("lena"), role=Role.LEAD)
    for name, bias in (("alice", 0), ("bob", 1)):
        user = make_user(name)
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
        client = Client()
        client.force_login(user)
        judge_through_api(client, project.slug, _grades(bias))

    log_in(page, live_server, "lena", f"/p/{project.slug}/")
    page.get_by_role("link", name="Agreement", exact=True).click()
    page.locator("#kappa").wait_for()
    assert page.locator("svg.heatmap").first.is_visible()
    assert page.locator("svg.kappa-plot").is_visible()
    # The noise floor is loaded by htmx after the page: two runs, so a floor.
    page.locator("#noise-floor").wait_for()
    assert (
        "nDCG@10 between two systems can flip with who judged"
        in page.locator("#noise").inner_text()
    )
    with page.expect_navigation():
        page.locator("#people-matrix a").first.click()
    assert "a=alice" in page.url and "b=bob" in page.url
    assert "alice (A) against bob (B)" in page.locator("#headline h2").inner_text()
    assert reports == []
