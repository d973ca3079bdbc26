"""Human relevance judgments."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import ProtocolVersion
from pooling.models import PoolItem


class Grade(models.IntegerChoices):
    IRRELEVANT = 0, "0 · Irrelevant"
    RELATED = 1, "1 · Related"
    HIGHLY = 2, "2 · Highly relevant"
    PERFECT = 3, "3 · Perfectly relevant"


class Judgment(models.Model):
    """One person's grade for one pool item. Rows are never updated in place."""

    pool_item = models.ForeignKey(PoolItem, on_delete=models.CASCADE, related_name="judgments")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgments"
    )
    grade = models.PositiveSmallIntegerField(choices=Grade.choices)
    protocol = models.ForeignKey(
        ProtocolVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="judgments"
    )
    seconds_spent = models.FloatField(help_text="time from showing the item to the grade")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["pool_item", "user"], name="one_judgment_per_judge"),
            models.CheckConstraint(condition=models.Q(grade__lte=3), name="grade_0_to_3"),
            models.CheckConstraint(
                condition=models.Q(seconds_spent__gte=0), name="seconds_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} graded {self.pool_item} {self.grade}"
