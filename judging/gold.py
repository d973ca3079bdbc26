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

from django.utils import timezone

from .answers import current_answers
from .models import GoldItem, Kind


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
    """Every gold check of the project, oldest answer first: the current answers of
    `answers.current_answers` (the one statement of "current" and of "gold check") scored
    against the answer key."""
    key = dict(
        GoldItem.objects.filter(pair__query__project_id=project_id).values_list("pair_id", "grade")
    )
    return [
        GoldCheck(
            a.user_id,
            a.username,
            a.pair_id,
            a.qid,
            a.docid,
            key[a.pair_id],
            a.kind,
            a.grade,
            a.answered_at,
            a.seconds,
        )
        for a in current_answers(project_id=project_id, gold=True)
        if a.pair_id in key
    ]


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
