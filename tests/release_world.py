"""A project for the release tests: ten queries in two strata, four documents each (one
pool of 40 pairs), three runs; alice grades q1-q8, bob q1-q4 (disagreeing on some pairs), a
lead adjudicates two of the disagreements, and an external judge whose version passed its
gate labels every pair; q10 is in the human-only slice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import User
from django.test import Client

from agreement.services_adjudication import adjudication_create
from annotation.models import Project, Role
from annotation.services import membership_set
from formats.trec import RunRow
from judging.models import Calibration, HumanOnlyQuery, JudgeVersion
from judging.services_import import judgments_import
from pooling.models import Run
from pooling.services import run_create
from tests.llm_project import DOCUMENTS, llm_project, pair_of

PASSWORD = "correct horse battery staple"


def alice_grade(q: int, d: int) -> int:
    return (q + d) % 4


def bob_grade(q: int, d: int) -> int:
    # Disagrees with alice on d1 and d2 of q1-q4 (by one grade), agrees elsewhere.
    return (alice_grade(q, d) + 1) % 4 if d <= 2 else alice_grade(q, d)


def llm_grade(q: int, d: int) -> int:
    return (q * d) % 4


@dataclass
class ReleaseWorld:
    project: Project
    lead: User
    annotator: User
    outsider: User
    version: JudgeVersion

    def client_for(self, user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client


def write_qrels(path: Path, grades: dict[tuple[str, str], int]) -> Path:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in sorted(grades.items())))
    return path


def release_world(tmp: Path, slug: str = "rel") -> ReleaseWorld:
    project = llm_project(slug)
    lead = User.objects.create_user(username="lead", password=PASSWORD)
    annotator = User.objects.create_user(username="ann", password=PASSWORD)
    outsider = User.objects.create_user(username="out", password=PASSWORD)
    membership_set(project=project, user=lead, role=Role.LEAD)
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    docs = range(1, DOCUMENTS + 1)
    alice = {(f"q{q}", f"d{d}"): alice_grade(q, d) for q in range(1, 9) for d in docs}
    bob = {(f"q{q}", f"d{d}"): bob_grade(q, d) for q in range(1, 5) for d in docs}
    judge = {(f"q{q}", f"d{d}"): llm_grade(q, d) for q in range(1, 11) for d in docs}
    people = (("alice", alice, "human"), ("bob", bob, "human"), ("umbrela", judge, "llm"))
    for name, grades, kind in people:
        path = write_qrels(tmp / f"{name}.qrels", grades)
        judgments_import(project=project, path=path, name=name, kind=kind)
    version = JudgeVersion.objects.get(judge__project=project, judge__name="umbrela")
    Calibration.objects.create(version=version, n=120, passed=True, report={"kappa": 0.61})
    adjudication_create(pair=pair_of(project, "q1", "d1"), lead=lead, grade=3, ruling="answers it")
    adjudication_create(pair=pair_of(project, "q2", "d2"), lead=lead, grade=0)
    HumanOnlyQuery.objects.create(project=project, query=project.queries.get(qid="q10"))
    ranked_b = {
        f"q{q}": [RunRow(f"q{q}", f"d{d}", r, 5.0 - r, "b") for r, d in enumerate((4, 3, 2, 1), 1)]
        for q in range(1, 11)
    }
    ranked_c = {
        f"q{q}": [RunRow(f"q{q}", f"d{d}", r, 5.0 - r, "c") for r, d in enumerate((2, 9, 1), 1)]
        for q in range(1, 8)  # short of three queries, and a document nobody judged
    }
    run_create(project=project, name="b", ranked=ranked_b)
    run_create(project=project, name="c", ranked=ranked_c)
    return ReleaseWorld(project, lead, annotator, outsider, version)


def run_file(run: Run, path: Path) -> Path:
    """The run as a TREC run file, as the project stores it."""
    rows = run.results.order_by("qid", "rank").values_list("qid", "docid", "rank", "score")
    path.write_text("".join(f"{q} Q0 {d} {r} {s!r} {run.name}\n" for q, d, r, s in rows))
    return path
