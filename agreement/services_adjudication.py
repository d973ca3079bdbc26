"""Adjudication: a lead settles the pairs whose judges disagree, and a ruling worth keeping
goes into the protocol draft as an edge case with the pair as its anchor.

Everything here reads the judges' answers through `judging.answers.current_answers` and turns
them into final labels with `agreement.labels`: the rules live there, once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from annotation import protocol as core
from annotation.models import Project, ProtocolDraft
from annotation.services_protocol import draft_structure, protocol_draft_of, protocol_draft_save
from assay.db import rows_for_ids
from judging.answers import current_answers
from judging.models import GoldItem, Kind
from pooling.models import Pair

from .labels import (
    DEFAULT_POLICY,
    Disagreement,
    FinalLabels,
    LabelCounts,
    PairGrades,
    Policy,
    Provenance,
    disagreements,
    final_labels,
    provenance_of,
)
from .models import Adjudication

MAX_RULING = 4000  # characters: a ruling is a rule for judges, not an essay


class AdjudicationError(ValueError):
    """An adjudication or a promotion refused; the message says why, for the lead."""


def latest_adjudications(*, project: Project) -> QuerySet[Adjudication]:
    """The adjudication that stands for each adjudicated pair of the project (its latest)."""
    last = (
        Adjudication.objects.filter(pair__query__project=project)
        .values("pair_id")
        .annotate(last=Max("id"))
        .values("last")
    )
    return Adjudication.objects.filter(pk__in=last)


def pair_grades(*, project: Project) -> list[PairGrades]:
    """Every pair somebody graded or a lead adjudicated: the current grades and the standing
    adjudication, in one read of the answers and one of the adjudications."""
    keys: dict[int, tuple[str, str]] = {}
    grades: dict[int, list[int]] = {}
    for answer in current_answers(project_id=project.pk):
        if answer.kind == Kind.GRADE and answer.grade is not None:
            keys[answer.pair_id] = (answer.qid, answer.docid)
            grades.setdefault(answer.pair_id, []).append(answer.grade)
    adjudicated: dict[int, int] = {}
    rows = latest_adjudications(project=project).values_list(
        "pair_id", "grade", "pair__query__qid", "pair__document__docid"
    )
    for pair_id, grade, qid, docid in rows:
        keys[pair_id] = (qid, docid)
        adjudicated[pair_id] = grade
    return [
        PairGrades(pair_id, qid, docid, tuple(grades.get(pair_id, ())), adjudicated.get(pair_id))
        for pair_id, (qid, docid) in keys.items()
    ]


def final_labels_of(*, project: Project, policy: Policy = DEFAULT_POLICY) -> FinalLabels:
    return final_labels(pair_grades(project=project), policy)


@dataclass(frozen=True)
class QueueState:
    """The adjudication queue with the final labels' counts it is part of."""

    queue: list[Disagreement]
    counts: LabelCounts


def adjudication_queue(*, project: Project) -> QueueState:
    """Unresolved pairs in the order a lead should settle them (see `labels.disagreements`)."""
    pairs = pair_grades(project=project)
    counts = final_labels(pairs).counts
    unresolved = [p.pair_id for p in pairs if provenance_of(p) is Provenance.UNRESOLVED]
    return QueueState(disagreements(pairs, best_ranks(unresolved)), counts)


_BEST_RANK = (
    "SELECT pair_id, min(best_rank) FROM pooling_poolitem WHERE pair_id IN ({ids}) GROUP BY pair_id"
)


def best_ranks(pair_ids: list[int]) -> dict[int, int]:
    """The best (lowest) rank any pooled run gave each pair, over every pool that holds it."""
    return {pair_id: rank for pair_id, rank in rows_for_ids(_BEST_RANK, pair_ids)}


def next_in_queue(*, project: Project) -> int | None:
    """The pair a lead should settle next, if any is left."""
    queue = adjudication_queue(project=project).queue
    return queue[0].pair_id if queue else None


@transaction.atomic
def adjudication_create(*, pair: Pair, lead: User, grade: int, ruling: str = "") -> Adjudication:
    """Record a lead's final grade for a pair. An earlier adjudication stays as it was: the
    newest row stands from now on."""
    ruling = ruling.replace("\r\n", "\n").strip()
    if grade not in core.GRADE_VALUES:
        raise AdjudicationError("The final grade must be 0, 1, 2 or 3.")
    if "\x00" in ruling:
        raise AdjudicationError("The ruling holds a NUL character, which cannot be stored.")
    if len(ruling) > MAX_RULING:
        raise AdjudicationError(
            f"The ruling is {len(ruling)} characters long; at most {MAX_RULING}."
        )
    return Adjudication.objects.create(pair=pair, grade=grade, ruling=ruling, lead=lead)


def default_question(pair: Pair) -> str:
    """The edge case's question when the lead writes none: the pair it was decided on."""
    document = pair.document.title or pair.document.docid
    return f"How is “{document}” graded for “{pair.query.text}”?"


@dataclass(frozen=True)
class Promotion:
    adjudication: Adjudication
    gold_retired: bool  # the pair was an active gold item, and is one no longer


@transaction.atomic
def adjudication_promote(
    *, adjudication: Adjudication, lead: User, question: str = ""
) -> Promotion:
    """Put the adjudication's ruling into the project's protocol draft: an edge case (the
    question, the ruling) and the pair as an anchor example (its query, document, excerpt,
    the adjudicated grade, the ruling as the why). The draft is made from the current version
    first when there is none, as the protocol editor makes it; the lead publishes it from the
    protocol pages, and annotators acknowledge it there. A gold item on the pair is retired:
    the anchor shows everyone its grade.

    Refused (AdjudicationError, nothing changed) for an adjudication already promoted, without
    a ruling, or superseded by a newer one of the same pair.
    """
    rows = Adjudication.objects.select_for_update().select_related(
        "pair__query__project", "pair__document"
    )
    row = rows.get(pk=adjudication.pk)
    _check_promotable(row)
    if "\x00" in question:
        raise AdjudicationError("The question holds a NUL character, which cannot be stored.")
    pair, project = row.pair, row.pair.query.project
    draft = _locked_draft(project, lead)
    structure = draft_structure(draft)
    case = core.Ruling(question.strip() or default_question(pair), row.ruling)
    anchor = core.Anchor(
        query=pair.query.text,
        docid=pair.document.docid,
        grade=row.grade,
        why=row.ruling,
        excerpt=core.excerpt(pair.document.text),
    )
    structure = replace(
        structure, rulings=(*structure.rulings, case), anchors=(*structure.anchors, anchor)
    )
    protocol_draft_save(project=project, user=lead, draft=structure)
    now = timezone.now()
    row.promoted_at = now
    row.save(update_fields=["promoted_at"])
    retired = GoldItem.objects.filter(pair=pair, retired_at=None).update(retired_at=now)
    return Promotion(row, gold_retired=retired > 0)


def _check_promotable(row: Adjudication) -> None:
    if row.promoted_at is not None:
        when = timezone.localtime(row.promoted_at).strftime("%Y-%m-%d %H:%M")
        raise AdjudicationError(
            f"This ruling was already added to the protocol draft on {when}; it is not added "
            "twice. Edit the draft to change it."
        )
    if not row.ruling:
        raise AdjudicationError(
            "This adjudication has no ruling to add to the protocol: adjudicate the pair again "
            "with a ruling."
        )
    newest = Adjudication.objects.filter(pair_id=row.pair_id).aggregate(last=Max("id"))["last"]
    if newest != row.pk:
        raise AdjudicationError(
            "A newer adjudication of this pair stands: only the standing one can be promoted."
        )


def _locked_draft(project: Project, lead: User) -> ProtocolDraft:
    """The project's draft, created from the current version when there is none, locked so
    that two promotions at once both land in it."""
    if not ProtocolDraft.objects.filter(project=project).exists():
        protocol_draft_save(project=project, user=lead, draft=protocol_draft_of(project))
    return ProtocolDraft.objects.select_for_update().get(project=project)
