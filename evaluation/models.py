"""Qrels releases (immutable, numbered snapshots of the final labels), every archived run
scored under each release, and the project's must-never-break list."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Project
from judging.models import Grade, JudgeVersion
from pooling.models import Pair, Run


class ReleasePolicy(models.TextChoices):
    HUMANS = "humans", "humans only"
    ADJUDICATED = "adjudicated", "humans + adjudicated"
    LLM = "llm", "humans + adjudicated + LLM labels that passed their gate"


class UnresolvedPolicy(models.TextChoices):
    EXCLUDE = "exclude", "left out"
    LOWER = "lower", "the lowest grade given"
    HIGHER = "higher", "the highest grade given"


class Release(models.Model):
    """A numbered, immutable snapshot of the project's final labels under a stated policy.

    `manifest` records what it was made of (protocol versions, pools and runs, samples and
    strata, judge versions, counts per grade / stratum / source, the human-only slice, the
    policies); `content_hash` is the sha256 of its labels in qrels order, so two releases
    with the same labels have the same hash whatever else changed."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="releases")
    number = models.PositiveIntegerField()
    policy = models.CharField(max_length=16, choices=ReleasePolicy.choices)
    unresolved = models.CharField(
        max_length=8, choices=UnresolvedPolicy.choices, default=UnresolvedPolicy.LOWER
    )
    note = models.TextField(blank=True)
    manifest = models.JSONField(default=dict)
    content_hash = models.CharField(max_length=64)
    pairs = models.PositiveIntegerField(default=0, help_text="labels in the release")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="release_number_once"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}@{self.number}"


class LabelSource(models.TextChoices):
    ADJUDICATED = "adjudicated", "adjudicated by a lead"
    AGREED = "agreed", "two or more people agreed"
    SINGLE = "single", "one person"
    UNRESOLVED = "unresolved", "people disagreed, not adjudicated"
    LLM = "llm", "an LLM judge that passed its gate"


class ReleaseLabel(models.Model):
    """One label of a release, with its provenance. The query, document and stratum are
    copied, so a release reads the same after its pairs or queries change or go."""

    release = models.ForeignKey(
        Release, on_delete=models.CASCADE, related_name="labels", db_index=False
    )
    pair = models.ForeignKey(
        Pair, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    qid = models.CharField(max_length=200)
    docid = models.CharField(max_length=200)
    stratum = models.CharField(max_length=32, blank=True)
    grade = models.PositiveSmallIntegerField(choices=Grade.choices)
    source = models.CharField(max_length=16, choices=LabelSource.choices)
    by = models.JSONField(
        default=list, help_text="who: the people's usernames (or the lead's, adjudicated)"
    )
    judge_version = models.ForeignKey(
        JudgeVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            # Reads go by release in qrels order; the index also keeps a pair once per release.
            models.UniqueConstraint(fields=["release", "qid", "docid"], name="release_label_once"),
            models.CheckConstraint(condition=Q(grade__lte=3), name="release_grade_0_to_3"),
        ]

    def __str__(self) -> str:
        return f"{self.release} {self.qid} {self.docid} {self.grade}"


class RunEvaluation(models.Model):
    """An archived run scored under a release (by the re-scoring job a new release starts):
    the means, their intervals and every query's values, under the stated contract."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="evaluations")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    contract = models.JSONField(default=dict)
    means = models.JSONField(default=dict, help_text="measure -> mean over scored queries")
    intervals = models.JSONField(default=dict, help_text="measure -> [lo, hi], 95 % bootstrap")
    per_query = models.JSONField(default=dict, help_text="qid -> measure -> value")
    queries = models.JSONField(
        default=dict, help_text="scored, skipped_no_relevant, missing_from_run"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["release", "run"], name="run_scored_once"),
        ]

    def __str__(self) -> str:
        return f"{self.run} under {self.release}"


class MustNeverBreak(models.Model):
    """A case the regression gate holds every candidate to: the document must stay in the
    top 3 for the query (the `compare --must-never-break` file, kept in the project)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="must_never_break")
    qid = models.CharField(max_length=200)
    docid = models.CharField(max_length=200)
    note = models.TextField(blank=True)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "qid", "docid"], name="must_never_break_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}: {self.qid} must keep {self.docid}"
