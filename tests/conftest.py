"""Personas and shared fixtures: an outsider, annotators and a lead on a small project."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import Project, Role
from annotation.services import membership_set, project_create, protocol_publish
from formats.trec import RunRow
from judging.services import pool_open
from pooling.services import run_create

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
PASSWORD = "correct horse battery staple"


@dataclass
class World:
    project: Project
    lead: User
    alice: User
    bob: User
    outsider: User

    def client_for(self, user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client


def make_user(username: str) -> User:
    return User.objects.create_user(username=username, password=PASSWORD)


def small_project(slug: str = "acme") -> Project:
    """Two queries, five documents, two runs, a depth-3 pool of 8 items."""
    project = project_create(slug=slug, name=f"{slug.title()} search")
    for i in range(1, 6):
        project.documents.create(docid=f"d{i}", title=f"Title {i}", text=f"Text of document {i}")
    project.queries.create(qid="q1", text="first question")
    project.queries.create(qid="q2", text="second question")
    protocol_publish(project=project, text="Grade 3: answers it. Grade 0: unrelated.")
    run_a = {q: [RunRow(q, f"d{i}", i, 10.0 - i, "a") for i in (1, 2, 3)] for q in ("q1", "q2")}
    run_b = {q: [RunRow(q, f"d{i}", i - 2, 10.0 - i, "b") for i in (3, 4, 5)] for q in ("q1",)}
    run_b["q2"] = [RunRow("q2", "d1", 1, 5.0, "b")]
    runs = [
        run_create(project=project, name="a", ranked=run_a),
        run_create(project=project, name="b", ranked=run_b),
    ]
    pool_open(project=project, runs=runs, depth=3, seed=7)
    return project


@pytest.fixture
def world(db: None) -> World:
    project = small_project()
    world = World(
        project, make_user("lena"), make_user("alice"), make_user("bob"), make_user("olaf")
    )
    membership_set(project=project, user=world.lead, role=Role.LEAD)
    membership_set(project=project, user=world.alice, role=Role.ANNOTATOR)
    membership_set(project=project, user=world.bob, role=Role.ANNOTATOR)
    return world
