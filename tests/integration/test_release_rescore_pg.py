"""Re-scoring on PostgreSQL outside a transaction, as a worker runs it: the runs are read on
several connections at once, and the stored means still equal `evaluate` on the files."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from evaluation.measures import evaluate_files
from evaluation.models import RunEvaluation
from evaluation.services_release import (
    STORED_CONTRACT,
    STORED_MEASURES,
    qrels_text,
    release_create,
    release_qrels,
    release_rescore_start,
)
from jobs.run import job_run_inline
from tests.release_world import release_world, run_file

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_job_reads_runs_on_several_connections_and_scores_as_evaluate(
    tmp_path: Path,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the runs are read on several connections only on PostgreSQL")
    world = release_world(tmp_path)
    release = release_create(project=world.project, policy="llm", start_rescore=False)
    job = release_rescore_start(release=release)
    job_run_inline(job.pk)
    job.refresh_from_db()
    assert job.state == "done" and (job.result or {}).get("written") == 3
    qrels = tmp_path / "release.qrels"
    qrels.write_text("".join(qrels_text(release_qrels(release=release))))
    for evaluation in RunEvaluation.objects.filter(release=release).select_related("run"):
        path = run_file(evaluation.run, tmp_path / f"{evaluation.run.name}.run")
        expected = evaluate_files(qrels, [path], STORED_MEASURES, STORED_CONTRACT)[str(path)]
        assert evaluation.means == pytest.approx(expected.mean, abs=1e-12)
        assert evaluation.queries["missing_from_run"] == expected.missing_from_run
