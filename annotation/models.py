"""Projects and who may work on them; the corpus, the queries and the judging protocol."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def current_protocol(self) -> ProtocolVersion | None:
        return self.protocols.order_by("-number").first()


class Role(models.TextChoices):
    ANNOTATOR = "annotator", "Annotator"
    LEAD = "lead", "Lead"


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_once"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"

    @property
    def is_lead(self) -> bool:
        return self.role == Role.LEAD


def empty_protocol_content() -> dict[str, list[object]]:
    return {"grades": [], "anchors": [], "rulings": []}


class ProtocolVersion(models.Model):
    """The written definition of relevance, as published: immutable once created.

    `text` is the whole protocol rendered as Markdown (what annotators read, search and diff);
    `content` holds the structured parts: the introduction, grades (value, label, definition),
    anchor examples (query, document, grade, why) and edge-case rulings (question, ruling).
    Judgments are stamped with the version they were made under.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="protocols")
    number = models.PositiveIntegerField()
    text = models.TextField(help_text="Markdown: the task, the grades, anchors, edge-case rulings")
    content = models.JSONField(default=empty_protocol_content, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="protocol_number_once"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} protocol v{self.number}"


class ProtocolDraft(models.Model):
    """The lead's working copy of the next protocol version (one per project)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="protocol_draft")
    text = models.TextField(blank=True)
    content = models.JSONField(default=empty_protocol_content, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.project.slug} protocol draft"


class ProtocolAck(models.Model):
    """An annotator has read what changed in a protocol version."""

    version = models.ForeignKey(ProtocolVersion, on_delete=models.CASCADE, related_name="acks")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    acknowledged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "user"], name="protocol_ack_once"),
        ]

    def __str__(self) -> str:
        return f"{self.user} read {self.version}"


class Document(models.Model):
    # No index of its own: the unique (project, docid) index serves lookups by project.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="documents", db_index=False
    )
    docid = models.CharField(max_length=200)
    title = models.TextField(blank=True)
    text = models.TextField()
    # A database default too: the corpus import copies rows in naming only the columns it has.
    metadata = models.JSONField(
        default=dict,
        db_default=models.Value({}, output_field=models.JSONField()),
        blank=True,
        help_text="the corpus file's metadata (dates, sources, ...)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "docid"], name="docid_once_per_project"),
        ]

    def __str__(self) -> str:
        return self.docid


class Query(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="queries")
    qid = models.CharField(max_length=200)
    text = models.TextField()
    description = models.TextField(
        blank=True, help_text="what the searcher wanted (TREC description / narrative), for judges"
    )
    stratum = models.CharField(
        max_length=32, blank=True, help_text="sampling stratum (head, torso, tail, failures)"
    )
    # Filled when the query came from a log sample: what is needed to re-weight to traffic
    # (which sample it came from is the sampling app's to record).
    frequency = models.PositiveIntegerField(null=True, blank=True)
    inclusion_probability = models.FloatField(null=True, blank=True)
    signals = models.JSONField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "queries"
        constraints = [
            models.UniqueConstraint(fields=["project", "qid"], name="qid_once_per_project"),
        ]

    def __str__(self) -> str:
        return f"{self.qid}: {self.text[:60]}"
