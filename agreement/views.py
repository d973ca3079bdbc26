"""The lead's agreement page and its thresholds form. Annotators get 403, outsiders 404: what
other people graded never reaches an annotator."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_lead
from judging.services_claims import policy_of

from .charts import PlotInput, heatmap, kappa_plot
from .dashboard import (
    BREAKDOWN_RESAMPLES,
    Dashboard,
    Row,
    agreement_dashboard,
    parse_filters,
    settings_of,
    trap_words,
)
from .services import SettingsError, agreement_settings_set


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


class SettingsForm(forms.Form):
    min_kappa = forms.FloatField(
        error_messages={
            "required": "Enter the minimum kappa, a number between -1 and 1 such as 0.4.",
            "invalid": "Enter the minimum kappa as a number between -1 and 1, such as 0.4.",
        }
    )
    min_gold_percent = forms.FloatField(
        error_messages={
            "required": "Enter the minimum gold accuracy as a percentage, such as 70.",
            "invalid": "Enter the minimum gold accuracy as a percentage between 0 and 100.",
        }
    )


@login_required
def agreement_page(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    project = access.project
    settings = settings_of(project)
    context: dict[str, Any] = {
        "project": project,
        "policy": policy_of(project),
        "settings_values": {
            "min_kappa": f"{settings.min_kappa:g}",
            "min_gold_percent": f"{settings.min_gold_accuracy * 100:g}",
        },
    }
    try:
        filters = parse_filters(request.GET)
        dashboard = agreement_dashboard(project=project, filters=filters)
    except ValueError as error:
        context["error"] = str(error)
        return render(request, "agreement/dashboard.html", context, status=400)
    context.update(_context(dashboard))
    return render(request, "agreement/dashboard.html", context)


def _context(dashboard: Dashboard) -> dict[str, Any]:
    report = dashboard.report
    return {
        "dashboard": dashboard,
        "filters": dashboard.filters,
        "report": report,
        "as_dict": report.as_dict() if report else None,
        "heat": heatmap(report.confusion, report.labels) if report else None,
        "plot": _plot(dashboard),
        "matrix": _matrix(dashboard.pairs),
        "people": [
            (row, heatmap(row.person.confusion, (0, 1, 2, 3), cell=16)) for row in dashboard.people
        ],
        "trap": trap_words(report) if report else None,
        "prevalence": list(zip(report.labels, report.prevalence()["both"], strict=True))
        if report
        else [],
        "breakdown_resamples": BREAKDOWN_RESAMPLES,
        "filters_query": urlencode(dashboard.filters.as_params()),
        "a_name": dashboard.filters.a or "A",
        "b_name": dashboard.filters.b or "B",
    }


def _plot(dashboard: Dashboard) -> Any:
    groups: list[tuple[str, Row]] = []
    if dashboard.overall is not None:
        groups.append(("overall", dashboard.overall))
    groups += [("stratum", row) for row in dashboard.strata]
    groups += [("protocol", row) for row in dashboard.protocols]
    groups += [("week", row) for row in dashboard.weeks]
    if not groups:
        return None
    rows = [
        PlotInput(group, row.label or "(no stratum)", row.kappa, row.ci, row.n)
        for group, row in groups
    ]
    return kappa_plot(rows, dashboard.min_kappa)


def _matrix(pairs: tuple[Row, ...]) -> dict[str, Any]:
    """The people matrix as table rows: each cell the Row of the two people (row person's
    grade as A), None on the diagonal and where two people share no pair."""
    cells: dict[tuple[str, str], Row] = {}
    for row in pairs:
        a, b = row.label.split("|", 1)
        cells[(a, b)] = row
        cells[(b, a)] = row
    names = sorted({name for pair in cells for name in pair})
    table = []
    for a in names:
        row_cells = []
        for b in names:
            cell = cells.get((a, b))
            query = urlencode({**cell.params, "a": a, "b": b}) if cell else ""
            row_cells.append((b, cell, query))
        table.append((a, row_cells))
    return {"names": names, "rows": table}


@login_required
@require_POST
def settings_save(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    form = SettingsForm(request.POST)
    if form.is_valid():
        try:
            agreement_settings_set(
                project=access.project,
                min_kappa=form.cleaned_data["min_kappa"],
                min_gold_accuracy=form.cleaned_data["min_gold_percent"] / 100,
            )
            messages.info(request, "Agreement thresholds saved.")
        except SettingsError as error:
            messages.error(request, f"Not saved: {error}.")
    else:
        for problems in form.errors.values():
            for problem in problems:
                messages.error(request, f"Not saved: {problem}")
    return redirect(reverse("agreement_dashboard", args=[slug]) + "#thresholds")
