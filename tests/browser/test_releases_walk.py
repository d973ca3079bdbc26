"""The whole of "is the new system better?" in a browser, as a lead walks it: release 1 is cut;
a second pool and more judging follow; release 2 is cut; its diff, the re-scored history, the
scoreboard, a paired comparison and the per-query inspector all work and show the stored
numbers. Nothing breaks the Content-Security-Policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.models import Release, RunEvaluation
from formats.trec import RunRow
from judging.pools import pool_open
from judging.services_import import judgments_import
from pooling.services import run_create
from tests.browser.test_csp import log_in, watched  # noqa: F401 (a fixture)
from tests.release_world import release_world, write_qrels

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def cut(page, live_server, slug: str) -> None:
    page.goto(f"{live_server.url}/p/{slug}/releases/")
    page.select_option("select[name=policy]", "adjudicated")
    with page.expect_navigation():
        page.get_by_role("button", name="Cut the release").click()
    page.locator("#rescore-done").wait_for()


def a_second_pool_judged(world, tmp_path: Path) -> int:
    """A new system finds a fifth document for q1-q8; a depth-1 pool of it adds those pairs,
    and alice grades them (as if she had judged them in the browser)."""
    project = world.project
    project.documents.create(docid="d5", title="Doc 5", text="Text of document 5.")
    ranked = {
        f"q{q}": [RunRow(f"q{q}", d, r, 9.0 - r, "e") for r, d in enumerate(("d5", "d1"), 1)]
        for q in range(1, 9)
    }
    run = run_create(project=project, name="e", ranked=ranked)
    pool = pool_open(project=project, runs=[run], depth=1, seed=3)
    grades = {(f"q{q}", "d5"): (3 if q % 2 else 0) for q in range(1, 9)}
    judgments_import(project=project, path=write_qrels(tmp_path / "more.qrels", grades),
                     name="alice", kind="human")  # fmt: skip
    return pool.added


def test_a_lead_walks_from_two_releases_to_one_querys_ranking(
    live_server,
    watched,  # noqa: F811
    tmp_path: Path,
) -> None:
    page, reports = watched
    world = release_world(tmp_path)
    slug = world.project.slug
    log_in(page, live_server, "lead", f"/p/{slug}/")
    cut(page, live_server, slug)
    assert a_second_pool_judged(world, tmp_path) == 8
    cut(page, live_server, slug)
    release = Release.objects.get(project=world.project, number=2)

    # The diff: the eight pairs the second pool and its judging added.
    assert page.locator("#diff-added").inner_text() == "8"
    # The history: every run under both releases (run e only exists under release 2).
    page.get_by_role("link", name="Every run under every release").click()
    assert page.locator("#history tbody tr[data-run]").count() == 4

    # The scoreboard, from the stored scores.
    page.goto(f"{live_server.url}/p/{slug}/releases/2/")
    page.get_by_role("link", name="Scoreboard").click()
    page.locator("#contract").wait_for()
    stored = RunEvaluation.objects.get(release=release, run__name="e")
    assert f"{stored.means['ndcg@10']:.3f}" in page.locator("tr[data-run=e]").inner_text()

    # A paired comparison: the new system against run b.
    page.goto(f"{live_server.url}/p/{slug}/releases/2/")
    page.get_by_role("link", name="Compare two runs").click()
    page.select_option("select[name=baseline]", "b")
    page.select_option("select[name=candidate]", "e")
    with page.expect_navigation():
        page.get_by_role("button", name="Compare", exact=True).click()
    assert "release 2" in page.locator("#line-set").inner_text()
    verdict = page.locator("#line-verdict").inner_text()
    assert verdict.split()[0] in ("improvement", "regression", "inconclusive")

    # One of the worst (or best) queries, in the inspector of the candidate.
    link = page.locator("a", has_text="candidate")
    row = page.locator("#worst tr, #best tr").filter(has=link).first
    qid = row.locator("td").first.inner_text()
    with page.expect_navigation():
        row.locator("a", has_text="candidate").click()
    page.locator("#ranking-table").wait_for()
    shown = float(page.locator("output[data-measure='ndcg@10']").get_attribute("data-server"))
    assert shown == pytest.approx(stored.per_query[qid]["ndcg@10"], abs=1e-12)
    assert reports == []
