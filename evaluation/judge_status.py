"""A judge's state in one dict: what `llm_judge status --format json` prints and the API's
`GET /api/projects/<slug>/judges/<name>/` answers (version, gate, last calibration, counts,
cost)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from judging.models import Calibration, JudgeKind, JudgeVersion, LLMJudge, Screening
from judging.services_llm import cost_of, latest_calibration
from pooling.models import Pair

from .services_calibration import judge_version_of


def judge_status(judge: LLMJudge) -> dict[str, Any]:
    """The `status` JSON: version, gate, last calibration, counts, cost."""
    version = judge_version_of(judge=judge)
    latest: Calibration | None = latest_calibration(version=version)
    by_status = dict(
        version.judgments.filter(repeat=0).values_list("status").annotate(n=Count("id"))
    )
    gate = "not calibrated" if latest is None else "passed" if latest.passed else "refused"
    return {
        "judge": judge.name,
        "kind": judge.kind,
        "model": judge.model,
        "base_url": judge.base_url,
        "version": version.digest,
        "gate": gate,
        "calibration": None if latest is None else _summary(latest),
        "counts": {
            "pairs": Pair.objects.filter(query__project=judge.project).count(),
            "labelled": sum(by_status.values()),
            "ok": by_status.get("ok", 0),
            "parse_failure": by_status.get("parse_failure", 0),
            "failed": by_status.get("failed", 0),
            "retest": version.judgments.filter(repeat=1).count(),
            "screened": Screening.objects.filter(version=version).count(),
        },
        "cost": _cost(judge, version),
    }


def _summary(calibration: Calibration) -> dict[str, Any]:
    report = calibration.report
    return {
        "at": calibration.created_at.isoformat(),
        "n": calibration.n,
        "passed": calibration.passed,
        "reasons": calibration.reasons,
        **{key: report.get(key) for key in ("kappa", "kappa_binary", "human_kappa", "tau")},
    }


def _cost(judge: LLMJudge, version: JudgeVersion) -> dict[str, Any] | None:
    if judge.kind == JudgeKind.EXTERNAL:
        return None  # nothing was called

    return dict(cost_of(version=version))
