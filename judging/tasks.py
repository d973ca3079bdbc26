"""Job handlers of judging (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from jobs.errors import JobInputError
from jobs.models import Job
from jobs.run import Progress
from pooling.models import PoolScope
from pooling.services import PoolingError

from .models import JudgeVersion
from .pools import pool_open_once
from .services_llm import (
    JudgeError,
    gate_passed,
    gate_refusal,
    llm_label_pairs,
    llm_label_scope,
    prefilter_apply,
)


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


def llm_label_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Label pairs with a judge version (mode label, prefilter or calibration). The gate is
    checked here again: whoever queued the job, a version without a passed calibration labels
    nothing beyond the pairs it is calibrated on."""
    params = job.params
    mode = params.get("mode")
    version = (
        JudgeVersion.objects.select_related("judge__project", "protocol")
        .filter(pk=params.get("version_id"), judge__project_id=job.project_id)
        .first()
    )
    if version is None:
        raise JobInputError("The judge version to label with no longer exists.")
    try:
        if mode == "label" and not gate_passed(version=version):
            raise JobInputError(gate_refusal(version))
        if mode == "calibration":
            pair_ids = [int(pk) for pk in params.get("pair_ids") or []]
        else:
            pair_ids = llm_label_scope(version=version, mode=str(mode), limit=params.get("limit"))
        labelled = llm_label_pairs(
            version=version,
            pair_ids=pair_ids,
            concurrency=version.judge.concurrency,
            progress=progress,
            job=job,
        )
        result: dict[str, Any] = {"version_id": version.pk, "mode": mode, **labelled.as_dict()}
        if mode == "prefilter":
            screened = prefilter_apply(version=version)
            result["prefilter"] = asdict(screened)
    except JudgeError as error:
        raise JobInputError(str(error)) from error
    result["summary"] = (
        f"{labelled.labelled:,} pairs labelled by {version}, {labelled.skipped_existing:,} had "
        f"a label already; {labelled.parse_failures} unparseable, {labelled.failed} failed"
    )
    return result
