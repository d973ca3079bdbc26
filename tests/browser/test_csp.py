"""The main pages work under the Content-Security-Policy, with no violation reported."""

from __future__ import annotations

import pytest

from annotation.models import Role
from annotation.services import membership_set
from tests.browser.panel import press_and_wait, shown
from tests.conftest import PASSWORD, make_user, small_project
from tests.test_sampling_web import make_log

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Chromium reports a blocked inline script, style or eval both as a console error and as a
# `securitypolicyviolation` event; the listener turns the event into a console line too, so
# that violations on every page of the visit are collected in one place.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


@pytest.fixture
def watched(page):
    reports: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.on(
        "console",
        lambda message: (
            reports.append(message.text)
            if "Content Security Policy" in message.text or "CSP violation" in message.text
            else None
        ),
    )
    return page, reports


def log_in(page, live_server, username: str, then: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next={then}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")


def log_out(page) -> None:
    with page.expect_navigation():
        page.locator("header form button").click()


def test_the_listener_sees_a_violation(live_server, watched) -> None:
    page, reports = watched
    page.goto(f"{live_server.url}/accounts/login/")
    page.evaluate("document.body.setAttribute('style', 'color: red')")  # an inline style
    page.wait_for_timeout(300)
    assert any("style-src" in report for report in reports)


def test_the_main_pages_work_without_a_csp_violation(live_server, watched, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    page, reports = watched
    project = small_project()
    membership_set(project=project, user=make_user("alice"), role=Role.ANNOTATOR)
    membership_set(project=project, user=make_user("lena"), role=Role.LEAD)
    base = f"/p/{project.slug}"

    # The annotator judges with the keyboard: htmx swaps, the help, undo.
    log_in(page, live_server, "alice", f"{base}/judge/")
    # A function, not an expression: Playwright polls an expression with eval, refused here.
    page.wait_for_function("() => Boolean(document.getElementById('judge-panel')?.dataset.item)")
    first = shown(page)
    press_and_wait(page, "2")
    assert shown(page) != first
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    page.keyboard.press("Escape")
    press_and_wait(page, "z")
    assert shown(page) == first
    page.goto(f"{live_server.url}/accounts/")
    page.locator("input[name=name]").fill("laptop")
    page.locator("#tokens button.primary").click()
    assert page.locator("#new-token-key").inner_text()
    log_out(page)

    # The lead: project page, pool page, a log uploaded and analysed while the page polls.
    log_in(page, live_server, "lena", f"{base}/")
    response = page.goto(f"{live_server.url}{base}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.goto(f"{live_server.url}{base}/pool/")
    assert page.locator("main").inner_text()
    page.goto(f"{live_server.url}{base}/logs/")
    log_file = tmp_path / "log.csv"
    log_file.write_bytes(make_log())
    page.set_input_files("input[name=log]", str(log_file))
    with page.expect_navigation():
        page.locator("main form button[type=submit]").first.click()
    page.locator("#strata-table").wait_for()

    assert reports == []
