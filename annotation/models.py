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


class ProtocolVersion(models.Model):
    """The written definition of relevance. Judgments are stamped with the version they used."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="protocols")
    number = models.PositiveIntegerField()
    text = models.TextField(help_text="Markdown: the task, the grades, anchors, edge-case rulings")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="protocol_number_once"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} protocol v{self.number}"


class Document(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    docid = models.CharField(max_length=200)
    title = models.TextField(blank=True)
    text = models.TextField()

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

    class Meta:
        verbose_name_plural = "queries"
        constraints = [
            models.UniqueConstraint(fields=["project", "qid"], name="qid_once_per_project"),
        ]

    def __str__(self) -> str:
        return f"{self.qid}: {self.text[:60]}"
