"""A small project for the LLM judge's tests: a structured protocol, queries in two strata,
one pool of every pair, and a local endpoint the judge is pointed at."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from annotation.models import Project
from annotation.protocol import GradeDef, Protocol, Ruling, to_content
from annotation.services import project_create, protocol_publish
from formats.trec import RunRow
from judging.models import JudgeSettings, LLMJudge
from judging.pools import pool_open
from judging.services_llm import judge_add
from pooling.models import Pair
from pooling.services import run_create
from tests.llm_server import LLMServer

QUERIES = 10  # q1..q10: q1-q6 "head", q7-q10 "tail"
DOCUMENTS = 4  # every query pools d1..d4: 40 pairs

PROTOCOL = Protocol(
    intro="Grade how well the document answers the query.",
    grades=(
        GradeDef(3, "Perfectly relevant", "answers the query on its own."),
        GradeDef(2, "Highly relevant", "answers it with extra steps."),
        GradeDef(1, "Related", "on the topic, no answer."),
        GradeDef(0, "Irrelevant", "nothing useful."),
    ),
    rulings=(Ruling("A dead link?", "Grade 0."),),
)


def llm_project(slug: str = "llm", *, queries: int = QUERIES, human_only: float = 0.0) -> Project:
    project = project_create(slug=slug, name=f"{slug} judge")
    for d in range(1, DOCUMENTS + 1):
        project.documents.create(docid=f"d{d}", title=f"Doc {d}", text=f"Text of document {d}.")
    for q in range(1, queries + 1):
        stratum = "head" if q <= queries * 0.6 else "tail"
        project.queries.create(qid=f"q{q}", text=f"question {q}", stratum=stratum)
    protocol_publish(project=project, text="Grades 0-3.", content=to_content(PROTOCOL))
    ranked = {
        f"q{q}": [RunRow(f"q{q}", f"d{d}", d, 10.0 - d, "a") for d in range(1, DOCUMENTS + 1)]
        for q in range(1, queries + 1)
    }
    run = run_create(project=project, name="a", ranked=ranked)
    pool_open(project=project, runs=[run], depth=DOCUMENTS, seed=7)
    JudgeSettings.objects.create(project=project, human_only_share=human_only)
    return project


def pair_key(pair: Pair) -> tuple[str, str]:
    """The server's key of a pair's requests (the default template's query and document lines)."""
    return (pair.query.text, pair.document.title)


def pair_of(project: Project, qid: str, docid: str) -> Pair:
    return Pair.objects.select_related("query", "document").get(
        query__project=project, query__qid=qid, document__docid=docid
    )


@pytest.fixture
def server() -> Iterator[LLMServer]:
    running = LLMServer()
    try:
        yield running
    finally:
        running.stop()


def endpoint_judge(project: Project, server: LLMServer, **options: object) -> LLMJudge:
    settings: dict[str, object] = {"concurrency": 4, "timeout": 2.0, "max_retries": 2}
    settings.update(options)
    return judge_add(
        project=project, name=str(settings.pop("name", "gpt")), base_url=server.url,
        model="test-model", **settings,  # type: ignore[arg-type]
    )  # fmt: skip
