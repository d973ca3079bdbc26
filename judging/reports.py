"""What leads see: progress per annotator, per query and per stratum, throughput, claims,
and the full history of a pair. Read-only; none of it is ever shown to annotators.

Answers belong to pairs, not pools: an annotator's totals and throughput count every answer
they gave in the project, whichever pool it was given in, so a new pool never resets them.
Per-query progress is the current pool's units.

Gold checks (units made for one person, see `WorkUnit`) are nobody's work: progress, claims and
the per-query lists leave them out, and a unit's answers leave out gold checks made on its
pairs. Answers and throughput count them: they are time people spent judging.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from pooling.models import Pair, Pool

from .answers import gold_check
from .models import Claim, ClaimState, Judgment, Kind, WorkItem, WorkUnit

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
    """Per annotator, over the whole project: answers, throughput and median seconds per
    answer; finished queries in the pool."""
    since = timezone.now() - timedelta(hours=1)
    seconds: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows = Judgment.objects.filter(pair__query__project_id=pool.project_id).values_list(
        "user__username", "kind", "seconds_spent", "created_at"
    )
    for username, kind, spent, created in rows.iterator(chunk_size=5000):
        counts[username][kind] += 1
        if kind != Kind.UNDO:
            seconds[username].append(spent)
            counts[username]["last_hour"] += created >= since
    finished = dict(
        Claim.objects.filter(pool=pool, state=ClaimState.DONE, unit__gold_for=None)
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
    rows = Judgment.objects.filter(pair__query__project_id=pool.project_id).exclude(kind=Kind.UNDO)
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


def work_units(*, pool: Pool) -> QuerySet[WorkUnit]:
    """The pool's units of work, in order: gold checks left out."""
    return pool.units.filter(gold_for=None)


def strata_progress(*, pool: Pool) -> list[StratumProgress]:
    units = work_units(pool=pool).annotate(
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
    sizes = dict(
        WorkItem.objects.filter(unit__in=units)
        .values("unit_id")
        .annotate(n=Count("pk"))
        .values_list("unit_id", "n")
    )
    answered = _answered_per_user_and_unit(units)
    return [
        QueryProgress(
            unit,
            sizes.get(unit.pk, 0),
            [Holder(c, answered.get((c.user_id, unit.pk), 0)) for c in claims[unit.pk]],
        )
        for unit in units
    ]


def _answered_per_user_and_unit(units: list[WorkUnit]) -> dict[tuple[int, int], int]:
    """(user, unit) -> how many of the unit's pairs the user's current answer answers."""
    unit_of = dict(WorkItem.objects.filter(unit__in=units).values_list("pair_id", "unit_id"))
    rows = (
        Judgment.objects.filter(pair_id__in=list(unit_of))
        .order_by("-pk")
        .values_list("user_id", "pair_id", "kind")
    )
    seen: set[tuple[int, int]] = set()
    answered: dict[tuple[int, int], int] = defaultdict(int)
    for user_id, pair_id, kind in rows.iterator(chunk_size=5000):
        if (user_id, pair_id) in seen:
            continue
        seen.add((user_id, pair_id))
        answered[(user_id, unit_of[pair_id])] += kind in ANSWERS
    return answered


@dataclass(frozen=True)
class ItemRow:
    pair: Pair
    current: dict[str, Judgment]  # username -> their current row (latest)


def unit_items(*, unit: WorkUnit) -> list[ItemRow]:
    """The unit's pairs in display order with every judge's current answer."""
    pairs = [
        item.pair
        for item in WorkItem.objects.filter(unit=unit)
        .select_related("pair__document", "pair__query")
        .order_by("position")
    ]
    current: dict[int, dict[str, Judgment]] = defaultdict(dict)
    rows = (
        Judgment.objects.filter(pair__in=pairs)
        .exclude(gold_check())
        .select_related("user")
        .order_by("pk")
    )
    for judgment in rows:
        current[judgment.pair_id][judgment.user.username] = judgment
    return [ItemRow(pair, current[pair.pk]) for pair in pairs]


def pair_history(*, pair: Pair) -> list[Judgment]:
    """Every row ever written for the pair, in any pool, oldest first; `gold_check` is set on
    the rows that are gold checks (no label)."""
    return list(
        Judgment.objects.filter(pair=pair)
        .annotate(gold_check=gold_check())
        .select_related("user", "protocol")
        .order_by("created_at", "pk")
    )


def open_claims(*, pool: Pool) -> list[Claim]:
    """Claims a lead may release or reassign: active, assigned and expired ones."""
    states = (ClaimState.ACTIVE, ClaimState.ASSIGNED, ClaimState.EXPIRED)
    return list(
        Claim.objects.filter(pool=pool, state__in=states, unit__gold_for=None)
        .select_related("user", "unit__query")
        .order_by("state", "-touched_at")
    )
