"""The judging drill: 8 annotators judge in real browser pages while every database connection
of the server is terminated, 4 times, mid-work. No answer is lost, none is stored twice, and
every answer that failed on its way was sent again by the page, never graded again.

Each termination is a short burst (every connection of the test database but the test's own,
killed again and again for a moment), so that requests in flight surely meet it: a single
kill of connections that sit idle between requests would only exercise the health check.
The figures are printed (`-s`) and recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psycopg
import pytest
from django.db import connection

from annotation.models import Project, Role
from annotation.services import membership_set, project_create, protocol_publish
from judging.models import Judgment, Kind
from judging.services import pool_open
from pooling.pooling import RunRow
from pooling.services import run_create
from tests.conftest import PASSWORD, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANNOTATORS = 8
ANSWERS_EACH = 12
TERMINATIONS = 4
BURST_SECONDS = 0.4
DEADLINE_SECONDS = 150

ITEM_JS = (
    "() => { const p = document.getElementById('judge-panel'); "
    "return p ? p.dataset.item || '' : ''; }"
)
FAILING_JS = (
    "() => { const s = document.getElementById('judge-status'); return Boolean(s && !s.hidden); }"
)


def drill_project(slug: str = "drill") -> str:
    """24 queries of 6 documents each, pooled from one run: 144 items."""
    project = project_create(slug=slug, name="Drill")
    protocol_publish(project=project, text="Grade 3: answers it. Grade 0: unrelated.")
    for d in range(1, 7):
        project.documents.create(docid=f"d{d}", title=f"Title {d}", text=f"Text of document {d}")
    ranked = {}
    for q in range(1, 25):
        project.queries.create(qid=f"q{q}", text=f"question number {q}")
        ranked[f"q{q}"] = [RunRow(f"q{q}", f"d{d}", d, 10.0 - d, "r") for d in range(1, 7)]
    pool_open(
        project=project,
        runs=[run_create(project=project, name="r", ranked=ranked)],
        depth=6,
        seed=3,
    )
    return slug


@dataclass
class Annotator:
    name: str
    page: object
    graded: list[tuple[int, int]] = field(default_factory=list)  # (item, grade) pressed

    def item(self) -> str:
        return self.page.evaluate(ITEM_JS)  # type: ignore[attr-defined]

    def waiting(self) -> bool:
        """True while its last answer is on its way or being sent again."""
        shown = self.item()
        return not shown or (bool(self.graded) and shown == str(self.graded[-1][0]))

    def answer(self) -> None:
        item = int(self.item())
        grade = item % 4
        self.graded.append((item, grade))
        self.page.keyboard.press(str(grade))  # type: ignore[attr-defined]


def terminate_bursts(
    params: dict, own: int, stop: threading.Event, started: threading.Event, kills: list[int]
) -> None:
    """Every few seconds, kill every connection of the test database but the test's own (`own`:
    a connection is per thread, so the caller names it)."""
    with psycopg.connect(**params, autocommit=True) as admin:
        started.wait()
        for _ in range(TERMINATIONS):
            if stop.wait(2.5):
                return
            end = time.monotonic() + BURST_SECONDS
            while time.monotonic() < end:
                row = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s",
                    [own],
                ).fetchone()
                kills.append(int(row[0]) if row else 0)
                time.sleep(0.005)


def test_eight_annotators_lose_nothing_while_connections_are_terminated(
    live_server, new_page
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("terminating server connections is a PostgreSQL drill")
    slug = drill_project()
    project = Project.objects.get(slug=slug)
    connection.ensure_connection()
    annotators: list[Annotator] = []
    failed_responses: list[int] = []
    for i in range(ANNOTATORS):
        user = make_user(f"judge{i}")
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
        page = new_page()
        page.set_default_timeout(20_000)
        page.on(
            "response",
            lambda r: (
                failed_responses.append(r.status)
                if r.request.method == "POST" and r.status >= 500
                else None
            ),
        )
        page.goto(f"{live_server.url}/p/{slug}/judge/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/p/{slug}/judge/")
        page.wait_for_function(ITEM_JS)
        annotators.append(Annotator(user.username, page))

    stop, started = threading.Event(), threading.Event()
    kills: list[int] = []
    own = connection.connection.info.backend_pid
    args = (connection.get_connection_params(), own, stop, started, kills)
    killer = threading.Thread(target=terminate_bursts, args=args, daemon=True)
    killer.start()
    started.set()
    shown_failure: set[str] = set()
    began = time.monotonic()
    try:
        while time.monotonic() - began < DEADLINE_SECONDS:
            busy = False
            for a in annotators:
                if a.page.evaluate(FAILING_JS):  # type: ignore[attr-defined]
                    shown_failure.add(a.name)
                if a.waiting():
                    busy = True
                elif len(a.graded) < ANSWERS_EACH:
                    a.answer()
                    busy = True
            if not busy:
                break
            time.sleep(0.01)
    finally:
        stop.set()
        killer.join(10)

    assert all(len(a.graded) == ANSWERS_EACH and not a.waiting() for a in annotators), (
        "the drill did not finish in time"
    )
    pressed = {(a.name, item): grade for a in annotators for item, grade in a.graded}
    rows = list(
        Judgment.objects.filter(kind=Kind.GRADE).values_list("user__username", "pair_id", "grade")
    )
    stored = {(user, item): grade for user, item, grade in rows}
    lost = set(pressed) - set(stored)
    duplicated = len(rows) - len(stored)
    print(
        f"\ndrill: {ANNOTATORS} annotators, {len(pressed)} answers, {TERMINATIONS} bursts "
        f"killing {sum(kills)} connections; {len(failed_responses)} answers failed with a 5xx "
        f"and were sent again by the page ({len(shown_failure)} pages showed the message); "
        f"lost {len(lost)}, duplicated {duplicated}, "
        f"extra {len(set(stored) - set(pressed))}; {time.monotonic() - began:.1f} s"
    )
    assert sum(kills) > 0 and failed_responses  # the faults met answers in flight
    assert not lost and duplicated == 0 and stored == pressed
