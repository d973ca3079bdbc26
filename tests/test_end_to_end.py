"""The whole loop through the real URLs, on the demo project the loader builds."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from demo.loader import SLUG
from judging.models import WorkUnit
from pooling.models import Pair
from tests.judging_helpers import answer, form_key, judge_page, shown_item

pytestmark = pytest.mark.django_db
PASSWORD = "demo-password-for-tests"


@pytest.fixture
def demo(db: None) -> None:
    call_command("load_demo", "--password", PASSWORD, stdout=io.StringIO())


def log_in(username: str) -> Client:
    client = Client()
    response = client.post(
        reverse("login"), {"username": username, "password": PASSWORD}, follow=True
    )
    assert response.status_code == 200 and response.context["user"].username == username
    return client


def test_it_builds_the_demo_project(demo: None) -> None:
    from annotation.models import Project

    project = Project.objects.get(slug=SLUG)
    assert project.documents.count() >= 150
    assert 35 <= project.queries.count() <= 45
    assert sorted(project.runs.values_list("name", flat=True)) == ["bm25", "bm25-title", "tfidf"]
    pool = project.pools.get()
    assert pool.depth == 10
    assert pool.items.count() > project.queries.count() * 10  # three systems disagree
    assert {m.role for m in project.memberships.all()} == {"lead", "annotator"}
    assert project.current_protocol() is not None


def test_it_loads_the_demo_twice_without_duplicating(demo: None) -> None:
    from annotation.models import Project

    call_command("load_demo", "--password", PASSWORD, stdout=io.StringIO())
    assert Project.objects.filter(slug=SLUG).count() == 1
    assert Project.objects.get(slug=SLUG).pools.count() == 1


def test_it_builds_work_units_with_a_fifth_double_judged(demo: None) -> None:
    units = WorkUnit.objects.filter(pool__project__slug=SLUG)
    assert units.count() == 40
    assert units.filter(judges_needed=2).count() == 8  # 20 % of the single stratum


def test_it_publishes_the_structured_demo_protocol(demo: None) -> None:
    from annotation.models import Project

    protocol = Project.objects.get(slug=SLUG).current_protocol()
    assert protocol is not None and protocol.number == 1
    assert [g["value"] for g in protocol.content["grades"]] == [3, 2, 1, 0]
    assert protocol.content["anchors"][0]["title"] == "Webhook retry policy"
    assert len(protocol.content["rulings"]) == 5
    assert "## Edge cases" in protocol.text and "Outdated pages?" in protocol.text


def test_it_exports_exactly_the_grades_an_annotator_gave_one_query(demo: None) -> None:
    annotator = log_in("annotator1")
    page = judge_page(annotator, SLUG)
    item = shown_item(page)
    assert item is not None
    query = item.query
    given: dict[str, int] = {}
    while item is not None and item.query == query:
        grade = len(given) % 4
        given[item.document.docid] = grade
        page = answer(annotator, SLUG, page, grade, seconds=3)
        item = shown_item(page)
    assert len(given) == Pair.objects.filter(query=query).count()

    lead = log_in("lead")
    response = lead.get(reverse("qrels_download", args=[SLUG]))
    assert response.status_code == 200
    lines = response.content.decode().splitlines()
    expected = sorted(f"{query.qid} 0 {docid} {grade}" for docid, grade in given.items())
    assert lines == expected


def test_it_exports_qrels_from_the_command_line(demo: None, tmp_path: Path) -> None:
    annotator = log_in("annotator2")
    page = judge_page(annotator, SLUG)
    item = shown_item(page)
    assert item is not None
    url = reverse("judge_submit", args=[SLUG, item.pk])
    annotator.post(url, {"grade": 3, "key": form_key(page)})  # a plain form post, no htmx
    out = tmp_path / "demo.qrels"
    call_command("export_qrels", SLUG, "-o", str(out))
    assert out.read_text() == f"{item.query.qid} 0 {item.document.docid} 3\n"
