"""Job handlers of pooling (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from typing import Any

from jobs.models import Job
from jobs.run import Progress

from .services_data import KINDS, data_import_result, data_import_run
from .services_runs import baselines_run, runs_import_run


def runs_import_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Import run files, all or none, and report what each run names that the project lacks."""
    return runs_import_run(job=job, progress=progress)


def baselines_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Run the built-in baselines over the project's corpus and queries; store their runs."""
    return baselines_run(job=job, progress=progress)


def data_import_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Import an uploaded corpus or query file (all or nothing)."""
    report = data_import_run(job=job, progress=progress)
    return data_import_result(KINDS[job.params["field"]], report)
