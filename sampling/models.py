"""Search logs, their per-query statistics and strata, and the samples drawn from them.

Only per-query statistics of a log are kept (the uploaded file is deleted once read). A sample
is a preview until accepted; accepting it adds annotation queries and records here which
sample each came from.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Project, Query
from jobs.models import Job, JobState

# A log's state is its ingest job's (jobs.models): queued, running, done, failed, discarded.
LogStatus = JobState


class SamplingScheme(models.Model):
    """The project's strata definition, fixed by its first log so later samples match it."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="sampling")
    definition = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.project.slug} sampling scheme"


class QueryLog(models.Model):
    """An uploaded search log. Only per-query statistics are kept: the file is deleted."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="logs")
    name = models.CharField(max_length=255)
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="query_log")
    columns = models.CharField(max_length=500, blank=True, help_text="field=column, ...")
    definition = models.JSONField(
        null=True,
        blank=True,
        help_text="strata definition asked for at upload; only the project's first log uses it",
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    report = models.JSONField(null=True, blank=True)
    strata = models.JSONField(null=True, blank=True, help_text="table, chart points, cut ranks")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    # The ingest job holds the state; these read it as the log's own.
    @property
    def status(self) -> str:
        return self.job.state

    @property
    def error(self) -> str:
        return self.job.error


class LogQueryStat(models.Model):
    """Per-query statistics of one log (normalised query text)."""

    log = models.ForeignKey(QueryLog, on_delete=models.CASCADE, related_name="stats")
    query = models.TextField()
    frequency = models.PositiveIntegerField()
    sessions = models.PositiveIntegerField(null=True)
    users = models.PositiveIntegerField(null=True)
    zero_result_rate = models.FloatField(null=True)
    reformulation_rate = models.FloatField(null=True)
    abandonment_rate = models.FloatField(null=True)
    pii = models.CharField(max_length=32, blank=True, help_text="PII kind of a masked query")
    stratum = models.CharField(max_length=16)

    def __str__(self) -> str:
        return f"{self.query[:60]} ×{self.frequency}"


class QuerySample(models.Model):
    """A drawn sample: previewed first, accepted into the project's queries on purpose."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="samples")
    log = models.ForeignKey(QueryLog, on_delete=models.CASCADE, related_name="samples")
    quotas = models.JSONField()
    seed = models.BigIntegerField()
    weighted = models.BooleanField(default=False)
    draws = models.JSONField()
    drawn = models.JSONField(help_text="the sampled queries as sample_queries prints them")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"sample #{self.pk} of {self.log}"


class SampledQuery(models.Model):
    """Which accepted sample a project query came from (a query holds its stratum, weight
    and signals itself; deleting the sample keeps the query and forgets its origin)."""

    query = models.OneToOneField(
        Query, on_delete=models.CASCADE, primary_key=True, related_name="sampled"
    )
    sample = models.ForeignKey(QuerySample, on_delete=models.CASCADE, related_name="sampled")

    def __str__(self) -> str:
        return f"{self.query_id} from sample #{self.sample_id}"
