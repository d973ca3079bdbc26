"""Job handlers of judging (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from typing import Any

from jobs.errors import JobInputError
from jobs.models import Job
from jobs.run import Progress
from pooling.models import PoolScope
from pooling.services import PoolingError

from .pools import pool_open_once


def pool_build_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Build a pool and open it for judging; a restarted attempt reuses an identical pool."""
    params = job.params
    try:
        pool = pool_open_once(
            project_id=job.project_id,
            run_ids=params["run_ids"],
            depth=params["depth"],
            seed=params["seed"],
            scope=params.get("scope", PoolScope.ALL),
            skip_missing=params.get("skip_missing", False),
            after=params.get("after"),
            # Only a build confirmed on a preview carries "after" (commands build at once).
            check_after="after" in params,
            user=job.created_by,
        )
    except PoolingError as error:
        raise JobInputError(str(error)) from error  # no queries, runs of another project...
    return {
        "pool_id": pool.pk,
        "summary": f"pool #{pool.pk} of depth {pool.depth} built: {pool.added} pairs added, "
        f"{pool.to_judge} to judge",
    }
