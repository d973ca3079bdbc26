"""The inspector in a browser, on a real TREC DL 2019 run and its NIST grades: the numbers the
page's script computes equal the pure core's, for the run's order and after a document is
dragged or moved with the keyboard; what changed is marked; reset; the query picker and the
next-query link; no Content-Security-Policy violation."""

from __future__ import annotations

import math

import pytest

from annotation.models import Role
from annotation.services import membership_set, project_create
from evaluation.inspect import INSPECTED, K, inspect_query
from formats.trec import read_qrels, read_run
from pooling.models import RunResult
from pooling.services import run_create
from tests.browser.test_csp import log_in, watched  # noqa: F401 (a fixture)
from tests.conftest import DATA, make_user
from tests.test_inspector import make_release

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DL19 = DATA / "trec-dl-2019-passage"
RUN = "bm25base_p"
MEASURES = [*INSPECTED, f"dcg@{K}"]


def dl19_project():
    """A project holding one real run for three queries and a release of their NIST grades."""
    if not DL19.exists():
        pytest.skip("real TREC DL 2019 data (../shared/data) not present")
    qrels = read_qrels(DL19 / "qrels.dl19-passage.txt")
    qids = sorted(qrels)[:3]
    project = project_create(slug="dl19", name="DL 2019")
    ranked = read_run(DL19 / "runs" / f"{RUN}.judged-topics.run.gz")
    run = run_create(project=project, name=RUN, ranked={q: ranked[q] for q in qids})
    release = make_release(project, ((q, d, g) for q in qids for d, g in qrels[q].items()))
    membership_set(project=project, user=make_user("lena"), role=Role.LEAD)
    return project, run, release, {q: qrels[q] for q in qids}


def inspector_url(project, run, release, qid: str = "") -> str:
    path = f"/p/{project.slug}/releases/{release.number}/inspect/{run.pk}/"
    return f"{path}?qid={qid}" if qid else path


def ranking_of(run, qid: str) -> list[str]:
    rows = RunResult.objects.filter(run=run, qid=qid).order_by("rank")
    return list(rows.values_list("docid", flat=True))


def page_values(page) -> dict[str, float]:
    """The exact values the page's script computed (each output's data-value)."""
    found = page.eval_on_selector_all(
        "output[data-measure]", "els => els.map(e => [e.dataset.measure, e.dataset.value])"
    )
    return {name: float(value) for name, value in found}


def page_order(page) -> list[str]:
    return page.eval_on_selector_all(
        "#ranking-rows tr[data-docid]", "rows => rows.map(r => r.dataset.docid)"
    )


def core_values(order: list[str], ranking: list[str], grades: dict[str, int]) -> dict[str, float]:
    """The pure core's numbers for the top 100 in ``order`` and the rest as the run has it."""
    seen = inspect_query([*order, *ranking[len(order) :]], grades)
    return {**seen.values, f"dcg@{K}": seen.dcg}


def assert_same(shown: dict[str, float], expected: dict[str, float]) -> None:
    for name in MEASURES:
        assert math.isclose(shown[name], expected[name], abs_tol=1e-12), name


def moves_done(page, count: int) -> None:
    page.wait_for_function("n => Number(document.body.dataset.inspectorMoves || 0) >= n", arg=count)


def test_the_live_numbers_equal_the_pure_cores_as_documents_move(live_server, watched) -> None:  # noqa: F811
    page, reports = watched
    project, run, release, qrels = dl19_project()
    # A query whose best-graded document of the top 100 is not at rank 1 (1063750: rank 19).
    qid = next(
        q
        for q in sorted(qrels)
        if (inspect_query(ranking_of(run, q), qrels[q]).headroom.from_rank or 0) > 1
    )
    ranking = ranking_of(run, qid)
    grades = qrels[qid]
    seen = inspect_query(ranking, grades)
    assert seen.headroom.from_rank

    # Tall enough to show the dragged row and its target at once: a drag that has to scroll
    # the page starts on whatever row the scroll brought under the pointer.
    page.set_viewport_size({"width": 1400, "height": 3000})
    log_in(page, live_server, "lena", inspector_url(project, run, release, qid))
    page.wait_for_function("() => document.body.dataset.inspectorReady === '1'")
    assert page.locator("#inspector-mismatch").is_hidden()
    order = page_order(page)
    assert order == ranking[:100]
    assert_same(page_values(page), core_values(order, ranking, grades))

    # Drag the best-graded document of the top 100 onto rank 1: the headroom's move.
    rows = page.locator("#ranking-rows tr[data-docid]")
    rows.nth(seen.headroom.from_rank - 1).drag_to(rows.nth(0))
    moves_done(page, 1)
    order = page_order(page)
    assert order[0] == seen.headroom.docid
    shown = page_values(page)
    assert_same(shown, core_values(order, ranking, grades))
    assert math.isclose(shown["ndcg@10"], seen.headroom.ndcg_after, abs_tol=1e-12)
    ndcg = page.locator('output[data-measure="ndcg@10"]')
    assert "changed" in (ndcg.get_attribute("class") or "")
    assert (
        page.locator('[data-was="ndcg@10"]')
        .inner_text()
        .startswith(f"was {seen.values['ndcg@10']:.4f}")
    )
    assert page.locator("#ranking-rows tr.moved").count() == seen.headroom.from_rank

    # With the keyboard only: move the new top document down three ranks with its button.
    page.locator(f'#ranking-rows tr[data-docid="{order[0]}"] .move-down').focus()
    for _ in range(3):
        page.keyboard.press("Enter")
    moves_done(page, 4)
    order = page_order(page)
    assert order[3] == seen.headroom.docid
    assert_same(page_values(page), core_values(order, ranking, grades))

    # Drag a deep document into the top 10: recall@100 stays, judged@10 follows the grades.
    rows.nth(40).drag_to(rows.nth(2))
    moves_done(page, 5)
    order = page_order(page)
    assert_same(page_values(page), core_values(order, ranking, grades))

    # The ideal order of the top 100 is the perfect reranker's: the headroom's ceiling.
    page.locator("#inspector-ideal").click()
    moves_done(page, 6)
    assert math.isclose(page_values(page)["ndcg@10"], seen.headroom.window_ndcg, abs_tol=1e-12)

    page.locator("#inspector-reset").click()
    moves_done(page, 7)
    assert page_order(page) == ranking[:100]
    assert_same(page_values(page), core_values(ranking[:100], ranking, grades))
    assert page.locator("#inspector-reset").is_disabled()
    assert page.locator("output.changed").count() == 0
    assert reports == []


def test_the_lead_goes_from_query_to_query(live_server, watched) -> None:  # noqa: F811
    page, reports = watched
    project, run, release, qrels = dl19_project()
    first, second, third = sorted(qrels)
    log_in(page, live_server, "lena", inspector_url(project, run, release))
    assert page.locator("h1").inner_text().endswith(f"query {first} release v{release.number}")
    with page.expect_navigation():
        page.locator("#next-query").click()
    assert f"query {second}" in page.locator("h1").inner_text()
    page.locator("#qid-select").select_option(third)
    with page.expect_navigation():
        page.locator("#query-picker button[type=submit]").click()
    assert f"query {third}" in page.locator("h1").inner_text()
    assert page.locator("#next-query").count() == 0
    page.wait_for_function("() => document.body.dataset.inspectorReady === '1'")
    ranking = ranking_of(run, third)
    assert_same(page_values(page), core_values(ranking[:100], ranking, qrels[third]))
    assert reports == []
