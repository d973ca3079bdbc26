"""Moving search logs, statistics and samples from annotation to sampling loses nothing.

The database is migrated back to before the move, filled there with the historical models (a
project, its log, the log's statistics, a sample accepted into the project's queries), then
migrated forward; everything is found again through the sampling app's models.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.models import Query
from sampling.models import LogQueryStat, LogStatus, QueryLog, QuerySample, SampledQuery
from sampling.services import log_queue

BEFORE = [("annotation", "0006_query_log_definition")]


def migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_a_log_its_statistics_and_a_sample_made_before_the_move_are_found_after() -> None:
    executor = migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    project = old.get_model("annotation", "Project").objects.create(slug="moved", name="Moved")
    log = old.get_model("annotation", "QueryLog").objects.create(
        project=project, name="log.csv", status="done", report={"rows": 3}, strata={"table": []}
    )
    stat = old.get_model("annotation", "LogQueryStat").objects.create(
        log=log, query="red shoes", frequency=2, sessions=1, zero_result_rate=0.5, stratum="head"
    )
    sample = old.get_model("annotation", "QuerySample").objects.create(
        project=project, log=log, quotas={"head": 1}, seed=7, draws=[], drawn=[{"query": "x"}]
    )
    query = old.get_model("annotation", "Query").objects.create(
        project=project, qid="s1-001", text="red shoes", stratum="head", sample=sample
    )
    plain = old.get_model("annotation", "Query").objects.create(
        project=project, qid="q2", text="blue hat"
    )

    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    moved = QueryLog.objects.get(pk=log.pk)
    assert (moved.name, moved.status, moved.report) == ("log.csv", LogStatus.DONE, {"rows": 3})
    assert moved.project.slug == "moved"
    row = LogQueryStat.objects.get(pk=stat.pk)
    assert (row.log_id, row.query, row.frequency, row.zero_result_rate) == (
        log.pk,
        "red shoes",
        2,
        0.5,
    )
    drawn = QuerySample.objects.get(pk=sample.pk)
    assert (drawn.log_id, drawn.seed, drawn.drawn) == (log.pk, 7, [{"query": "x"}])
    assert SampledQuery.objects.get(query_id=query.pk).sample_id == sample.pk
    assert not SampledQuery.objects.filter(query_id=plain.pk).exists()
    assert Query.objects.get(pk=query.pk).sampled.sample == drawn
    # the tables are sampling's now, and new rows go on numbering after the old ones
    assert QueryLog._meta.db_table == "sampling_querylog"
    later = log_queue(project=moved.project, name="later.csv", path="later.csv", owned=False)
    assert later.pk > log.pk
