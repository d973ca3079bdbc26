"""System runs as uploaded, and the pools built from them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Document, Project, Query


class Run(models.Model):
    """One system's ranked results for the project's queries (a TREC run file)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=500, blank=True, help_text="file name it came from")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="run_name_once_per_project"),
        ]

    def __str__(self) -> str:
        return self.name


class RunResult(models.Model):
    """One line of a run. Ids are kept as strings: a run may cover queries or documents the
    project does not hold (yet), and the run must stay exactly as the system produced it."""

    # No index of its own: the two composite indexes below both start with the run, and serve
    # the key's checks when a run is deleted as well as every read of a run's lines.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results", db_index=False)
    qid = models.CharField(max_length=200)
    docid = models.CharField(max_length=200)
    rank = models.PositiveIntegerField(help_text="1-based position in trec_eval order")
    score = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "qid", "docid"], name="run_doc_once"),
        ]
        indexes = [models.Index(fields=["run", "qid", "rank"], name="run_query_rank")]

    def __str__(self) -> str:
        return f"{self.qid} Q0 {self.docid} {self.rank} {self.score}"


class Pool(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pools")
    depth = models.PositiveIntegerField()
    runs = models.ManyToManyField(Run, related_name="pools")
    seed = models.BigIntegerField(help_text="seed of the display order shown to annotators")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.project.slug} pool #{self.pk} (depth {self.depth})"


class PoolItem(models.Model):
    """A query-document pair to judge, with its provenance (which runs, at which rank).

    `position` is a random display order fixed when the pool is built: queries in random
    order, then each query's documents in random order, so that neither the systems nor their
    ranks can be inferred from the order an annotator sees.
    """

    # Each key needs an index that leads with it: reads go by pool (and query), and deleting a
    # query or a document makes the database look its key up here, a scan per row without one.
    # The pool and the query have theirs in the unique indexes below (the pair's leads with
    # the query: its pool and query lookups serve equally); only the document has its own.
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="items", db_index=False)
    query = models.ForeignKey(
        Query, on_delete=models.CASCADE, related_name="pool_items", db_index=False
    )
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="pool_items")
    provenance = models.JSONField(help_text="run name -> 1-based rank in that run")
    best_rank = models.PositiveIntegerField()
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["query", "pool", "document"], name="pool_pair_once"),
            models.UniqueConstraint(fields=["pool", "position"], name="pool_position_once"),
        ]

    def __str__(self) -> str:
        return f"{self.query.qid}/{self.document.docid}"
