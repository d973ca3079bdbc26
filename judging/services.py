"""The judging queue and recording judgments."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import Project
from pooling.models import Pool, PoolItem

from .models import Judgment

MAX_SECONDS = 3600.0


@dataclass(frozen=True)
class Progress:
    done: int
    total: int

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100


def current_pool(project: Project) -> Pool | None:
    """The pool annotators work on: the project's most recent one."""
    return project.pools.order_by("-created_at", "-pk").first()


def item_next(*, pool: Pool, user: User) -> PoolItem | None:
    """The first item, in the pool's display order, that this user has not judged yet."""
    return (
        pool.items.exclude(judgments__user=user)
        .select_related("query", "document")
        .order_by("position")
        .first()
    )


def progress_of(*, pool: Pool, user: User) -> Progress:
    total = pool.items.count()
    done = Judgment.objects.filter(pool_item__pool=pool, user=user).count()
    return Progress(done=done, total=total)


@transaction.atomic
def judgment_submit(
    *, item: PoolItem, user: User, grade: int, seconds_spent: float
) -> tuple[Judgment, bool]:
    """Record a grade; the same submission sent twice stores one judgment.

    A second submission for an item this user already judged (a double key press, a retried
    request) returns the stored judgment unchanged and `created=False`: judgments are never
    silently changed.
    """
    if grade not in (0, 1, 2, 3):
        raise ValueError(f"grade must be 0, 1, 2 or 3, not {grade!r}")
    seconds = min(max(float(seconds_spent), 0.0), MAX_SECONDS)
    return Judgment.objects.get_or_create(
        pool_item=item,
        user=user,
        defaults={
            "grade": grade,
            "seconds_spent": seconds,
            "protocol": item.pool.project.current_protocol(),
        },
    )


@dataclass(frozen=True)
class JudgeSummary:
    username: str
    judgments: int
    median_seconds: float | None


def judging_summary(*, pool: Pool) -> list[JudgeSummary]:
    """Judgments per person on a pool, for the lead's overview."""
    per_user: dict[str, list[float]] = {}
    rows = Judgment.objects.filter(pool_item__pool=pool).values_list(
        "user__username", "seconds_spent"
    )
    for username, seconds in rows.iterator(chunk_size=5000):
        per_user.setdefault(username, []).append(seconds)
    return [JudgeSummary(name, len(secs), _median(secs)) for name, secs in sorted(per_user.items())]


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
