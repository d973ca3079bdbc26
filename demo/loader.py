"""Build the demo project from the files next to this module (no network needed)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, replace
from pathlib import Path

from django.contrib.auth.models import User
from django.db import transaction

from annotation import protocol
from annotation.models import Project, Role
from annotation.services import (
    corpus_import,
    membership_set,
    project_create,
    protocol_publish,
    queries_import,
)
from judging.services import pool_open
from pooling.services_runs import baselines_create

DEMO_DIR = Path(__file__).resolve().parent
SLUG = "quillmate-help"
DEPTH = 10
SEED = 2019
USERS = (("lead", Role.LEAD), ("annotator1", Role.ANNOTATOR), ("annotator2", Role.ANNOTATOR))


@dataclass(frozen=True)
class DemoLogin:
    username: str
    role: Role
    password: str


@transaction.atomic
def demo_load(*, password: str | None = None) -> tuple[Project, list[DemoLogin]]:
    """Create the demo project if it is missing; (re)set the demo users' passwords.

    Passwords are random unless given, and are returned so that they can be printed: they are
    stored only as hashes.
    """
    project = Project.objects.filter(slug=SLUG).first() or _create_project()
    logins = [_ensure_user(project, name, role, password) for name, role in USERS]
    return project, logins


def _create_project() -> Project:
    project = project_create(
        slug=SLUG,
        name="Quillmate help centre (demo)",
        description=(
            "A fictional notes app's help centre: 40 real-looking questions, three baseline "
            "systems (BM25, TF-IDF, BM25 on titles) pooled at depth 10."
        ),
    )
    corpus_import(project=project, path=DEMO_DIR / "corpus.jsonl")
    queries_import(project=project, path=DEMO_DIR / "queries.jsonl")
    _publish_protocol(project)
    runs = baselines_create(project=project, k=100)  # as run_baselines and the pool page do
    pool_open(project=project, runs=runs, depth=DEPTH, seed=SEED)
    return project


def _publish_protocol(project: Project) -> None:
    """Version 1 of the demo protocol, structured: grades, anchors from the demo corpus, rulings."""
    content = json.loads((DEMO_DIR / "protocol.json").read_text("utf-8"))
    titles = dict(project.documents.values_list("docid", "title"))
    structure = protocol.from_content(content)
    structure = replace(
        structure, anchors=tuple(replace(a, title=titles[a.docid]) for a in structure.anchors)
    )
    problems = protocol.problems(structure, titles)
    if problems:
        raise ValueError(f"the demo protocol is broken: {problems}")
    protocol_publish(
        project=project,
        text=protocol.render_markdown(structure),
        content=protocol.to_content(structure),
    )


def _ensure_user(project: Project, username: str, role: Role, password: str | None) -> DemoLogin:
    user = User.objects.filter(username=username).first() or User(username=username)
    secret = password or secrets.token_urlsafe(9)
    user.set_password(secret)
    user.save()
    membership_set(project=project, user=user, role=role)
    return DemoLogin(username, role, secret)
