"""A release's manifest: what it was made of, as plain data (shown on its page, downloaded
as JSON)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db.models import Count

from annotation.models import Project
from judging.models import HumanOnlyQuery, JudgeVersion
from judging.services_llm import latest_calibration
from pooling.models import Pool
from sampling.models import QuerySample

from .models import LabelSource, Release, ReleasePolicy, UnresolvedPolicy
from .release_labels import Humans, Label, counted

MANIFEST_FORMAT = 1


def manifest_of(
    *, release: Release, labels: Sequence[Label], strata: dict[str, str], humans: Humans
) -> dict[str, Any]:
    """What the release was made of, as plain data (the manifest download)."""
    project = release.project
    versions = Counter(x.judge_version_id for x in labels if x.judge_version_id is not None)
    return {
        "format": MANIFEST_FORMAT,
        "project": project.slug,
        "release": release.number,
        "policy": release.policy,
        "unresolved": release.unresolved,
        "policies": {
            "release": ReleasePolicy(release.policy).label,
            "unresolved": "pairs whose judges disagree, not adjudicated: "
            + UnresolvedPolicy(release.unresolved).label,
        },
        "note": release.note,
        "created_by": release.created_by.username if release.created_by else None,
        "created_at": release.created_at.isoformat(),
        "pairs": len(labels),
        "queries": len({x.qid for x in labels}),
        "content_hash": release.content_hash,
        "protocol_versions": _protocols(labels, humans),
        **_pools(project),
        "samples": _samples(project),
        "judge_versions": _judge_versions(versions),
        "counts": {
            "grade": counted(str(x.grade) for x in labels),
            "stratum": counted(strata.get(x.qid, "") or "none" for x in labels),
            "source": counted(x.source for x in labels),
        },
        "human_only": sorted(
            HumanOnlyQuery.objects.filter(project=project).values_list("query__qid", flat=True)
        ),
    }


def _protocols(labels: Sequence[Label], humans: Humans) -> list[int]:
    """The protocol version numbers the labels' judgments were made under."""
    numbers: set[int] = set()
    for x in labels:
        if x.pair_id is not None and x.source != LabelSource.LLM:
            numbers |= humans.protocols.get(x.pair_id, set())
    versions = {x.judge_version_id for x in labels if x.judge_version_id is not None}
    judged = JudgeVersion.objects.filter(pk__in=versions, protocol__isnull=False)
    numbers |= set(judged.values_list("protocol__number", flat=True))
    return sorted(numbers)


def _pools(project: Project) -> dict[str, Any]:
    pools = Pool.objects.filter(project=project).prefetch_related("runs").order_by("pk")
    shown: list[dict[str, Any]] = [
        {
            "id": pool.pk,
            "depth": pool.depth,
            "runs": sorted(run.name for run in pool.runs.all()),
            "created": pool.created_at.isoformat(),
        }
        for pool in pools
    ]
    pooled = sorted({run.name for pool in pools for run in pool.runs.all()})
    return {"pools": shown, "runs_pooled": pooled}


def _samples(project: Project) -> list[dict[str, Any]]:
    samples = QuerySample.objects.filter(project=project, accepted_at__isnull=False)
    found = []
    for sample in samples.select_related("log").order_by("pk"):
        strata = sample.sampled.values("query__stratum").annotate(n=Count("pk"))
        found.append(
            {
                "id": sample.pk,
                "log": sample.log.name,
                "seed": sample.seed,
                "quotas": sample.quotas,
                "weighted": sample.weighted,
                "strata": {row["query__stratum"] or "none": row["n"] for row in strata},
                "accepted": sample.accepted_at.isoformat() if sample.accepted_at else None,
            }
        )
    return found


def _judge_versions(used: Counter[int]) -> list[dict[str, Any]]:
    found = []
    for version in JudgeVersion.objects.filter(pk__in=used).select_related("judge").order_by("pk"):
        calibration = latest_calibration(version=version)
        found.append(
            {
                "judge": version.judge.name,
                "digest": version.digest,
                "kappa": (calibration.report or {}).get("kappa") if calibration else None,
                "labels": used[version.pk],
            }
        )
    return found
