"""Job handlers of evaluation (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from typing import Any

from jobs.errors import JobInputError
from jobs.models import Job
from jobs.run import Progress
from judging.models import LLMJudge

from .models import Release, RunEvaluation
from .services_calibration import CalibrationError, calibration_run
from .services_release import release_rescore


def llm_calibrate_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Calibrate a judge's current version; a restarted attempt asks only for the pairs whose
    answers were not stored yet."""
    try:
        judge = LLMJudge.objects.get(pk=job.params["judge_id"], project_id=job.project_id)
    except LLMJudge.DoesNotExist:
        raise JobInputError("the judge was deleted") from None
    try:
        calibration = calibration_run(judge=judge, user=job.created_by, progress=progress, job=job)
    except CalibrationError as error:
        raise JobInputError(str(error)) from error
    verdict = "passed" if calibration.passed else "refused: " + ", ".join(calibration.reasons)
    return {
        "calibration_id": calibration.pk,
        "passed": calibration.passed,
        "reasons": calibration.reasons,
        "summary": f"calibrated on {calibration.n} pairs: {verdict}",
    }


def release_rescore_job(job: Job, progress: Progress) -> dict[str, Any]:
    """Score the project's runs a release has not scored yet; a retried or redelivered job
    finds the runs scored before and scores only the rest (one row per release and run)."""
    try:
        release = Release.objects.get(pk=job.params["release_id"], project_id=job.project_id)
    except Release.DoesNotExist:
        raise JobInputError("the release was deleted") from None
    written = release_rescore(release=release, progress=progress)
    scored = RunEvaluation.objects.filter(release=release).count()
    return {
        "release_id": release.pk,
        "written": written,
        "scored": scored,
        "summary": f"{written} run{'s' if written != 1 else ''} scored under release "
        f"{release.number} ({scored} in all)",
    }
