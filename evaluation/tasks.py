"""Job handlers of evaluation (run by `jobs.tasks.job_run`): thin wrappers over one service."""

from __future__ import annotations

from typing import Any

from jobs.errors import JobInputError
from jobs.models import Job
from jobs.run import Progress
from judging.models import LLMJudge

from .services_calibration import CalibrationError, calibration_run


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
