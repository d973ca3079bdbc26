"""The labels a release is cut from, with their provenance: the people's final labels under
the policy (the rules are `agreement.labels`', reached through `final_labels_of` and
`pair_grades`) and, under the ``llm`` policy, the passed judge's labels of the pairs no person
labelled, outside the human-only slice."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from agreement.labels import FinalLabel, Policy, Provenance, final_labels
from agreement.services_adjudication import final_labels_of, latest_adjudications, pair_grades
from annotation.models import Project
from judging.answers import current_answers
from judging.models import HumanOnlyQuery, JudgeVersion, Kind, LLMJudgment, LLMStatus
from judging.services_llm import gate_passed

from .models import LabelSource, ReleasePolicy


@dataclass(frozen=True)
class Label:
    """One label of a release being cut, with its provenance."""

    pair_id: int | None
    qid: str
    docid: str
    grade: int
    source: str
    by: tuple[str, ...] = ()
    judge_version_id: int | None = None


@dataclass
class Humans:
    """What the people said, from one read of the current answers: who graded each pair,
    and under which protocol versions."""

    graders: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    protocols: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def read(cls, project: Project) -> Humans:
        humans = cls()
        for answer in current_answers(project_id=project.pk):
            if answer.kind == Kind.GRADE and answer.grade is not None:
                humans.graders[answer.pair_id].append(answer.username)
                if answer.protocol is not None:
                    humans.protocols[answer.pair_id].add(answer.protocol)
        return humans


def _final(project: Project, policy: str, unresolved: Policy) -> tuple[FinalLabel, ...]:
    """The people's final labels under the policy (the rules are `agreement.labels`')."""
    if policy == ReleasePolicy.HUMANS:
        people = [replace(p, adjudicated=None) for p in pair_grades(project=project) if p.grades]
        return final_labels(people, unresolved).labels
    return final_labels_of(project=project, policy=unresolved).labels


def human_labels(
    *, project: Project, policy: str, unresolved: Policy, humans: Humans
) -> list[Label]:
    """The labels people gave, with who gave them (the lead, for an adjudicated one)."""
    leads = dict(latest_adjudications(project=project).values_list("pair_id", "lead__username"))
    labels = []
    for final in _final(project, policy, unresolved):
        if final.grade is None:
            continue  # an unresolved pair left out
        adjudicated = final.provenance is Provenance.ADJUDICATED
        by = (leads[final.pair_id],) if adjudicated else tuple(humans.graders[final.pair_id])
        labels.append(
            Label(final.pair_id, final.qid, final.docid, final.grade, final.provenance.value, by)
        )
    return labels


def llm_labels(*, project: Project, people: Iterable[int]) -> list[Label]:
    """For the pairs no person labelled (ids not in `people`), outside the human-only slice:
    the grade of the newest judge version that passed its gate."""
    versions = JudgeVersion.objects.filter(judge__project=project)
    passed = [v.pk for v in versions if gate_passed(version=v)]
    if not passed:
        return []
    labelled = set(people)
    slice_queries = HumanOnlyQuery.objects.filter(project=project).values("query_id")
    rows = (
        LLMJudgment.objects.filter(version_id__in=passed, status=LLMStatus.OK, repeat=0)
        .exclude(pair__query_id__in=slice_queries)
        .order_by("pair_id", "-version_id")
        .values_list("pair_id", "pair__query__qid", "pair__document__docid", "version_id", "grade")
    )
    labels: dict[int, Label] = {}
    for pair_id, qid, docid, version_id, grade in rows.iterator(chunk_size=10_000):
        if grade is not None and pair_id not in labelled and pair_id not in labels:
            labels[pair_id] = Label(pair_id, qid, docid, grade, LabelSource.LLM, (), version_id)
    return list(labels.values())


def labels_of(
    *, project: Project, policy: str, unresolved: Policy, humans: Humans | None = None
) -> list[Label]:
    """Every label the policy gives, in qrels order (qid, then docid)."""
    humans = humans or Humans.read(project)
    labels = human_labels(project=project, policy=policy, unresolved=unresolved, humans=humans)
    if policy == ReleasePolicy.LLM:
        # A pair a person graded or a lead adjudicated is the people's, even when the
        # unresolved policy leaves it out.
        adjudicated = latest_adjudications(project=project).values_list("pair_id", flat=True)
        labels += llm_labels(project=project, people=humans.graders.keys() | set(adjudicated))
    return sorted(labels, key=lambda label: (label.qid, label.docid))


def counted(values: Iterable[str]) -> dict[str, int]:
    """How often each value occurs, by value."""
    return dict(sorted(Counter(values).items()))
