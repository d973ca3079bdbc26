"""Writes of the agreement app."""

from __future__ import annotations

import math

from django.db import transaction

from annotation.models import Project

from .models import AgreementSettings


class SettingsError(ValueError):
    """Thresholds that cannot be saved; the message says what to enter instead."""


@transaction.atomic
def agreement_settings_set(
    *, project: Project, min_kappa: float, min_gold_accuracy: float
) -> AgreementSettings:
    """Save the thresholds that flag an annotator: kappa against the others below
    ``min_kappa`` (-1 to 1), accuracy on gold checks below ``min_gold_accuracy`` (0 to 1)."""
    problems = []
    if not (math.isfinite(min_kappa) and -1 <= min_kappa <= 1):
        problems.append(
            "the minimum kappa must be between -1 and 1 (0.4 is the usual floor: "
            "below it, agreement is at best fair)"
        )
    if not (math.isfinite(min_gold_accuracy) and 0 <= min_gold_accuracy <= 1):
        problems.append("the minimum gold accuracy must be a percentage between 0 and 100")
    if problems:
        raise SettingsError("; ".join(problems))
    settings, _ = AgreementSettings.objects.update_or_create(
        project=project,
        defaults={"min_kappa": min_kappa, "min_gold_accuracy": min_gold_accuracy},
    )
    return settings
