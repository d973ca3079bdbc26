"""The per-query inspector (chapter 8 of the method, on the team's own data), for leads."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from annotation.access import project_for_lead
from pooling.models import Run

from .inspect import DEFAULT_CONTRACT, DEPTH, INSPECTED, IdealRow, K, RankRow
from .models import Release
from .services_inspect import InspectorPage, QueryNotInRelease, inspection_of

_FAILURE_LABELS = {
    "none": "neither",
    "ranking": "ranking failure",
    "retrieval": "retrieval failure",
    "no_relevant": "nothing relevant",
}


@dataclass(frozen=True)
class Shown:
    """A row of the page with its numbers as printed: formatted here, once, because Django's
    floatformat costs ~17 µs a call, and the page prints about 1,500 numbers."""

    row: RankRow | IdealRow
    title: str
    gain: str
    discount: str
    contribution: str
    cumulative: str

    @classmethod
    def of(cls, row: RankRow | IdealRow, titles: dict[str, str]) -> Shown:
        return cls(
            row,
            titles.get(row.docid, ""),
            f"{row.gain:.0f}",
            f"{row.discount:.4f}",
            f"{row.contribution:.4f}",
            f"{row.cumulative:.4f}",
        )


@login_required
def inspector(request: HttpRequest, slug: str, number: int, run_id: int) -> HttpResponse:
    """One query's ranking for a run under a release: every rank's grade, gain, discount and
    DCG contribution, the ideal ranking, the headroom, and a ranking to drag around."""
    access = project_for_lead(request, slug)
    release = get_object_or_404(Release, project=access.project, number=number)
    run = get_object_or_404(Run, pk=run_id, project=access.project)
    try:
        page = inspection_of(release=release, run=run, qid=request.GET.get("qid") or None)
    except QueryNotInRelease as missing:
        raise Http404(f"release {number} labels no query {missing}") from None
    context = {"project": access.project, "release": release, "run": run, "page": page}
    return render(request, "evaluation/inspect_query.html", context | _page_context(page))


def _page_context(page: InspectorPage) -> dict[str, object]:
    seen = page.inspection
    titles = page.titles
    values = {**seen.values, f"dcg@{K}": seen.dcg}
    headroom, diagnosis = seen.headroom, seen.diagnosis
    return {
        "k": K,
        "depth": DEPTH,
        "contract": DEFAULT_CONTRACT.as_dict(),
        # repr: the exact float, which the page's script and the tests compare with
        "measures": [{"name": n, "shown": f"{v:.4f}", "exact": repr(v)} for n, v in values.items()],
        "idcg_exact": repr(seen.idcg),
        "ndcg": seen.values[f"ndcg@{K}"],
        "recall": seen.values[f"recall@{DEPTH}"],
        "failure_label": _FAILURE_LABELS[diagnosis.failure],
        "headroom_gain": f"{headroom.gain:+.4f}",
        "window_gain": f"{headroom.window_ndcg - headroom.ndcg_now:+.4f}",
        "options": _options(page),
        "top": [Shown.of(row, titles) for row in seen.rows[:DEPTH]],
        "below": [Shown.of(row, titles) for row in seen.rows[DEPTH:] if row.grade is not None],
        "ideal": [Shown.of(row, titles) for row in seen.ideal],
        "stored_agrees": _stored_agrees(page),
        "script_data": _script_data(page),
    }


def _stored_agrees(page: InspectorPage) -> bool | None:
    """Do the run's stored scores for this query (the release's re-scoring) equal the page's?
    None when the run was not scored under the release or the query was skipped."""
    if not page.stored:
        return None
    values = page.inspection.values
    shared = [name for name in INSPECTED if name in page.stored]
    return all(abs(page.stored[name] - values[name]) <= 1e-9 for name in shared)


def _options(page: InspectorPage) -> SafeString:
    """The picker's options, one per query of the release, each escaped. Built here rather
    than in a template loop, which costs ~15 µs an option: 15 ms for 1,000 queries."""
    return format_html_join(
        "",
        '<option value="{}"{}>{}</option>',
        (
            (c.qid, " selected" if c.qid == page.qid else "", _label(c.qid, c.ndcg))
            for c in page.choices
        ),
    )


def _label(qid: str, ndcg: float | None) -> str:
    return qid if ndcg is None else f"{qid} · nDCG@10 {ndcg:.3f}"


def _script_data(page: InspectorPage) -> dict[str, object]:
    """What the page's script needs to recompute the numbers of a reordered top 100: the
    contract, every judged grade of the query, and the judged ranks below the top 100
    (which no move within it changes)."""
    seen = page.inspection
    return {
        "gain": DEFAULT_CONTRACT.gain,
        "threshold": DEFAULT_CONTRACT.rel_threshold,
        "k": K,
        "depth": DEPTH,
        "judged": list(seen.judged),
        "retrieved": len(seen.rows),
        "below": [[row.rank, row.grade] for row in seen.rows[DEPTH:] if row.grade is not None],
        "values": {**seen.values, f"dcg@{K}": seen.dcg},
        "measures": [*INSPECTED, f"dcg@{K}"],
    }
