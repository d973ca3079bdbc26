"""The lead's Data page: what the project holds (documents, queries, runs), what to do next,
and the corpus and query uploads, imported in the background with a progress bar."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from annotation.access import Access, project_for_lead
from annotation.models import Project, Role
from jobs.errors import QueueUnavailable
from jobs.services import job_enqueue
from jobs.uploads import UploadError, too_big

from .services_data import KINDS, DataKind, data_jobs, data_upload_create


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@dataclass(frozen=True)
class Step:
    """One step of setting a project up, done or still to do, with where to do it."""

    label: str
    done: bool
    url: str
    hint: str


def next_steps(project: Project) -> list[Step]:
    slug = project.slug
    data, pool = reverse("project_data", args=[slug]), reverse("pool_detail", args=[slug])
    return [
        Step("Upload the corpus", project.documents.exists(), f"{data}#corpus",
             "the documents judges will read"),
        Step("Upload the queries", project.queries.exists(), f"{data}#queries",
             "or sample them from your search logs"),
        Step("Write and publish the protocol", project.protocols.exists(),
             reverse("protocol_edit", args=[slug]),
             "a starter draft holds the four grades: add your task, anchors and edge cases"),
        Step("Bring in runs", project.runs.exists(), pool,
             "upload your systems' runs on the pool page, or run the built-in baselines"),
        Step("Build a pool", project.pools.exists(), pool,
             "the top k of each run, judged once per pair"),
        Step("Add annotators",
             project.memberships.filter(role=Role.ANNOTATOR).exists(),
             reverse("judging_overview", args=[slug]) + "#members",
             "new accounts get a one-time sign-in link"),
    ]  # fmt: skip


def _context(access: Access) -> dict[str, object]:
    project = access.project
    jobs = data_jobs(project)
    return {
        "project": project,
        "counts": {
            "documents": project.documents.count(),
            "queries": project.queries.count(),
            "runs": project.runs.count(),
        },
        "steps": next_steps(project),
        "jobs": jobs,
        "polling": any(job.active for job in jobs),
        "limit": settings.IMPORT_UPLOAD_MAX_BYTES,
    }


@login_required
def data_page(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    if request.method == "POST":
        _upload(request, access)
        target = reverse("project_data", args=[slug])
        if request.htmx:  # type: ignore[attr-defined]
            # The page's script sent the file (to show the upload's own progress): have it
            # load the page, which shows the messages and the import's progress.
            return HttpResponse(headers={"HX-Redirect": target})
        return redirect(target)
    context = _context(access)
    if request.htmx:  # type: ignore[attr-defined]
        # Polled while an import runs; once none does, the counts and the steps have changed
        # too, so the browser loads the whole page again.
        if not context["polling"]:
            return HttpResponse(headers={"HX-Refresh": "true"})
        return render(request, "annotation/data.html#imports", context)
    return render(request, "annotation/data.html", context)


def _upload(request: HttpRequest, access: Access) -> None:
    """Queue the import of the uploaded file; what went wrong becomes a message."""
    field = next((name for name in KINDS if name in request.FILES), None)
    upload = request.FILES.get(field) if field else None
    # Checked on the announced length first, and on the file itself for a body sent without.
    refusal = _too_big(request.META.get("CONTENT_LENGTH"), field)
    if not refusal and upload is not None:
        refusal = _too_big(upload.size, field)
    if refusal:
        messages.error(request, refusal)
        return
    if field is None or upload is None:
        messages.error(request, "Choose a corpus or a query file to upload.")
        return
    kind: DataKind = KINDS[field]
    try:
        job = data_upload_create(
            project=access.project,
            kind=kind,
            upload=upload,
            user=request.user,  # type: ignore[arg-type]
        )
        job_enqueue(job)  # committed by now: views run in autocommit
    except (UploadError, QueueUnavailable) as error:
        messages.error(request, str(error))
        return
    messages.info(request, f"{job.params['name']}: importing the {kind.noun}.")


def _too_big(size: object, field: str | None) -> str:
    kind = KINDS.get(field or "")
    return too_big(
        size,
        settings.IMPORT_UPLOAD_MAX_BYTES,
        setting="IMPORT_UPLOAD_MAX_BYTES",
        command=kind.command if kind else "import_corpus or import_queries",
        what=kind.what if kind else "file",
    )
