"""Job handlers of sampling (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from typing import Any

from jobs.models import Job
from jobs.run import Progress

from .services import log_ingest_run


def log_ingest_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Ingest an uploaded log; a restarted attempt starts over (see `log_ingest_run`)."""
    query_log = log_ingest_run(job=job, progress=progress)
    return {"log_id": query_log.pk, "summary": f"{query_log.stats.count()} distinct queries"}
