"""The few reads and writes of LLM judges that calibration and imports need: a project's gate
settings, a version's latest calibration, and the judge of imported labels (kind external).

An external judge never calls anything: its versions are the label files imported for it, one
version per distinct set of labels (the digest hashes them), so a changed file is a new version
and a new version has no calibration.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import Project

from .models import Calibration, JudgeKind, JudgeSettings, JudgeVersion, LLMJudge


class JudgeKindError(ValueError):
    """A judge used as the kind it is not (labels imported into an endpoint judge...)."""


def judge_settings_of(*, project: Project) -> JudgeSettings:
    """The project's gate settings; the defaults (unsaved) when the project has no row."""
    found = JudgeSettings.objects.filter(project=project).first()
    return found if found is not None else JudgeSettings(project=project)


def latest_calibration(*, version: JudgeVersion) -> Calibration | None:
    return version.calibrations.order_by("-id").first()


def gate_passed(*, version: JudgeVersion) -> bool:
    """Whether the version's latest calibration passed: the gate before labelling at scale."""
    latest = latest_calibration(version=version)
    return latest is not None and latest.passed


@transaction.atomic
def judge_external_add(*, project: Project, name: str, user: User | None = None) -> LLMJudge:
    """The project's external judge `name`, created when missing; refused when `name` is a
    judge that calls an endpoint (its labels come from its calls, not from files)."""
    judge, _ = LLMJudge.objects.get_or_create(
        project=project,
        name=name,
        defaults={"kind": JudgeKind.EXTERNAL, "created_by": user},
    )
    if judge.kind != JudgeKind.EXTERNAL:
        raise JudgeKindError(
            f"judge {name!r} of project {project.slug!r} calls an endpoint; import the labels "
            "under another name"
        )
    return judge


@transaction.atomic
def judge_external_version(*, judge: LLMJudge, digest: str, config: dict[str, Any]) -> JudgeVersion:
    """The external judge's version of one set of labels (created at its first import)."""
    version, _ = JudgeVersion.objects.get_or_create(
        judge=judge,
        digest=digest,
        defaults={"config": config, "protocol": judge.project.current_protocol()},
    )
    return version


def judge_external_current(*, judge: LLMJudge) -> JudgeVersion | None:
    """An external judge's current version: the labels imported last."""
    return judge.versions.order_by("-id").first()
