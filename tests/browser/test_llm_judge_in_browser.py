"""The LLM judge's pages in a browser: a lead opens the Judges page from the project, calibrates
an external judge whose labels were imported, reads why the gate refused it and sees the
heatmap; and adds a judge in the form, whose Label at scale stays off until a calibration
passes. Nothing breaks the Content-Security-Policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from judging.models import Calibration, LLMJudge
from judging.services_import import judgments_import
from tests.agreement_judging import empty_cache  # noqa: F401 (a fixture)
from tests.browser.test_csp import log_in, watched  # noqa: F401 (a fixture)
from tests.llm_project import server  # noqa: F401 (a fixture)
from tests.llm_server import LLMServer, Reply
from tests.test_agreement_dashboard import ALICE, double_judged_project, judge, team_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_lead_calibrates_a_judge_and_reads_why_it_was_refused(
    live_server,
    watched,  # noqa: F811
    tmp_path: Path,
) -> None:
    page, reports = watched
    team = team_of(double_judged_project())
    judge(team)
    labels = tmp_path / "umbrela.qrels"
    labels.write_text(
        "".join(f"q{q} 0 d{d} {(d + 1) % 4}\n" for q in range(2) for d in range(5)), "utf-8"
    )
    judgments_import(project=team.project, path=labels, name="umbrela", kind="llm")

    log_in(page, live_server, "lena", f"/p/{team.slug}/")
    page.get_by_role("link", name="Judges", exact=True).click()
    row = page.locator("#judge-rows tr", has_text="umbrela")
    assert "not calibrated" in row.inner_text()
    row.get_by_role("link", name="umbrela").click()
    label = page.locator("#label")
    assert label.count() == 0  # an external judge has no endpoint to label with
    with page.expect_navigation():
        page.locator("#calibrate").click()
    page.locator("#last-calibration").wait_for()
    assert "refused" in page.locator("#last-calibration").inner_text()
    with page.expect_navigation():
        page.get_by_role("link", name="Read the report").click()
    verdict = page.locator("#verdict").inner_text()
    assert "Refused: pre-filter only" in verdict
    assert "Have more pairs judged by two people" in verdict  # what to do about too few
    assert page.locator("svg.heatmap").is_visible()
    assert page.locator("svg.kappa-plot").is_visible()
    assert page.locator("#condition-rows tr.failed").count() >= 1
    assert Calibration.objects.filter(passed=False).count() == 1
    assert reports == []


def test_the_lead_adds_a_judge_whose_labelling_waits_for_a_pass(
    live_server,
    watched,  # noqa: F811
) -> None:
    page, reports = watched
    team = team_of(double_judged_project())
    log_in(page, live_server, "lena", f"/p/{team.slug}/judges/")
    page.fill("input[name=name]", "local")
    page.fill("input[name=base_url]", "http://127.0.0.1:9/v1")
    page.fill("input[name=model]", "qwen")
    page.fill("input[name=api_key_env]", "sk-this-is-a-key")
    with page.expect_navigation():
        page.get_by_role("button", name="Add the judge").click()
    assert "not the key itself" in page.locator("#add-judge").inner_text()
    page.fill("input[name=api_key_env]", "LOCAL_KEY")
    with page.expect_navigation():
        page.get_by_role("button", name="Add the judge").click()
    assert page.locator("#label").is_disabled()
    assert "has not been calibrated" in page.locator("#label-refusal").inner_text()
    assert LLMJudge.objects.get().api_key_env == "LOCAL_KEY"
    assert reports == []


def test_the_lead_calibrates_an_endpoint_judge_then_labels_at_scale(
    live_server,
    watched,  # noqa: F811
    server: LLMServer,  # noqa: F811
) -> None:
    """Against the local OpenAI-protocol server: the judge answers alice's grades (with a
    reason a model could write), passes a gate lowered to the project's ten pairs, labels, and
    a changed model turns Label at scale off again."""
    page, reports = watched
    page.on("dialog", lambda dialog: dialog.accept())
    team = team_of(double_judged_project())
    judge(team)
    server.default = lambda key: Reply.grade(
        ALICE[f"d{key[1].split()[-1]}"], reason="<b>bold</b> claim & more"
    )

    log_in(page, live_server, "lena", f"/p/{team.slug}/judges/settings/")
    page.fill("input[name=min_pairs]", "10")
    with page.expect_navigation():
        page.get_by_role("button", name="Save").click()
    assert "Saved." in page.locator(".messages").inner_text()

    page.goto(f"{live_server.url}/p/{team.slug}/judges/")
    page.fill("input[name=name]", "local")
    page.fill("input[name=base_url]", server.url)
    page.fill("input[name=model]", "test-model")
    page.fill("input[name=timeout]", "5")
    with page.expect_navigation():
        page.get_by_role("button", name="Add the judge").click()
    assert page.locator("#label").is_disabled()
    with page.expect_navigation():
        page.locator("#calibrate").click()
    page.locator("#last-calibration").wait_for()
    assert "passed" in page.locator("#last-calibration").inner_text()
    assert "approved for scale" in page.locator("h1").inner_text()
    assert server.requests >= 10
    with page.expect_navigation():
        page.locator("#label").click()
    page.locator("#last-label").wait_for()
    assert "Labelling at scale with local" in page.locator(".messages").inner_text()

    with page.expect_navigation():
        page.get_by_role("link", name="Read the report").click()
    assert "Approved for labelling at scale" in page.locator("#verdict").inner_text()
    assert page.locator("svg.heatmap").is_visible()

    page.goto(f"{live_server.url}/p/{team.slug}/judges/local/")
    page.fill("input[name=model]", "another-model")
    with page.expect_navigation():
        page.get_by_role("button", name="Save", exact=True).click()
    assert "calibrate again" in page.locator(".messages").inner_text()
    assert page.locator("#label").is_disabled()
    assert "not calibrated" in page.locator("h1").inner_text()
    assert reports == []
