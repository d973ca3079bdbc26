"""Work units, claims on them, and human relevance judgments (append-only)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotation.models import Project, ProtocolVersion, Query
from pooling.models import Pair, Pool


class Grade(models.IntegerChoices):
    IRRELEVANT = 0, "0 · Irrelevant"
    RELATED = 1, "1 · Related"
    HIGHLY = 2, "2 · Highly relevant"
    PERFECT = 3, "3 · Perfectly relevant"


class JudgingPolicy(models.Model):
    """A project's judging settings; a project without a row uses the defaults."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="judging_policy")
    claim_idle_minutes = models.PositiveIntegerField(
        default=30, help_text="an active claim untouched for this long goes back to the pool"
    )
    double_share = models.FloatField(
        default=0.2, help_text="share of queries, per stratum, judged blind by a second person"
    )
    gold_share = models.FloatField(
        default=0.05,
        help_text="share of every annotator's items that are gold checks, shown like any other",
    )

    class Meta:
        verbose_name_plural = "judging policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(double_share__gte=0) & Q(double_share__lte=1), name="share_0_to_1"
            ),
            models.CheckConstraint(condition=Q(claim_idle_minutes__gte=1), name="idle_at_least_1"),
            models.CheckConstraint(
                condition=Q(gold_share__gte=0) & Q(gold_share__lte=0.5), name="gold_share_0_to_half"
            ),
        ]

    def __str__(self) -> str:
        return f"judging policy of {self.project}"


class WorkUnit(models.Model):
    """One query of a pool: claimed by one annotator, or by two for blind double-judging.

    Its items (`WorkItem`) are the query's pairs nobody had graded when the pool was built:
    a query whose pairs are all graded gets no unit.

    `claims_taken` counts the active, assigned and finished claims; a claim is only ever taken
    by a compare-and-set update that keeps it at or below `judges_needed`.

    A gold unit (`gold_for` set) is one person's gold check: a query they never judged, holding
    its gold pairs, made and claimed for them alone when their share of gold falls behind. It is
    nobody else's work, so progress, pool statistics and carrying work to a newer pool leave it
    out; the person sees it exactly like any other query.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="units")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField(help_text="order in which units are handed out")
    stratum = models.CharField(max_length=32, blank=True)
    judges_needed = models.PositiveSmallIntegerField(default=1)
    claims_taken = models.PositiveSmallIntegerField(default=0)
    gold_for = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="set on a gold check: the one person it was made for",
    )

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(
                fields=["pool", "query"], condition=Q(gold_for=None), name="unit_query_once"
            ),
            models.UniqueConstraint(
                fields=["pool", "query", "gold_for"],
                condition=Q(gold_for__isnull=False),
                name="gold_unit_once",
            ),
            models.UniqueConstraint(fields=["pool", "position"], name="unit_position_once"),
            models.CheckConstraint(
                condition=Q(judges_needed__in=[1, 2]), name="unit_judges_1_or_2"
            ),
            models.CheckConstraint(
                condition=Q(claims_taken__lte=F("judges_needed")), name="claims_within_needed"
            ),
        ]
        indexes = [
            # The claim query scans open units of a pool in position order.
            models.Index(
                fields=["pool", "position"],
                condition=Q(claims_taken__lt=F("judges_needed")),
                name="unit_open",
            ),
        ]

    def __str__(self) -> str:
        return f"pool {self.pool_id} unit {self.position}"

    @property
    def is_double(self) -> bool:
        return self.judges_needed > 1


class WorkItem(models.Model):
    """A pair to judge in a work unit, in the pool's display order."""

    unit = models.ForeignKey(
        WorkUnit, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="work_items")
    position = models.PositiveIntegerField(help_text="the pair's position in the pool's order")

    class Meta:
        ordering = ["position"]
        constraints = [
            # Reads go by unit in display order; the index also keeps a pair once per unit.
            models.UniqueConstraint(fields=["unit", "position"], name="work_item_position_once"),
            models.UniqueConstraint(fields=["unit", "pair"], name="work_item_pair_once"),
        ]

    def __str__(self) -> str:
        return f"unit {self.unit_id} pair {self.pair_id}"


class ClaimState(models.TextChoices):
    ACTIVE = "active", "working on it"
    ASSIGNED = "assigned", "assigned by a lead, starts next"
    DONE = "done", "finished"
    RELEASED = "released", "released"
    EXPIRED = "expired", "expired (idle)"
    MOVED = "moved", "moved to a newer pool"


# States that hold a place on the unit (counted in WorkUnit.claims_taken).
HOLDING = (ClaimState.ACTIVE, ClaimState.ASSIGNED, ClaimState.DONE)


class Claim(models.Model):
    """One annotator's hold on one work unit. A released or expired claim can be re-activated."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="claims")
    unit = models.ForeignKey(WorkUnit, on_delete=models.CASCADE, related_name="claims")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=ClaimState.choices, default=ClaimState.ACTIVE)
    claimed_at = models.DateTimeField()
    touched_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["unit", "user"], name="claim_unit_once_per_user"),
            # Two tabs claiming at once cannot both win: the second insert fails.
            models.UniqueConstraint(
                fields=["pool", "user"], condition=Q(state="active"), name="one_active_claim"
            ),
        ]
        indexes = [
            models.Index(fields=["user", "state"], name="claim_user_state"),
            models.Index(
                fields=["pool", "touched_at"], condition=Q(state="active"), name="claim_idle"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.state} {self.unit}"


class Kind(models.TextChoices):
    GRADE = "grade", "grade"
    UNSURE = "unsure", "unsure"
    SKIP = "skip", "skipped"
    UNDO = "undo", "undone"


class Judgment(models.Model):
    """One answer of one person on one pair. Rows are only ever added, never changed.

    A judgment belongs to the pair, not to the pool it was made in: it survives any number of
    pools. A person's current answer on a pair is their latest row; an `undo` row makes the
    pair unjudged again. `idempotency_key` is rendered with the item, so a double click, a retried
    request or a flaky connection cannot store the same answer twice.
    """

    # Deleting a pool leaves its pairs, and so their judgments; only deleting the query or the
    # document itself (or the whole project) takes them.
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="judgments")
    # Indexed as the first column of `judgment_latest`: a second index on it would only be
    # one more to update on every answer.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgments", db_index=False
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.GRADE)
    grade = models.PositiveSmallIntegerField(choices=Grade.choices, null=True, blank=True)
    note = models.TextField(blank=True)
    # Not indexed: judgments are read by item or by person, never by protocol version, and a
    # version is never deleted (it is immutable), so the index would only cost every answer.
    protocol = models.ForeignKey(
        ProtocolVersion,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="judgments",
        db_index=False,
    )
    seconds_spent = models.FloatField(help_text="time from showing the item to the answer")
    idempotency_key = models.UUIDField(default=uuid.uuid4, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(condition=Q(grade__lte=3), name="grade_0_to_3"),
            models.CheckConstraint(
                condition=Q(kind="grade", grade__isnull=False)
                | (~Q(kind="grade") & Q(grade__isnull=True)),
                name="grade_iff_kind_grade",
            ),
            models.CheckConstraint(condition=Q(seconds_spent__gte=0), name="seconds_not_negative"),
        ]
        indexes = [
            models.Index(fields=["user", "pair", "-id"], name="judgment_latest"),
        ]

    def __str__(self) -> str:
        shown = self.grade if self.kind == Kind.GRADE else self.kind
        return f"{self.user} on {self.pair}: {shown}"


class GoldSource(models.TextChoices):
    ADJUDICATED = "adjudicated", "adjudicated by a lead"
    LEAD = "lead", "judged by a lead"


class GoldItem(models.Model):
    """A pair whose grade is known (adjudicated, or judged by a lead): an answer key that gold
    checks are scored against. Retiring it keeps the checks already made scoreable."""

    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, related_name="gold")
    grade = models.PositiveSmallIntegerField(choices=Grade.choices)
    source = models.CharField(max_length=16, choices=GoldSource.choices)
    marked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    marked_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(grade__lte=3), name="gold_grade_0_to_3"),
        ]

    def __str__(self) -> str:
        return f"gold {self.pair}: {self.grade}"
