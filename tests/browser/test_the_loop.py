"""The whole loop in one sitting, in a real browser, without a shell.

On the demo project, whose first pool was judged on earlier days, the lead uploads a search log,
draws a sample and accepts it, runs the built-in baselines for the new queries, previews and
builds a pool of only the new queries, an annotator judges them with the keyboard, and the lead
downloads qrels holding the earlier judgments and the new ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone

from annotation.models import Project
from demo.loader import SLUG, demo_load
from judging.models import Claim, ClaimState, Judgment, WorkItem, WorkUnit
from pooling.models import Pair, Pool
from pooling.services import current_pool
from tests.browser.panel import press_and_wait, shown
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Questions a help centre's users type, 9 distinct: enough for three strata.
LOG = [
    ("export notes to pdf", 9),
    ("dark mode", 6),
    ("sync not working", 5),
    ("share a notebook", 3),
    ("offline mode", 2),
    ("recover deleted note", 2),
    ("keyboard shortcuts", 1),
    ("change password", 1),
    ("two factor login", 1),
]


def write_log(folder: Path) -> Path:
    lines = ["query,timestamp,session_id,user_id,result_count,clicked"]
    t = 1_700_000_000
    for n, (query, times) in enumerate(LOG):
        for i in range(times):
            lines.append(f"{query},{t + n * 1000 + i * 60},s{n}-{i},u{i},7,1")
    path = folder / "searches.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def judged_earlier() -> int:
    """The demo's first pool as earlier days left it: every pair graded by annotator1."""
    pool = current_pool(demo_project())
    assert pool is not None
    from django.contrib.auth.models import User

    annotator = User.objects.get(username="annotator1")
    protocol = pool.project.current_protocol()
    now = timezone.now()
    items = WorkItem.objects.filter(unit__pool=pool).values_list("pair_id", flat=True)
    Judgment.objects.bulk_create(
        Judgment(pair_id=pair, user=annotator, grade=pair % 4, seconds_spent=6, protocol=protocol)
        for pair in items
    )
    for unit in WorkUnit.objects.filter(pool=pool):
        Claim.objects.create(
            pool=pool, unit=unit, user=annotator, state=ClaimState.DONE,
            claimed_at=now, touched_at=now, finished_at=now,
        )  # fmt: skip
    WorkUnit.objects.filter(pool=pool).update(claims_taken=1, judges_needed=1)
    return len(items)


def demo_project() -> Project:
    return Project.objects.get(slug=SLUG)


def log_in(page, live_server, username: str, then: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next={then}")
    page.fill('input[name="username"]', username)
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_url(f"{live_server.url}{then}")


def test_a_newcomer_grows_the_demo_set_in_the_browser(
    live_server, new_page, tmp_path: Path, settings
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    demo_load(password=PASSWORD)
    earlier = judged_earlier()
    lead = new_page()
    lead.set_default_timeout(30_000)
    lead.on("dialog", lambda dialog: dialog.accept())  # every confirmation: yes

    # 1. a search log in, a sample out, accepted into the project
    log_in(lead, live_server, "lead", f"/p/{SLUG}/logs/")
    lead.set_input_files('input[name="log"]', str(write_log(tmp_path)))
    lead.get_by_role("button", name="Upload and analyse").click()
    preview_button = lead.get_by_role("button", name="Preview the sample")
    preview_button.wait_for()
    for quota in lead.locator("form.quota-form input[type=number]:not([name=seed])").all():
        quota.fill("1")
    preview_button.click()
    accept = lead.get_by_role("button", name="queries into the project")
    accept.click()
    lead.wait_for_load_state()
    queries = demo_project().queries.count()
    assert queries > 40  # the demo's 40 and the accepted ones

    # 2. runs for the new queries: the built-in baselines, from the pool page
    lead.goto(f"{live_server.url}/p/{SLUG}/pool/")
    lead.locator("#run-baselines").get_by_role("button", name="Run the baselines").click()
    lead.locator("#run-table").get_by_text("bm25-2").wait_for()

    # 3. a pool of the new queries only, previewed, then built
    form = lead.locator("#pool-form")
    for box in form.locator('input[name="runs"]').all():
        label = box.locator("xpath=..").inner_text()
        box.set_checked(label.strip().split()[0].endswith("-2"))
    form.locator('input[name="depth"]').fill("5")
    form.locator('input[name="scope"][value="new"]').check()
    form.get_by_role("button", name="Preview the pool").click()
    added = int(lead.locator("#preview-added").inner_text())
    assert added > 0 and int(lead.locator("#preview-judged").inner_text()) == 0
    assert int(lead.locator("#preview-carried").inner_text()) == 0
    lead.locator("#pool-confirm").click()
    lead.locator("#pool-history").wait_for()
    assert Pool.objects.filter(project__slug=SLUG).count() == 2
    new_pairs = set(
        WorkItem.objects.filter(unit__pool=current_pool(demo_project())).values_list(
            "pair_id", flat=True
        )
    )
    assert len(new_pairs) == added  # nothing graded before: every new pair is work

    # 4. an annotator judges the new queries with the keyboard
    annotator = new_page()
    log_in(annotator, live_server, "annotator2", f"/p/{SLUG}/judge/")
    judged = set()
    while (item := shown(annotator)) != "":
        judged.add(int(item))
        press_and_wait(annotator, "2")
    assert judged == new_pairs
    assert "All done" in annotator.locator("#judge-panel").inner_text()

    # 5. the qrels hold the earlier judgments and the new ones
    lead.goto(f"{live_server.url}/p/{SLUG}/")
    with lead.expect_download() as download:
        lead.get_by_role("link", name="Download qrels").click()
    lines = Path(download.value.path()).read_text().splitlines()
    assert len(lines) == earlier + len(new_pairs)
    new_qids = set(Pair.objects.filter(pk__in=new_pairs).values_list("query__qid", flat=True))
    assert {line.split()[0] for line in lines} >= new_qids
