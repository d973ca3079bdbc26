"""Releases in a browser: a lead opens Releases from the project, previews the counts, cuts
release 1 (its runs scored by the time the page shows), downloads its qrels, cuts release 2
with the LLM labels, reads the diff and the history under another measure. Nothing breaks the
Content-Security-Policy."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from evaluation.models import Release, RunEvaluation
from tests.browser.test_csp import log_in, watched  # noqa: F401 (a fixture)
from tests.release_world import release_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_lead_cuts_two_releases_and_reads_the_diff_and_history(
    live_server,
    watched,  # noqa: F811
    tmp_path: Path,
) -> None:
    page, reports = watched
    world = release_world(tmp_path)
    log_in(page, live_server, "lead", f"/p/{world.project.slug}/")
    page.get_by_role("link", name="Releases", exact=True).click()
    page.locator("#no-releases").wait_for()
    page.select_option("select[name=policy]", "adjudicated")
    with page.expect_navigation():
        page.get_by_role("button", name="Preview the counts").click()
    assert "would hold 32 labels" in page.locator("#release-preview").inner_text()
    page.fill("input[name=note]", "first cut")
    with page.expect_navigation():
        page.get_by_role("button", name="Cut the release").click()
    page.locator("#rescore-done").wait_for()
    assert "3 runs scored under release 1" in page.locator("#rescore").inner_text()
    release = Release.objects.get(number=1)
    assert page.locator("#content-hash").inner_text() == release.content_hash
    with page.expect_download() as download:
        page.get_by_role("link", name="TREC qrels").click()
    saved = Path(download.value.path())
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == release.content_hash
    assert download.value.suggested_filename == "rel-release-1.qrels"

    page.goto(f"{live_server.url}/p/{world.project.slug}/releases/")
    page.select_option("select[name=policy]", "llm")
    with page.expect_navigation():
        page.get_by_role("button", name="Cut the release").click()
    page.locator("#rescore-done").wait_for()
    assert page.locator("#diff-added").inner_text() == "4"
    with page.expect_navigation():
        page.get_by_role("link", name="Every pair that changed, and why").click()
    assert page.locator("#added tbody tr").count() == 4
    page.get_by_role("link", name="v2").first.click()
    page.get_by_role("link", name="Every run under every release").click()
    assert page.locator("#history tbody tr[data-run]").count() == 3
    page.select_option("select[name=metric]", "map")
    with page.expect_navigation():
        page.get_by_role("button", name="Show").click()
    b = RunEvaluation.objects.get(release__number=2, run__name="b").means["map"]
    assert f"{b:.3f}" in page.locator("#history tr[data-run=b]").inner_text()
    assert reports == []
