"""Gold items: pairs whose grade is known, marked by a lead as an answer key for gold checks.

A pair can be gold when its grade is known and nobody can read it in the protocol:
- its latest adjudication stands (source "adjudicated"), or else the current grades of the
  project's leads agree (source "lead": a member with the lead role; their gold checks, like
  anyone's, are no grade);
- no adjudication ruling of the pair was promoted into the protocol, and the pair is no anchor
  example of the current protocol (both show its grade to every annotator).

The key is fixed when the pair is marked: a later adjudication does not change it, but the gold
page says that the key is stale, so that the lead can retire the item and mark it again.
This lives in agreement, not judging, because it reads adjudications.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Project, Role
from annotation.protocol import from_content
from judging.answers import current_answers
from judging.gold import GoldCheck
from judging.models import GoldItem, GoldSource, Kind
from pooling.models import Pair

from .models import Adjudication


class GoldRefused(Exception):
    """A pair that cannot be marked (or retired); the message says why, to a lead."""


NO_KEY = (
    "it has neither an adjudication nor a grade from a lead: adjudicate it, or judge it as a "
    "lead, first"
)
PROMOTED = (
    "its adjudication ruling was promoted into the protocol, whose anchor shows its grade to "
    "every annotator: it could not check anybody"
)
ANCHOR = "it is an anchor example of the current protocol, which shows its grade to everyone"


@dataclass(frozen=True)
class GoldKey:
    """What marking a pair would store, or why it cannot be marked (`refusal`)."""

    pair_id: int
    grade: int | None
    source: str
    refusal: str = ""


def gold_keys(*, project: Project, pair_id: int | None = None) -> dict[int, GoldKey]:
    """The key of every pair of the project (or only `pair_id`) that has an adjudication or a
    lead's grade; a pair with neither has no entry."""
    adjudicated, promoted = _adjudications(project, pair_id)
    leads = set(project.memberships.filter(role=Role.LEAD).values_list("user_id", flat=True))
    graded: dict[int, set[int]] = defaultdict(set)
    for row in current_answers(project_id=project.pk, pair_id=pair_id):
        if row.user_id in leads and row.kind == Kind.GRADE and row.grade is not None:
            graded[row.pair_id].add(row.grade)
    anchors = _anchor_pairs(project, set(adjudicated) | set(graded))
    keys = {}
    for pk in sorted(set(adjudicated) | set(graded)):
        keys[pk] = _key(pk, adjudicated.get(pk), graded.get(pk, set()), pk in promoted, anchors)
    return keys


def _key(
    pk: int, adjudicated: int | None, lead_grades: set[int], promoted: bool, anchors: set[int]
) -> GoldKey:
    source = GoldSource.ADJUDICATED if adjudicated is not None else GoldSource.LEAD
    grade = adjudicated if adjudicated is not None else min(lead_grades)
    if promoted:
        return GoldKey(pk, grade, source, PROMOTED)
    if pk in anchors:
        return GoldKey(pk, grade, source, ANCHOR)
    if adjudicated is None and len(lead_grades) > 1:
        shown = " and ".join(str(g) for g in sorted(lead_grades))
        return GoldKey(pk, None, source, f"the leads' grades differ ({shown}): adjudicate it first")
    return GoldKey(pk, grade, source)


def _adjudications(project: Project, pair_id: int | None) -> tuple[dict[int, int], set[int]]:
    """The standing (latest) adjudicated grade per pair, and the pairs with a promoted ruling."""
    rows = Adjudication.objects.filter(pair__query__project=project)
    if pair_id is not None:
        rows = rows.filter(pair_id=pair_id)
    latest: dict[int, int] = {}
    promoted: set[int] = set()
    for pk, grade, promoted_at in rows.order_by("-id").values_list(
        "pair_id", "grade", "promoted_at"
    ):
        latest.setdefault(pk, grade)
        if promoted_at is not None:
            promoted.add(pk)
    return latest, promoted


def _anchor_pairs(project: Project, pair_ids: set[int]) -> set[int]:
    """Those of the pairs that are anchor examples (query text and docid) of the protocol."""
    current = project.current_protocol()
    content = (current.content or {}) if current is not None else {}
    anchors = {(a.query, a.docid) for a in from_content(content).anchors}
    if not anchors or not pair_ids:
        return set()
    rows = Pair.objects.filter(pk__in=pair_ids).values_list("pk", "query__text", "document__docid")
    return {pk for pk, text, docid in rows if (text, docid) in anchors}


@transaction.atomic
def gold_mark(*, project: Project, pair: Pair, lead: User) -> GoldItem:
    """Make the pair gold with its key (a retired item comes back with the key as it is now);
    raises GoldRefused saying why it cannot be."""
    _own(project, pair)
    key = gold_keys(project=project, pair_id=pair.pk).get(pair.pk)
    if key is None:
        raise GoldRefused(f"{_name(pair)} cannot be gold: {NO_KEY}")
    if key.refusal or key.grade is None:
        raise GoldRefused(f"{_name(pair)} cannot be gold: {key.refusal}")
    existing = GoldItem.objects.select_for_update().filter(pair=pair).first()
    if existing is not None and existing.retired_at is None:
        raise GoldRefused(f"{_name(pair)} is gold already")
    if existing is not None:
        existing.grade, existing.source, existing.marked_by = key.grade, key.source, lead
        existing.marked_at, existing.retired_at = timezone.now(), None
        existing.save(update_fields=["grade", "source", "marked_by", "marked_at", "retired_at"])
        return existing
    try:
        with transaction.atomic():
            return GoldItem.objects.create(
                pair=pair, grade=key.grade, source=key.source, marked_by=lead
            )
    except IntegrityError as error:  # another lead marked it at the same moment
        raise GoldRefused(f"{_name(pair)} is gold already") from error


@transaction.atomic
def gold_retire(*, project: Project, pair: Pair) -> GoldItem:
    """No new gold checks on the pair; the checks already made stay scored against its key."""
    _own(project, pair)
    item = GoldItem.objects.select_for_update().filter(pair=pair).first()
    if item is None or item.retired_at is not None:
        raise GoldRefused(f"{_name(pair)} is not a gold item")
    item.retired_at = timezone.now()
    item.save(update_fields=["retired_at"])
    return item


def _own(project: Project, pair: Pair) -> None:
    if pair.query.project_id != project.pk:
        raise GoldRefused("that pair is not this project's")


def _name(pair: Pair) -> str:
    return f"{pair.query.qid}/{pair.document.docid}"


# --- what the gold page lists --------------------------------------------------------------


@dataclass(frozen=True)
class GoldRow:
    """A gold item, its checks so far, and its key as it would be marked now."""

    item: GoldItem
    key: GoldKey | None
    checks: int
    correct: int

    @property
    def warning(self) -> str:
        """Why the lead should retire it (and mark it again), if they should."""
        if self.item.retired_at is not None:
            return ""
        if self.key is not None and self.key.refusal in (PROMOTED, ANCHOR):
            return self.key.refusal
        if self.key is not None and self.key.grade not in (None, self.item.grade):
            return f"the key is stale: the pair's grade is {self.key.grade} now"
        return ""


def gold_rows(
    *, project: Project, keys: dict[int, GoldKey], checks: list[GoldCheck]
) -> list[GoldRow]:
    """The project's gold items, active ones first, each with how its checks went."""
    tally: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for check in checks:
        tally[check.pair_id][0] += 1
        tally[check.pair_id][1] += check.correct
    items = (
        GoldItem.objects.filter(pair__query__project=project)
        .select_related("pair__query", "pair__document", "marked_by")
        .order_by(F("retired_at").desc(nulls_first=True), "-marked_at", "-pk")
    )
    return [GoldRow(item, keys.get(item.pair_id), *tally[item.pair_id]) for item in items]


@dataclass(frozen=True)
class Candidate:
    pair: Pair
    key: GoldKey


def gold_candidates(*, project: Project, keys: dict[int, GoldKey]) -> list[Candidate]:
    """Adjudicated and lead-judged pairs that are not gold now (refused ones with the reason),
    by query and document."""
    active = set(
        GoldItem.objects.filter(pair__query__project=project, retired_at=None).values_list(
            "pair_id", flat=True
        )
    )
    wanted = [pk for pk in keys if pk not in active]
    pairs = Pair.objects.filter(pk__in=wanted).select_related("query", "document")
    ordered = sorted(pairs, key=lambda p: (p.query.qid, p.document.docid))
    return [Candidate(pair, keys[pair.pk]) for pair in ordered]
