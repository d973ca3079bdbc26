"""What leads see: progress per annotator, per query and per stratum, throughput, claims,
and the full history of an item. Read-only; none of it is ever shown to annotators."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from pooling.models import Pool, PoolItem

from .models import Claim, ClaimState, Judgment, Kind, WorkUnit

ANSWERS = (Kind.GRADE, Kind.UNSURE, Kind.SKIP)


@dataclass(frozen=True)
class JudgeSummary:
    username: str
    judgments: int  # rows that answer an item (grades, unsure, skips; not undos)
    median_seconds: float | None
    last_hour: int = 0
    per_hour: float | None = None  # answers per hour of time spent on items
    finished_queries: int = 0
    unsure: int = 0
    skipped: int = 0
    undone: int = 0


def judging_summary(*, pool: Pool) -> list[JudgeSummary]:
    """Per annotator: answers, throughput and median seconds per answer."""
    since = timezone.now() - timedelta(hours=1)
    seconds: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows = Judgment.objects.filter(pool_item__pool=pool).values_list(
        "user__username", "kind", "seconds_spent", "created_at"
    )
    for username, kind, spent, created in rows.iterator(chunk_size=5000):
        counts[username][kind] += 1
        if kind != Kind.UNDO:
            seconds[username].append(spent)
            counts[username]["last_hour"] += created >= since
    finished = dict(
        Claim.objects.filter(pool=pool, state=ClaimState.DONE)
        .values("user__username")
        .annotate(n=Count("pk"))
        .values_list("user__username", "n")
    )
    return [
        _summary(name, counts[name], seconds[name], finished.get(name, 0))
        for name in sorted(counts)
    ]


def _summary(
    name: str, counts: dict[str, int], seconds: list[float], finished: int
) -> JudgeSummary:
    answers = len(seconds)
    spent = sum(seconds)
    return JudgeSummary(
        username=name,
        judgments=answers,
        median_seconds=statistics.median(seconds) if seconds else None,
        last_hour=counts["last_hour"],
        per_hour=3600 * answers / spent if spent > 0 else None,
        finished_queries=finished,
        unsure=counts[Kind.UNSURE],
        skipped=counts[Kind.SKIP],
        undone=counts[Kind.UNDO],
    )


@dataclass(frozen=True)
class TeamThroughput:
    answers: int
    last_hour: int
    median_seconds: float | None


def team_throughput(summaries: Iterable[JudgeSummary], pool: Pool) -> TeamThroughput:
    rows = Judgment.objects.filter(pool_item__pool=pool).exclude(kind=Kind.UNDO)
    spent = list(rows.values_list("seconds_spent", flat=True).iterator(chunk_size=5000))
    return TeamThroughput(
        answers=len(spent),
        last_hour=sum(s.last_hour for s in summaries),
        median_seconds=statistics.median(spent) if spent else None,
    )


@dataclass(frozen=True)
class StratumProgress:
    stratum: str
    queries: int
    double: int
    complete: int  # every judge it needs has finished it
    in_progress: int  # someone holds it but it is not complete
    untouched: int


def strata_progress(*, pool: Pool) -> list[StratumProgress]:
    units = WorkUnit.objects.filter(pool=pool).annotate(
        done=Count("claims", filter=Q(claims__state=ClaimState.DONE))
    )
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for stratum, needed, taken, done in units.values_list(
        "stratum", "judges_needed", "claims_taken", "done"
    ):
        row = tally[stratum]
        row[0] += 1
        row[1] += needed == 2
        row[2] += done >= needed
        row[3] += done < needed and taken > 0
        row[4] += taken == 0 and done == 0
    return [StratumProgress(name, *row) for name, row in sorted(tally.items())]


@dataclass(frozen=True)
class Holder:
    claim: Claim
    answered: int


@dataclass(frozen=True)
class QueryProgress:
    unit: WorkUnit
    items: int
    holders: list[Holder]


def queries_progress(*, pool: Pool, units: list[WorkUnit]) -> list[QueryProgress]:
    """Progress of the given units (a page of them): who holds each and how far they are."""
    claims: dict[int, list[Claim]] = defaultdict(list)
    for claim in Claim.objects.filter(unit__in=units).select_related("user").order_by("pk"):
        claims[claim.unit_id].append(claim)
    query_ids = [u.query_id for u in units]
    sizes = dict(
        PoolItem.objects.filter(pool=pool, query_id__in=query_ids)
        .values("query_id")
        .annotate(n=Count("pk"))
        .values_list("query_id", "n")
    )
    answered = _answered_per_user_and_query(pool, query_ids)
    return [
        QueryProgress(
            unit,
            sizes.get(unit.query_id, 0),
            [Holder(c, answered.get((c.user_id, unit.query_id), 0)) for c in claims[unit.pk]],
        )
        for unit in units
    ]


def _answered_per_user_and_query(pool: Pool, query_ids: list[int]) -> dict[tuple[int, int], int]:
    rows = (
        Judgment.objects.filter(pool_item__pool=pool, pool_item__query_id__in=query_ids)
        .order_by("-pk")
        .values_list("user_id", "pool_item_id", "pool_item__query_id", "kind")
    )
    seen: set[tuple[int, int]] = set()
    answered: dict[tuple[int, int], int] = defaultdict(int)
    for user_id, item_id, query_id, kind in rows.iterator(chunk_size=5000):
        if (user_id, item_id) in seen:
            continue
        seen.add((user_id, item_id))
        answered[(user_id, query_id)] += kind in ANSWERS
    return answered


@dataclass(frozen=True)
class ItemRow:
    item: PoolItem
    current: dict[str, Judgment]  # username -> their current row (latest)


def unit_items(*, unit: WorkUnit) -> list[ItemRow]:
    """The unit's items in display order with every judge's current answer."""
    items = list(
        PoolItem.objects.filter(pool_id=unit.pool_id, query_id=unit.query_id)
        .select_related("document")
        .order_by("position")
    )
    current: dict[int, dict[str, Judgment]] = defaultdict(dict)
    rows = Judgment.objects.filter(pool_item__in=items).select_related("user").order_by("pk")
    for judgment in rows:
        current[judgment.pool_item_id][judgment.user.username] = judgment
    return [ItemRow(item, current[item.pk]) for item in items]


def item_history(*, item: PoolItem) -> list[Judgment]:
    """Every row ever written for the item, oldest first."""
    return list(
        Judgment.objects.filter(pool_item=item)
        .select_related("user", "protocol")
        .order_by("created_at", "pk")
    )


def open_claims(*, pool: Pool) -> list[Claim]:
    """Claims a lead may release or reassign: active, assigned and expired ones."""
    states = (ClaimState.ACTIVE, ClaimState.ASSIGNED, ClaimState.EXPIRED)
    return list(
        Claim.objects.filter(pool=pool, state__in=states)
        .select_related("user", "unit__query")
        .order_by("state", "-touched_at")
    )
