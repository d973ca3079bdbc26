"""Qrels download, and the noise floor of the agreement page, for leads."""

from __future__ import annotations

import io

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

from agreement.dashboard import parse_filters
from agreement.labels import DEFAULT_POLICY, policy_of
from annotation.access import Access, project_for_lead

from .noise import noise_floor
from .services import ExportError, qrels_export


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
def qrels_download(request: HttpRequest, slug: str) -> HttpResponse:
    """The final labels as qrels; `?unresolved=exclude|lower|higher` says what to write for
    pairs whose judges disagree, `?annotator=name` gives that person's own grades instead."""
    access = _get_project_for_lead(request, slug)
    annotator = request.GET.get("annotator") or None
    try:
        unresolved = policy_of(request.GET.get("unresolved") or DEFAULT_POLICY)
    except ValueError as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain")
    buffer = io.StringIO()
    try:
        qrels_export(project=access.project, out=buffer, annotator=annotator, unresolved=unresolved)
    except ExportError as error:
        return HttpResponseBadRequest(f"annotator: {error}", content_type="text/plain")
    response = HttpResponse(buffer.getvalue(), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{access.project.slug}.qrels"'
    return response


@login_required
def agreement_noise(request: HttpRequest, slug: str) -> HttpResponse:
    """The agreement page's noise-floor section: how far judge disagreement moves the gaps
    between the project's runs. An htmx partial; opened on its own, a page around it."""
    access = _get_project_for_lead(request, slug)
    template = "evaluation/_noise.html" if request.htmx else "evaluation/noise_page.html"  # type: ignore[attr-defined]
    context: dict[str, object] = {"project": access.project}
    try:
        filters = parse_filters(request.GET)
        context["noise"] = noise_floor(project=access.project, filters=filters)
        context["a_name"] = f"{filters.a}'s" if filters.a else "the first judge's"
        context["b_name"] = f"{filters.b}'s" if filters.b else "the second judge's"
    except ValueError as error:
        context["error"] = str(error)
        return render(request, template, context, status=400)
    return render(request, template, context)
