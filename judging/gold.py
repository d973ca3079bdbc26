"""Gold checks as leads see them: every answer an annotator gave on a gold unit made for them,
against the answer key, and their accuracy overall and per ISO week.

A gold check is a person's current answer (their latest row; an undo leaves none) on a pair of
a gold unit made for them. It is scored against the gold item's grade as it stands, retired or
not: retiring an item stops new checks on it, never the scoring of those already made. None of
this is ever shown to annotators.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from assay.db import aware

from .models import Kind

_CHECKS = (
    "SELECT u.gold_for_id, au.username, w.pair_id, q.qid, d.docid, g.grade, j.kind, j.grade,"
    " j.created_at, j.seconds_spent FROM judging_workunit u"
    " JOIN pooling_pool pl ON pl.id = u.pool_id"
    " JOIN judging_workitem w ON w.unit_id = u.id"
    " JOIN judging_golditem g ON g.pair_id = w.pair_id"
    " JOIN pooling_pair p ON p.id = w.pair_id"
    " JOIN annotation_query q ON q.id = p.query_id"
    " JOIN annotation_document d ON d.id = p.document_id"
    " JOIN auth_user au ON au.id = u.gold_for_id"
    " JOIN judging_judgment j ON j.id = (SELECT max(l.id) FROM judging_judgment l"
    "  WHERE l.user_id = u.gold_for_id AND l.pair_id = w.pair_id)"
    " WHERE pl.project_id = %s AND u.gold_for_id IS NOT NULL AND j.kind <> %s"
    " ORDER BY j.created_at, j.id"
)


@dataclass(frozen=True)
class GoldCheck:
    """One person's answer on one gold pair (``grade`` is None unless ``kind`` is grade)."""

    user_id: int
    username: str
    pair_id: int
    qid: str
    docid: str
    expected: int
    kind: str
    grade: int | None
    answered_at: datetime
    seconds: float

    @property
    def correct(self) -> bool:
        return self.kind == Kind.GRADE and self.grade == self.expected

    @property
    def week(self) -> str:
        """The ISO week of the answer, in the site's time zone: ``2026-W49``."""
        year, week, _ = timezone.localtime(self.answered_at).isocalendar()
        return f"{year}-W{week:02d}"


def gold_checks(*, project_id: int) -> list[GoldCheck]:
    """Every gold check of the project, oldest answer first (one read)."""
    with connection.cursor() as cursor:
        cursor.execute(_CHECKS, [project_id, Kind.UNDO.value])
        rows = cursor.fetchall()
    return [_check(*row) for row in rows]


def _check(
    user_id: int,
    username: str,
    pair_id: int,
    qid: str,
    docid: str,
    expected: int,
    kind: str,
    grade: int | None,
    answered_at: datetime,
    seconds: float,
) -> GoldCheck:
    return GoldCheck(
        user_id, username, pair_id, qid, docid, expected, kind, grade, aware(answered_at), seconds
    )


# --- accuracy (plain arithmetic) -----------------------------------------------------------


@dataclass(frozen=True)
class Accuracy:
    """Checks answered, exactly right, and answered unsure or skipped (neither is right: the
    key has a grade)."""

    checks: int = 0
    correct: int = 0
    unsure: int = 0
    skipped: int = 0

    @property
    def rate(self) -> float | None:
        return self.correct / self.checks if self.checks else None

    def add(self, check: GoldCheck) -> Accuracy:
        return Accuracy(
            self.checks + 1,
            self.correct + check.correct,
            self.unsure + (check.kind == Kind.UNSURE),
            self.skipped + (check.kind == Kind.SKIP),
        )


@dataclass(frozen=True)
class PersonAccuracy:
    user_id: int
    username: str
    overall: Accuracy
    weeks: dict[str, Accuracy]  # ISO week -> accuracy that week, in week order


def gold_accuracy(checks: Iterable[GoldCheck]) -> list[PersonAccuracy]:
    """Accuracy on gold per person, overall and per ISO week, people by name."""
    overall: dict[tuple[str, int], Accuracy] = defaultdict(Accuracy)
    weekly: dict[tuple[str, int], dict[str, Accuracy]] = defaultdict(lambda: defaultdict(Accuracy))
    for check in checks:
        who = (check.username, check.user_id)
        overall[who] = overall[who].add(check)
        weekly[who][check.week] = weekly[who][check.week].add(check)
    return [
        PersonAccuracy(user_id, name, overall[(name, user_id)], dict(sorted(weeks.items())))
        for (name, user_id), weeks in sorted(weekly.items())
    ]
