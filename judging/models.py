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


# --------------------------------------------------------------------------- the LLM judge


class JudgeKind(models.TextChoices):
    ENDPOINT = "endpoint", "an OpenAI-compatible endpoint"
    EXTERNAL = "external", "labels imported from a file"


class LLMJudge(models.Model):
    """A lead's configuration of an LLM judge. What can change its answers is hashed into a
    `JudgeVersion` when it judges; editing the configuration therefore makes a new version,
    and a new version has no calibration.

    The API key is never stored: `api_key_env` names the environment variable (or mounted
    secret) the worker reads it from.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="llm_judges")
    name = models.SlugField(max_length=64)
    kind = models.CharField(max_length=16, choices=JudgeKind.choices, default=JudgeKind.ENDPOINT)
    base_url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200, blank=True)
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="environment variable holding the API key"
    )
    prompt_template = models.TextField(
        blank=True, help_text="the prompt template; empty = the built-in template"
    )
    reasoning = models.BooleanField(
        default=False, help_text="ask for UMBRELA-style step-by-step reasoning before the grade"
    )
    temperature = models.FloatField(default=0.0)
    concurrency = models.PositiveSmallIntegerField(default=8)
    timeout = models.FloatField(default=60.0, help_text="seconds per call")
    max_retries = models.PositiveSmallIntegerField(
        default=4, help_text="retries of a call after 429, 5xx or a timeout"
    )
    price_input = models.FloatField(
        null=True, blank=True, help_text="price per million input tokens (for cost reports)"
    )
    price_output = models.FloatField(
        null=True, blank=True, help_text="price per million output tokens (for cost reports)"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="llm_judge_name_once"),
            models.CheckConstraint(
                condition=Q(concurrency__gte=1) & Q(concurrency__lte=256),
                name="llm_concurrency_1_to_256",
            ),
            models.CheckConstraint(condition=Q(timeout__gt=0), name="llm_timeout_positive"),
            models.CheckConstraint(condition=Q(max_retries__lte=10), name="llm_retries_at_most_10"),
            models.CheckConstraint(
                condition=Q(temperature__gte=0) & Q(temperature__lte=2),
                name="llm_temperature_0_to_2",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}"


class JudgeVersion(models.Model):
    """One version of a judge: the hash of everything that can change its answers (endpoint,
    model, prompt template, protocol version, parameters; for an external judge, the labels
    file). `config` is what was hashed, without secrets, for people to read."""

    judge = models.ForeignKey(LLMJudge, on_delete=models.CASCADE, related_name="versions")
    digest = models.CharField(max_length=64)
    protocol = models.ForeignKey(
        ProtocolVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    config = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judge", "digest"], name="judge_version_once"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} @{self.digest[:10]}"

    @property
    def short(self) -> str:
        return self.digest[:10]


class LLMStatus(models.TextChoices):
    OK = "ok", "graded"
    PARSE_FAILURE = "parse_failure", "unparseable answer"
    FAILED = "failed", "call failed"


class LLMJudgment(models.Model):
    """One call of a judge version on one pair: one row per (version, pair, repeat), so a
    retried or redelivered task never calls twice for a pair that has an answer and never
    stores two. `repeat` 1 is the test-retest call of calibration. A parse failure or a
    failed call has no grade: it is stored as missing, never guessed."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="judgments")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="llm_judgments")
    repeat = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=LLMStatus.choices)
    grade = models.PositiveSmallIntegerField(choices=Grade.choices, null=True, blank=True)
    reason = models.TextField(blank=True)
    raw = models.TextField(blank=True, help_text="the response as received")
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "pair", "repeat"], name="llm_judgment_once"),
            models.CheckConstraint(condition=Q(grade__lte=3), name="llm_grade_0_to_3"),
            models.CheckConstraint(
                condition=Q(status="ok", grade__isnull=False)
                | (~Q(status="ok") & Q(grade__isnull=True)),
                name="llm_grade_iff_ok",
            ),
            models.CheckConstraint(condition=Q(repeat__lte=1), name="llm_repeat_0_or_1"),
        ]
        indexes = [models.Index(fields=["pair"], name="llm_judgment_pair")]

    def __str__(self) -> str:
        return (
            f"{self.version} on {self.pair}: {self.grade if self.status == 'ok' else self.status}"
        )


class Calibration(models.Model):
    """A calibration of a judge version against the humans; the latest row of a version
    stands. `report` holds every figure (the `llm_judge calibrate --format json` shape),
    `thresholds` the gate settings it was decided under, `reasons` the failed conditions."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="calibrations")
    n = models.PositiveIntegerField()
    passed = models.BooleanField()
    reasons = models.JSONField(default=list)
    report = models.JSONField(default=dict)
    thresholds = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["version", "-id"], name="calibration_latest")]

    def __str__(self) -> str:
        return f"calibration of {self.version}: {'passed' if self.passed else 'refused'}"


class JudgeSettings(models.Model):
    """The gate's conditions and the LLM judge's shares, per project (defaults without a row)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="judge_settings")
    min_pairs = models.PositiveIntegerField(default=100)
    ceiling_margin = models.FloatField(
        default=0.05, help_text="kappa(LLM, humans) must reach the humans' kappa minus this"
    )
    kappa_floor = models.FloatField(default=0.30)
    max_mean_diff = models.FloatField(default=0.3, help_text="largest |mean grade difference|")
    ratio_low = models.FloatField(default=0.8, help_text="lowest positive rate ratio")
    ratio_high = models.FloatField(default=1.25, help_text="highest positive rate ratio")
    min_recall = models.FloatField(default=0.7, help_text="recall of the relevant class")
    max_parse_failures = models.FloatField(default=0.02)
    min_tau = models.FloatField(default=0.8, help_text="Kendall's tau of system rankings")
    relevance_threshold = models.PositiveSmallIntegerField(
        default=2, help_text="grade from which a pair counts as relevant for the gate"
    )
    retest_sample = models.PositiveIntegerField(
        default=50, help_text="pairs asked twice to measure test-retest agreement"
    )
    prefilter_threshold = models.PositiveSmallIntegerField(
        default=1, help_text="pre-filter: humans review the pairs the judge graded this or more"
    )
    audit_share = models.FloatField(
        default=0.10, help_text="pre-filter: share of the rest humans review as an audit"
    )
    human_only_share = models.FloatField(
        default=0.10, help_text="share of queries, per stratum, no judge ever labels"
    )

    class Meta:
        verbose_name_plural = "judge settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(audit_share__gte=0) & Q(audit_share__lte=1), name="audit_share_0_to_1"
            ),
            models.CheckConstraint(
                condition=Q(human_only_share__gte=0) & Q(human_only_share__lte=1),
                name="human_only_share_0_to_1",
            ),
            models.CheckConstraint(
                condition=Q(max_parse_failures__gte=0) & Q(max_parse_failures__lte=1),
                name="parse_failures_0_to_1",
            ),
            models.CheckConstraint(
                condition=Q(relevance_threshold__gte=1) & Q(relevance_threshold__lte=3),
                name="relevance_threshold_1_to_3",
            ),
            models.CheckConstraint(
                condition=Q(prefilter_threshold__gte=1) & Q(prefilter_threshold__lte=3),
                name="prefilter_threshold_1_to_3",
            ),
            models.CheckConstraint(
                condition=Q(ratio_low__lte=F("ratio_high")), name="ratio_low_below_high"
            ),
        ]

    def __str__(self) -> str:
        return f"judge settings of {self.project}"


class HumanOnlyQuery(models.Model):
    """A query of the human-only slice: no judge ever labels its pairs, kept forever. Drawn
    per stratum; later queries top the slice up, earlier members never leave it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    query = models.OneToOneField(Query, on_delete=models.CASCADE, related_name="human_only")
    added_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"human-only {self.query}"


class Screening(models.Model):
    """A pair a judge version graded below the pre-filter threshold. An audit pair (drawn at
    the project's audit share) stays with the humans, whose grades then measure what the
    pre-filter misses; any other screened pair is taken out of human work."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="screenings")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="screenings")
    audit = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "pair"], name="screening_once"),
        ]
        indexes = [models.Index(fields=["pair"], name="screening_pair")]

    def __str__(self) -> str:
        return f"{self.pair} screened by {self.version}{' (audit)' if self.audit else ''}"
