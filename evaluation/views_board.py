"""The scoreboard of a release, for leads: every run's stored scores, per stratum and
weighted, and a canary slice."""

from __future__ import annotations

import math

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from agreement.charts import KappaPlot, PlotInput, kappa_plot
from annotation.access import project_for_lead

from .board import (
    BOARD_MEASURES,
    CANARY_KINDS,
    HOLE_DEPTH,
    JUDGED,
    SORTABLE,
    BoardRow,
    board_read,
    canary_of,
    strata_read,
)
from .models import Release

STRATA_MEASURES = (*BOARD_MEASURES, "p@10", JUDGED)


@login_required
def scoreboard(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """`?sort=<column>&dir=asc|desc` orders the table; `?metric=<measure>` adds the
    per-stratum section, with a canary slice when `canary_kind` and `canary` are given."""
    access = project_for_lead(request, slug)
    release = get_object_or_404(Release, project=access.project, number=number)
    sort = request.GET.get("sort", "ndcg@10")
    sort = sort if sort in SORTABLE else "ndcg@10"
    descending = request.GET.get("dir", "asc" if sort == "run" else "desc") != "asc"
    board = board_read(release=release, sort=sort, descending=descending)
    charted = sort if sort in BOARD_MEASURES else "ndcg@10"
    context: dict[str, object] = {
        "project": access.project,
        "release": release,
        "board": board,
        "sort": sort,
        "descending": descending,
        "measures": BOARD_MEASURES,
        "judged": JUDGED,
        "hole_depth": HOLE_DEPTH,
        "charted": charted,
        "chart": _chart(board.rows, charted),
        "strata_measures": STRATA_MEASURES,
        "canary_kinds": CANARY_KINDS.items(),
        "form": request.GET,
    }
    status = 200
    metric = request.GET.get("metric", "")
    if metric in STRATA_MEASURES:
        try:
            canary = canary_of(request.GET.get("canary_kind", ""), request.GET.get("canary", ""))
        except ValueError as error:
            context["canary_error"] = str(error)
            status = 400
        else:
            strata = strata_read(release=release, metric=metric, canary=canary)
            order = {row.name: k for k, row in enumerate(board.rows)}  # the table's order
            strata.rows.sort(key=lambda row: order.get(row.name, len(order)))
            context["strata"] = strata
    return render(request, "evaluation/board_scoreboard.html", context, status=status)


def _chart(rows: list[BoardRow], measure: str) -> KappaPlot | None:
    """The runs' means of `measure` with their intervals, on the agreement page's axis
    (0 to 1, the measures' range), in the table's order."""
    points = []
    for row in rows:
        mean = row.mean(measure)
        points.append(
            PlotInput(
                group="",
                label=row.name,
                kappa=math.nan if mean is None else float(mean),
                ci=row.interval(measure),
                n=int(row.queries.get("scored", 0)),
            )
        )
    return kappa_plot(points, threshold=0.0) if points else None
