"""The lead's release pages: the releases (and a new one), one release (its manifest,
downloads, diff with the previous one and its re-scoring job), the diff between two, the
downloads, and the history of every run's scores under every release. Annotators get 403,
outsiders 404 (`annotation.access`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agreement.labels import POLICIES, policy_of
from annotation.access import Access, project_for_lead
from jobs.errors import QueueUnavailable
from jobs.services import job_enqueue

from .models import Release, ReleasePolicy
from .release_history import release_history
from .services_release import (
    STORED_MEASURES,
    ReleaseError,
    qrels_text,
    release_create,
    release_diff,
    release_labels,
    release_of,
    release_preview,
    release_qrels,
    release_rescore_start,
    rescore_job_of,
    runs_unscored,
)

KINDS = ("qrels", "beir", "jsonl", "manifest")


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


def _release(access: Access, number: int) -> Release:
    try:
        return release_of(project=access.project, number=number)
    except Release.DoesNotExist:
        raise Http404("no such release") from None


@login_required
def releases(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's releases, newest first; POST cuts the next one (policy, unresolved
    policy, note). `?preview=1&policy=...&unresolved=...` shows the counts it would have."""
    access = _get_project_for_lead(request, slug)
    project = access.project
    error = ""
    if request.method == "POST":
        try:
            release = release_create(
                project=project,
                policy=request.POST.get("policy", ""),
                unresolved=request.POST.get("unresolved", "lower"),
                note=request.POST.get("note", ""),
                user=request.user,  # type: ignore[arg-type]
            )
        except ReleaseError as problem:
            error = str(problem)
        else:
            messages.info(request, f"Release {release.number} cut: {release.pairs} labels.")
            return redirect("release_detail", slug, release.number)
    context: dict[str, Any] = {
        "project": project,
        "releases": Release.objects.filter(project=project).select_related("created_by")[::-1],
        "policies": ReleasePolicy.choices,
        "unresolved_policies": POLICIES,
        "chosen": request.POST or request.GET,
        "error": error,
        "preview": _preview(access, request) if request.GET.get("preview") else None,
    }
    return render(request, "evaluation/release_list.html", context, status=400 if error else 200)


def _preview(access: Access, request: HttpRequest) -> dict[str, Any]:
    """The counts a release would have now, per source and grade (nothing is written)."""
    policy = request.GET.get("policy", ReleasePolicy.ADJUDICATED)
    try:
        rule = policy_of(request.GET.get("unresolved", "lower"))
        if policy not in ReleasePolicy.values:
            raise ValueError(f"unknown policy {policy!r}")
    except ValueError as problem:
        return {"error": str(problem)}
    return release_preview(project=access.project, policy=policy, unresolved=rule)


@login_required
def release_detail(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """One release: its manifest, downloads, the diff with the previous release and the
    progress of its re-scoring (the job's part alone for htmx polling)."""
    access = _get_project_for_lead(request, slug)
    release = _release(access, number)
    job = rescore_job_of(release=release)
    context: dict[str, Any] = {
        "project": access.project,
        "release": release,
        "job": job,
        "unscored": runs_unscored(release=release),
    }
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "evaluation/release_detail.html#rescore", context)
    previous = Release.objects.filter(project=access.project, number__lt=number).last()
    context |= {
        "manifest": release.manifest,
        "manifest_json": json.dumps(release.manifest, indent=2, sort_keys=True),
        "previous": previous,
        "diff": release_diff(old=previous, new=release) if previous else None,
        "kinds": KINDS,
    }
    return render(request, "evaluation/release_detail.html", context)


@login_required
@require_POST
def release_rescore_view(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """Score the runs the release has not scored yet (runs imported after it)."""
    access = _get_project_for_lead(request, slug)
    release = _release(access, number)
    with transaction.atomic():
        job = release_rescore_start(release=release, user=request.user)  # type: ignore[arg-type]
    try:
        job_enqueue(job)
    except QueueUnavailable:
        messages.error(request, "The task queue is unavailable: try again in a moment.")
    return redirect("release_detail", slug, number)


@login_required
def release_diff_view(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """What changed from release `?from=M` (default: the previous one) to this one."""
    access = _get_project_for_lead(request, slug)
    new = _release(access, number)
    start = request.GET.get("from") or str(number - 1)
    if not start.isdigit():
        return HttpResponseBadRequest("from: give a release number", content_type="text/plain")
    old = _release(access, int(start))
    context = {"project": access.project, "diff": release_diff(old=old, new=new)}
    return render(request, "evaluation/release_diff.html", context)


# --------------------------------------------------------------------------- downloads


def _qrels(release: Release) -> Iterator[str]:
    # The very lines the content hash was taken of.
    return iter(qrels_text(release_qrels(release=release)))


def _beir(release: Release) -> Iterator[str]:
    yield "query-id\tcorpus-id\tscore\n"
    for label in release_labels(release=release):
        yield f"{label.qid}\t{label.docid}\t{label.grade}\n"


def _jsonl(release: Release) -> Iterator[str]:
    for label in release_labels(release=release):
        version = label.judge_version
        row = {
            "qid": label.qid,
            "docid": label.docid,
            "grade": label.grade,
            "stratum": label.stratum,
            "source": label.source,
            "by": label.by,
            "judge_version": version.digest if version else None,
            "adjudicated": label.source == "adjudicated",
        }
        yield json.dumps(row, ensure_ascii=False) + "\n"


def _manifest(release: Release) -> Iterator[str]:
    yield json.dumps(release.manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_DOWNLOADS = {
    "qrels": (_qrels, "text/plain; charset=utf-8", "{slug}-release-{n}.qrels"),
    "beir": (_beir, "text/tab-separated-values; charset=utf-8", "{slug}-release-{n}-test.tsv"),
    "jsonl": (_jsonl, "application/x-ndjson; charset=utf-8", "{slug}-release-{n}.jsonl"),
    "manifest": (_manifest, "application/json", "{slug}-release-{n}-manifest.json"),
}


@login_required
def release_download(
    request: HttpRequest, slug: str, number: int, kind: str
) -> StreamingHttpResponse:
    """A release as TREC qrels, BEIR `qrels/test.tsv`, JSONL with provenance, or its
    manifest; streamed."""
    access = _get_project_for_lead(request, slug)
    release = _release(access, number)
    if kind not in _DOWNLOADS:
        raise Http404("no such download")
    lines, content_type, name = _DOWNLOADS[kind]
    response = StreamingHttpResponse(lines(release), content_type=content_type)
    filename = name.format(slug=access.project.slug, n=release.number)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --------------------------------------------------------------------------- the history


@login_required
def release_history_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Each run's value of a measure (`?metric=`, nDCG@10 by default) under each release,
    with the change from the release before."""
    access = _get_project_for_lead(request, slug)
    metric = request.GET.get("metric") or "ndcg@10"
    if metric not in STORED_MEASURES:
        metric = "ndcg@10"
    history = release_history(project=access.project, metric=metric)
    context = {"project": access.project, "history": history, "measures": STORED_MEASURES}
    return render(request, "evaluation/release_history.html", context)
