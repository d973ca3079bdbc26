"""A lead sets a project up in the browser: creates it, uploads its corpus and queries (sent by
the page's script with an upload bar, imported in the background), adds an annotator, whose
one-time link signs them in; no Content-Security-Policy violation on the way."""

from __future__ import annotations

import gzip
import re

import pytest

from annotation.models import Project, Role
from annotation.services import membership_set
from tests.browser.test_csp import log_in, log_out, watched  # noqa: F401  (a fixture)
from tests.conftest import make_user, small_project
from tests.test_projects_web import corpus_lines

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def upload(page, field: str, path) -> None:
    """Choose the file and send it; the page's script posts it (HX-Request) and then loads
    the Data page the server names."""
    page.set_input_files(f"input[name={field}]", str(path))
    with (
        page.expect_request(lambda r: r.method == "POST" and "/data/" in r.url) as sent,
        page.expect_navigation(),
    ):
        page.locator(f"#{field} button[type=submit]").click()
    assert sent.value.headers.get("hx-request") == "true"


def test_a_lead_sets_up_a_project_in_the_browser(live_server, watched, settings, tmp_path):  # noqa: F811
    settings.MEDIA_ROOT = tmp_path / "media"
    page, reports = watched
    membership_set(project=small_project(), user=make_user("lena"), role=Role.LEAD)

    log_in(page, live_server, "lena", "/")
    with page.expect_navigation():
        page.locator("#new-project").click()
    page.fill("input[name=slug]", "support")
    page.fill("input[name=name]", "Support search")
    with page.expect_navigation():
        page.locator("#project-new button[type=submit]").click()
    assert page.url.endswith("/p/support/data/")
    assert "you are its lead" in page.locator(".messages").inner_text()

    corpus = tmp_path / "corpus.jsonl.gz"
    corpus.write_bytes(gzip.compress(corpus_lines(2000)))
    upload(page, "corpus", corpus)
    queries = tmp_path / "queries.tsv"
    queries.write_text("n1\tfirst question\nn2\tsecond question\n")
    upload(page, "queries", queries)

    counts = page.locator("#data-counts").inner_text()
    assert re.search(r"documents\s+2000", counts) and re.search(r"queries\s+2", counts)
    assert page.locator("tr.import[data-state=done]").count() == 2
    assert "documents: 2000 created" in page.locator("#imports").inner_text()

    # An annotator with no account yet: the link is shown once and signs them in.
    page.goto(f"{live_server.url}/p/support/judging/")
    page.fill("#member-add input[name=username]", "nina")
    with page.expect_navigation():
        page.locator("#member-add button[type=submit]").click()
    link = page.locator("#signin-link-url").inner_text()
    log_out(page)
    page.goto(link)
    page.fill("input[name=new_password1]", "a long and new passphrase")
    page.fill("input[name=new_password2]", "a long and new passphrase")
    with page.expect_navigation():
        page.locator("#welcome-form button[type=submit]").click()
    assert page.url == f"{live_server.url}/p/support/"
    assert page.locator(".who").inner_text() == "nina"
    assert Project.objects.get(slug="support").memberships.count() == 2

    assert reports == []
