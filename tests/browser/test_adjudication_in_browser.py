"""Adjudication in a real browser: two annotators disagree blind on a pair, the lead settles it
from the queue with a ruling, promotes the ruling into the protocol and publishes it; the
annotators are asked to read the new edge case, and the qrels hold the lead's grade."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation import protocol as core
from annotation.models import Role
from annotation.services import membership_set, protocol_publish
from judging.models import WorkUnit
from pooling.models import Pair
from tests.browser.panel import press_and_wait, shown
from tests.browser.test_csp import REPORT_VIOLATIONS, log_in
from tests.conftest import make_user, small_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RULING = "A page that names the setting without the steps is 2, not 3."


def judge_first_query(page, grades: list[str]) -> list[int]:
    """Judge the query on screen with these keys, one per item; the pairs judged."""
    judged = []
    for key in grades:
        judged.append(int(shown(page)))
        press_and_wait(page, key)
    return judged


def test_a_disagreement_is_settled_promoted_published_and_exported(live_server, new_page) -> None:
    project = small_project()
    structured = core.starter(project.name)  # the four grades: a draft made from it publishes
    protocol_publish(
        project=project,
        text=core.render_markdown(structured),
        content=core.to_content(structured),
    )
    WorkUnit.objects.filter(pool__project=project).update(judges_needed=2)
    for name, role in (("alice", Role.ANNOTATOR), ("bob", Role.ANNOTATOR), ("lena", Role.LEAD)):
        membership_set(project=project, user=make_user(name), role=role)
    base = f"/p/{project.slug}"

    # Both annotators judge the same double-judged query blind; they differ on its first pair.
    alice, bob = new_page(), new_page()
    log_in(alice, live_server, "alice", f"{base}/judge/")
    first = int(shown(alice))
    size = Pair.objects.get(pk=first).query.pairs.count()
    judged = judge_first_query(alice, ["1"] * size)
    log_in(bob, live_server, "bob", f"{base}/judge/")
    assert judge_first_query(bob, ["3"] + ["1"] * (size - 1)) == judged

    # The lead settles it from the queue: a ruling, Esc, the key 2; the queue is then empty.
    lead = new_page()
    reports: list[str] = []
    lead.add_init_script(REPORT_VIOLATIONS)
    lead.on("console", lambda m: reports.append(m.text) if "CSP" in m.text else None)
    lead.on("dialog", lambda dialog: dialog.accept())  # every confirmation: yes
    log_in(lead, live_server, "lena", f"{base}/")
    with lead.expect_navigation():
        lead.get_by_role("link", name="Adjudicate disagreements").click()
    assert lead.locator("#count-unresolved").inner_text() == "1"
    rows = lead.locator("#queue tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-pair") == str(first)
    with lead.expect_navigation():
        rows.first.get_by_role("link", name="Adjudicate").click()
    assert "alice" in lead.locator("#answers").inner_text()
    lead.locator("#ruling").fill(RULING)
    lead.keyboard.press("Escape")
    with lead.expect_navigation():
        lead.keyboard.press("2")
    assert "No disagreement is left" in lead.locator(".messages").inner_text()
    assert lead.locator("#count-adjudicated").inner_text() == "1"

    # ... promotes the ruling from the pair's page, and publishes the protocol draft.
    with lead.expect_navigation():
        lead.get_by_role("link", name="Adjudicated (1)").click()
    with lead.expect_navigation():
        lead.locator("#adjudicated").get_by_role("link", name="Open").click()
    with lead.expect_navigation():
        lead.locator("#promote-button").click()
    assert "Added to the protocol draft" in lead.locator(".messages").inner_text()
    lead.goto(f"{live_server.url}{base}/protocol/edit/")
    assert lead.locator('textarea[name="ruling_text"]').nth(0).input_value() == RULING
    with lead.expect_navigation():
        lead.get_by_role("button", name="Publish as version 3").click()
    assert "Published version 3" in lead.locator(".messages").inner_text()

    # An annotator coming back is asked to read the change, the new edge case among it.
    alice.goto(f"{live_server.url}{base}/judge/")
    change = alice.locator("#protocol-change")
    change.wait_for()
    assert RULING in change.inner_text()
    alice.locator("#ack-button").click()
    alice.wait_for_function("() => !document.getElementById('protocol-change')")

    # The qrels hold the lead's grade for the pair, the agreed grade for the others.
    lead.goto(f"{live_server.url}{base}/")
    with lead.expect_download() as download:
        lead.get_by_role("link", name="Download qrels").click()
    lines = Path(download.value.path()).read_text().splitlines()
    settled = Pair.objects.select_related("query", "document").get(pk=first)
    assert f"{settled.query.qid} 0 {settled.document.docid} 2" in lines
    assert len(lines) == size and sum(line.endswith(" 1") for line in lines) == size - 1
    assert reports == []
