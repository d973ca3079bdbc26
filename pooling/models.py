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


class Pair(models.Model):
    """A (query, document) pair of a project: the unit of judging.

    Pools select pairs and judgments belong to pairs, so that a pair keeps every judgment made
    on it whatever pools are built later: a new pool only adds pairs. The project is the
    query's (and the document's: both are checked to be the same when a pool creates pairs).
    """

    # The unique index leads with the query and serves lookups by query; deleting a document
    # looks its key up in the document's own index.
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="pairs", db_index=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="pairs")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["query", "document"], name="pair_once"),
        ]

    def __str__(self) -> str:
        return f"{self.query.qid}/{self.document.docid}"


class PoolScope(models.TextChoices):
    ALL = "all", "every query of the project"
    NEW = "new", "only queries no earlier pool holds"


class Pool(models.Model):
    """The top-`depth` documents of some runs: a selection of pairs with their provenance.

    Pools only add: a pair selected again keeps its judgments, and only pairs nobody has graded
    become work. The counts record what the pool added when it was built, for its history.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pools")
    depth = models.PositiveIntegerField()
    runs = models.ManyToManyField(Run, related_name="pools")
    seed = models.BigIntegerField(help_text="seed of the display order shown to annotators")
    scope = models.CharField(max_length=8, choices=PoolScope.choices, default=PoolScope.ALL)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    selected = models.PositiveIntegerField(default=0, help_text="pairs the pool selects")
    added = models.PositiveIntegerField(default=0, help_text="pairs no earlier pool held")
    judged_before = models.PositiveIntegerField(
        default=0, help_text="selected pairs somebody had graded when the pool was built"
    )
    to_judge = models.PositiveIntegerField(default=0, help_text="selected pairs made work")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.project.slug} pool #{self.pk} (depth {self.depth})"


class PoolItem(models.Model):
    """A pair the pool selects, with its provenance (which runs, at which rank).

    `position` is a random display order fixed when the pool is built: queries in random
    order, then each query's documents in random order, so that neither the systems nor their
    ranks can be inferred from the order an annotator sees.
    """

    # Reads go by pool (the position index leads with it) or by pair (the pair index), and
    # deleting a pair looks its key up in the latter.
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="items", db_index=False)
    pair = models.ForeignKey(
        Pair, on_delete=models.CASCADE, related_name="pool_items", db_index=False
    )
    provenance = models.JSONField(help_text="run name -> 1-based rank in that run")
    best_rank = models.PositiveIntegerField()
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["pair", "pool"], name="pool_pair_once"),
            models.UniqueConstraint(fields=["pool", "position"], name="pool_position_once"),
        ]

    def __str__(self) -> str:
        return f"pool {self.pool_id} pair {self.pair_id}"
