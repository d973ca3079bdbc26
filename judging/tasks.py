"""Job handlers of judging (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from typing import Any

from jobs.errors import JobInputError
from jobs.models import Job
from jobs.run import Progress
from pooling.services import PoolingError

from .services import pool_open_once


def pool_build_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Build a pool and open it for judging; a restarted attempt reuses an identical pool."""
    params = job.params
    try:
        pool = pool_open_once(
            project_id=job.project_id,
            run_ids=params["run_ids"],
            depth=params["depth"],
            seed=params["seed"],
        )
    except PoolingError as error:
        raise JobInputError(str(error)) from error  # no queries, runs of another project...
    return {"pool_id": pool.pk, "summary": f"pool of depth {pool.depth} built"}
