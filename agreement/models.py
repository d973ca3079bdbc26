"""Adjudications of disagreements, and a project's agreement settings."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Project
from judging.models import Grade
from pooling.models import Pair


class AgreementSettings(models.Model):
    """The lead's thresholds for flagging an annotator; a project without a row uses the
    defaults."""

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="agreement_settings"
    )
    min_kappa = models.FloatField(
        default=0.4, help_text="flag an annotator whose kappa against the others is below this"
    )
    min_gold_accuracy = models.FloatField(
        default=0.7, help_text="flag an annotator whose accuracy on gold checks is below this"
    )

    class Meta:
        verbose_name_plural = "agreement settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(min_kappa__gte=-1) & Q(min_kappa__lte=1), name="min_kappa_in_range"
            ),
            models.CheckConstraint(
                condition=Q(min_gold_accuracy__gte=0) & Q(min_gold_accuracy__lte=1),
                name="min_gold_0_to_1",
            ),
        ]

    def __str__(self) -> str:
        return f"agreement settings of {self.project}"


class Adjudication(models.Model):
    """A lead's final grade on a pair, with the ruling behind it. Rows are only added: a
    changed mind is a newer row, and the pair's latest row stands."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="adjudications")
    grade = models.PositiveSmallIntegerField(choices=Grade.choices)
    ruling = models.TextField(blank=True, help_text="why: the rule a judge should follow")
    lead = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Set once, when the ruling goes into the protocol draft as an edge case.
    promoted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(grade__lte=3), name="adjudicated_grade_0_to_3"),
        ]
        indexes = [models.Index(fields=["pair", "-id"], name="adjudication_latest")]

    def __str__(self) -> str:
        return f"{self.pair} adjudicated {self.grade}"
