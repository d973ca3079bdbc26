"""The LLM judge below the bar: the pre-filter and its audit, and the human-only slice no judge
ever labels."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from annotation.models import Project
from jobs.models import JobState
from judging.models import (
    HumanOnlyQuery,
    JudgeSettings,
    Judgment,
    LLMJudgment,
    Screening,
    WorkItem,
    WorkUnit,
)
from judging.pools import pool_open
from judging.services_claims import claim_next
from judging.services_llm import (
    human_only_sync,
    judge_version_current,
    llm_label_scope,
    llm_label_start,
    prefilter_apply,
    prefilter_audit,
)
from pooling.models import Pair, Pool, Run
from tests.llm_project import endpoint_judge, llm_project, pair_key, pair_of, server
from tests.llm_server import LLMServer, Reply

__all__ = ["server"]

pytestmark = pytest.mark.django_db


def by_document(key: tuple[str, str]) -> Reply:
    """Doc 1 and Doc 2 graded 2 (kept for humans); Doc 3 and Doc 4 graded 0 (screened)."""
    return Reply.grade(2 if key[1] in ("Doc 1", "Doc 2") else 0)


def work_pairs(pool: Pool) -> set[int]:
    return set(WorkItem.objects.filter(unit__pool=pool).values_list("pair_id", flat=True))


def test_the_prefilter_screens_low_grades_and_keeps_an_audit_share(server: LLMServer) -> None:
    project = llm_project()
    JudgeSettings.objects.filter(project=project).update(audit_share=0.25)
    judge = endpoint_judge(project, server)
    server.default = by_document
    server.plan(pair_key(pair_of(project, "q1", "d3")), Reply.text("zero, I think"))
    server.plan(pair_key(pair_of(project, "q1", "d4")), Reply.error(400, "refused"))
    pool = Pool.objects.get(project=project)
    annotator = User.objects.create_user("ann")
    held = claim_next(pool=pool, user=annotator)  # somebody is on one query already
    assert held is not None
    held_pairs = set(WorkItem.objects.filter(unit=held.unit).values_list("pair_id", flat=True))
    job = llm_label_start(judge=judge, mode="prefilter")  # no calibration needed
    job.refresh_from_db()
    assert job.state == JobState.DONE, job.error
    version = judge_version_current(judge=judge)
    screened = Screening.objects.filter(version=version)
    # 10 queries x Doc 3 and Doc 4, less the parse failure and the failed call: humans get those.
    assert screened.count() == 18
    assert screened.filter(audit=True).count() == 5  # round(0.25 x 18), half up
    assert job.result is not None and job.result["prefilter"]["screened"] == 18
    for name in ("d3", "d4"):
        assert not Screening.objects.filter(pair=pair_of(project, "q1", name)).exists()
    out = set(screened.filter(audit=False).values_list("pair_id", flat=True))
    audit = set(screened.filter(audit=True).values_list("pair_id", flat=True))
    left = work_pairs(pool)
    assert not (out - held_pairs) & left  # taken out of every unit nobody had claimed
    assert held_pairs <= left  # the claimed query keeps its work as it was
    assert audit <= left
    # Applying again screens nothing new and draws no more audit pairs.
    again = prefilter_apply(version=version)
    assert (again.screened, again.audit) == (0, 0)
    assert screened.filter(audit=True).count() == 5


def test_a_unit_left_empty_is_deleted_and_new_pools_skip_screened_pairs(
    server: LLMServer,
) -> None:
    project = llm_project()
    JudgeSettings.objects.filter(project=project).update(audit_share=0.0)
    judge = endpoint_judge(project, server)
    server.default = lambda key: Reply.grade(0 if key[0] == "question 3" else 2)
    llm_label_start(judge=judge, mode="prefilter")
    pool = Pool.objects.get(project=project)
    assert not WorkUnit.objects.filter(pool=pool, query__qid="q3").exists()
    assert WorkUnit.objects.filter(pool=pool).count() == 9
    out = set(Screening.objects.values_list("pair_id", flat=True))
    assert len(out) == 4
    # A later pool over the same run makes no work of the screened-out pairs.
    newer = pool_open(project=project, runs=list(Run.objects.filter(project=project)), depth=4)
    assert not work_pairs(newer) & out
    assert len(work_pairs(newer)) == 36


def test_the_audit_reports_what_the_prefilter_misses(server: LLMServer) -> None:
    project = llm_project()
    JudgeSettings.objects.filter(project=project).update(audit_share=0.5)
    judge = endpoint_judge(project, server)
    server.default = by_document
    llm_label_start(judge=judge, mode="prefilter")
    version = judge_version_current(judge=judge)
    before = prefilter_audit(version=version)
    assert (before.audited, before.screened_out, before.reviewed) == (10, 10, 0)
    assert before.miss_rate is None and before.estimated_missed is None
    audit = list(Screening.objects.filter(version=version, audit=True).order_by("pk"))
    people = [User.objects.create_user("ann"), User.objects.create_user("ben")]
    # Four audit pairs reviewed: one graded relevant by one of two people is a miss, so is
    # one graded 1 (the threshold); two graded 0 are not.
    grades = [(audit[0], people[0], 0), (audit[0], people[1], 2), (audit[1], people[0], 1),
              (audit[2], people[0], 0), (audit[3], people[1], 0)]  # fmt: skip
    for screening, person, grade in grades:
        Judgment.objects.create(pair=screening.pair, user=person, grade=grade, seconds_spent=3)
    report = prefilter_audit(version=version)
    assert (report.audited, report.reviewed, report.misses) == (10, 4, 2)
    assert report.miss_rate == pytest.approx(0.5)
    assert report.estimated_missed == pytest.approx(5.0)
    assert report.threshold == 1


# --------------------------------------------------------------------------- the human-only slice


def add_queries(project: Project, numbers: range, stratum: str) -> None:
    for q in numbers:
        project.queries.create(qid=f"q{q}", text=f"question {q}", stratum=stratum)


def test_the_human_only_slice_is_drawn_per_stratum_and_kept_as_it_grows() -> None:
    project = llm_project(human_only=0.25)  # q1-q6 head, q7-q10 tail
    add_queries(project, range(11, 13), "")  # two queries with no stratum: a stratum too
    first = human_only_sync(project=project)
    strata = dict(project.queries.values_list("pk", "stratum"))
    counts = {s: sum(1 for q in first if strata[q] == s) for s in ("head", "tail", "")}
    assert counts == {"head": 2, "tail": 1, "": 1}  # round(1.5), round(1.0), round(0.5): half up
    assert human_only_sync(project=project) == first  # the same draw every time
    add_queries(project, range(13, 17), "head")  # 10 head queries now: round(2.5) = 3
    grown = human_only_sync(project=project)
    assert first < grown and len(grown - first) == 1
    JudgeSettings.objects.filter(project=project).update(human_only_share=0.0)
    assert human_only_sync(project=project) == grown  # members stay, whatever the share
    assert HumanOnlyQuery.objects.filter(project=project).count() == 5


def slice_qids(project: Project) -> set[str]:
    members = project.queries.filter(pk__in=human_only_sync(project=project))
    return set(members.values_list("qid", flat=True))


def test_the_slice_is_drawn_by_the_queries_not_by_row_order() -> None:
    project = llm_project(human_only=0.3)
    qids = slice_qids(project)
    HumanOnlyQuery.objects.all().delete()
    assert slice_qids(project) == qids


def test_no_judge_labels_the_slice_and_it_tops_up_from_unlabelled_queries(
    server: LLMServer,
) -> None:
    project = llm_project(human_only=0.2)
    judge = endpoint_judge(project, server)
    version = judge_version_current(judge=judge)
    llm_label_start(judge=judge, mode="prefilter")
    members = human_only_sync(project=project)
    assert len(members) == 2  # one of six head queries, one of four tail
    labelled = set(
        LLMJudgment.objects.filter(version=version).values_list("pair__query_id", flat=True)
    )
    assert labelled and not labelled & members
    assert LLMJudgment.objects.count() == 32  # 8 queries x 4 documents
    scope = llm_label_scope(version=version, mode="prefilter")
    assert not set(Pair.objects.filter(pk__in=scope).values_list("query_id", flat=True)) & members
    # Raising the share later draws only queries no judge has labelled: new ones.
    JudgeSettings.objects.filter(project=project).update(human_only_share=0.5)
    assert human_only_sync(project=project) == members  # every other query is labelled
    add_queries(project, range(11, 15), "tail")
    grown = human_only_sync(project=project)
    assert members < grown
    assert not (grown - members) & labelled
    assert {q.qid for q in project.queries.filter(pk__in=grown - members)} <= {
        "q11", "q12", "q13", "q14"
    }  # fmt: skip
