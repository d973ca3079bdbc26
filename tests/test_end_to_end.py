"""The whole loop through the real URLs, on the demo project the loader builds."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotation.demo.loader import SLUG
from pooling.models import PoolItem

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


def shown_item(html: str) -> PoolItem | None:
    match = re.search(r'data-item="(\d+)"', html)
    return (
        PoolItem.objects.select_related("query", "document").get(pk=int(match.group(1)))
        if match
        else None
    )


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


def test_it_exports_exactly_the_grades_an_annotator_gave_one_query(demo: None) -> None:
    annotator = log_in("annotator1")
    page = annotator.get(reverse("judge", args=[SLUG])).content.decode()
    item = shown_item(page)
    assert item is not None
    query = item.query
    given: dict[str, int] = {}
    while item is not None and item.query == query:
        grade = len(given) % 4
        given[item.document.docid] = grade
        url = reverse("judge_submit", args=[SLUG, item.pk])
        response = annotator.post(url, {"grade": grade, "seconds": 3}, HTTP_HX_REQUEST="true")
        item = shown_item(response.content.decode())
    assert len(given) == PoolItem.objects.filter(query=query).count()

    lead = log_in("lead")
    response = lead.get(reverse("qrels_download", args=[SLUG]))
    assert response.status_code == 200
    lines = response.content.decode().splitlines()
    expected = sorted(f"{query.qid} 0 {docid} {grade}" for docid, grade in given.items())
    assert lines == expected


def test_it_exports_qrels_from_the_command_line(demo: None, tmp_path: Path) -> None:
    annotator = log_in("annotator2")
    item = shown_item(annotator.get(reverse("judge", args=[SLUG])).content.decode())
    assert item is not None
    annotator.post(reverse("judge_submit", args=[SLUG, item.pk]), {"grade": 3})
    out = tmp_path / "demo.qrels"
    call_command("export_qrels", SLUG, "-o", str(out))
    assert out.read_text() == f"{item.query.qid} 0 {item.document.docid} 3\n"
