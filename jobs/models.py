"""Background jobs: the one place where the state of work done by a Celery worker lives.

A job is a small state machine that always ends::

    queued ──claim──► running ──► done
      ▲                  │ └────► failed   (bad input: for good; a defect or used-up
      └── transient ─────┘                  attempts: retryable from the page)
          error / reaper                  discarded (abandoned or cancelled by a lead)

Each app's record of the work (a search log, a pool) points at its job; the job names its
handler by dotted path, so this app imports no app above it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Project


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    DISCARDED = "discarded", "Discarded"


FINAL_STATES = (JobState.DONE, JobState.FAILED, JobState.DISCARDED)


class Job(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=32, help_text="what the job does, for people")
    handler = models.CharField(max_length=200, help_text="dotted path of the function run")
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED)
    progress = models.FloatField(default=0.0)
    message = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    retryable = models.BooleanField(default=False, help_text="a failure a retry may cure")
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="last sign of life (running) or last publish (queued)"
    )
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the attempt")
    params = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    files = models.JSONField(default=list, help_text="files the job owns, removed when it ends")
    cancel_requested = models.BooleanField(
        default=False, help_text="a lead asked to stop it; the handler stops at its next check"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "heartbeat_at"], name="job_state_heartbeat")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.state})"

    @property
    def label(self) -> str:
        return self.kind.replace("_", " ")

    @property
    def active(self) -> bool:
        """Still to end: the page polls while this holds."""
        return self.state in (JobState.QUEUED, JobState.RUNNING)

    @property
    def can_retry(self) -> bool:
        return self.state == JobState.FAILED and self.retryable

    @property
    def percent(self) -> int:
        return round(self.progress * 100)
