"""The gold page in a browser: its chart drawn with no script and no CSP violation, and the
share saved only once the lead confirms."""

from __future__ import annotations

import pytest

from judging.models import JudgingPolicy
from tests.browser.test_csp import REPORT_VIOLATIONS, log_in
from tests.gold_world import gold_project, judge_queries, lead_makes_gold, share_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_draws_the_chart_and_asks_before_saving_the_share(live_server, page) -> None:
    world = gold_project()
    lead_makes_gold(world)
    share_set(world, "50")
    judge_queries(world.client_for(world.alice), world.slug, lambda pair: 2)
    reports: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("console", lambda m: reports.append(m.text) if "CSP" in m.text else None)
    url = f"/p/{world.slug}/gold/"
    log_in(page, live_server, "lena", url)

    chart = page.locator("#gold-chart")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 50
    assert chart.locator("circle").count() == 1  # alice, one week
    assert page.locator("#gold-items tbody tr").count() == 6

    page.fill("input[name=gold_share_percent]", "10")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator("#gold-share button").click()
    page.wait_for_timeout(300)
    assert JudgingPolicy.objects.get(project=world.project).gold_share == 0.5  # not sent
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.locator("#gold-share button").click()
    assert "Gold share saved: 10 %" in page.locator(".messages").inner_text()
    assert JudgingPolicy.objects.get(project=world.project).gold_share == 0.1
    assert reports == []
