"""What the per-query inspector page reads: one query of one run under one release.

Only that query's rows are read: the run's results of the qid (the run_query_rank index),
the release's labels of the qid (the release_label_once index), the titles of the documents
the page shows. The numbers come from the pure core, :mod:`evaluation.inspect`.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models.functions import Left

from annotation.models import Document, Query
from pooling.models import Run

from .inspect import DEFAULT_CONTRACT, DEPTH, Inspection, inspect_query
from .models import Release, ReleaseLabel, RunEvaluation
from .services_release import run_ranking

__all__ = ["InspectorPage", "QueryChoice", "QueryNotInRelease", "inspection_of"]

SNIPPET = 160  # characters of a document's text shown when it has no title


class QueryNotInRelease(LookupError):
    """The release labels nothing for that qid (or labels nothing at all)."""


@dataclass(frozen=True)
class QueryChoice:
    qid: str
    ndcg: float | None  # the stored nDCG@10 of the run under the release, when scored


@dataclass(frozen=True)
class InspectorPage:
    qid: str
    query_text: str
    inspection: Inspection
    titles: dict[str, str]  # docid -> title (or the text's beginning), for the shown documents
    choices: list[QueryChoice]
    previous: str | None
    next: str | None
    stored: dict[str, float] | None  # the RunEvaluation's values for this query, if any


def inspection_of(*, release: Release, run: Run, qid: str | None) -> InspectorPage:
    """The inspector's page for ``qid`` (the release's first query when None) of ``run``.
    Raises QueryNotInRelease when the release has no label for it."""
    per_query, counts = _stored(release, run)
    choices = _choices(release, per_query, counts)
    qids = [c.qid for c in choices]
    qid = qid if qid is not None else (qids[0] if qids else "")
    if qid not in qids:
        raise QueryNotInRelease(qid)
    at = qids.index(qid)
    labels = dict(
        ReleaseLabel.objects.filter(release=release, qid=qid).values_list("docid", "grade")
    )
    ranking = [docid for docid, _ in run_ranking(run=run, qid=qid)]
    inspection = inspect_query(ranking, labels, DEFAULT_CONTRACT)
    return InspectorPage(
        qid=qid,
        query_text=_query_text(release, qid),
        inspection=inspection,
        titles=_titles(release, inspection),
        choices=choices,
        previous=qids[at - 1] if at > 0 else None,
        next=qids[at + 1] if at + 1 < len(qids) else None,
        stored=per_query.get(qid) if per_query is not None else None,
    )


PerQuery = dict[str, dict[str, float]]


def _stored(release: Release, run: Run) -> tuple[PerQuery | None, dict[str, int]]:
    """The run's stored scores under the release (None when it was not scored) and their
    query counts (scored, skipped_no_relevant, missing_from_run)."""
    rows = RunEvaluation.objects.filter(release=release, run=run)
    found = rows.values_list("per_query", "queries").first()
    return (found[0], found[1]) if found else (None, {})


def _choices(
    release: Release, per_query: PerQuery | None, counts: dict[str, int]
) -> list[QueryChoice]:
    """The release's queries in qrels order (sorted qids), each with its stored nDCG@10."""
    scores = per_query or {}
    return [
        QueryChoice(qid, scores[qid].get("ndcg@10") if qid in scores else None)
        for qid in _release_qids(release, per_query, counts)
    ]


def _release_qids(
    release: Release, per_query: PerQuery | None, counts: dict[str, int]
) -> list[str]:
    """Every query of the release, sorted. The stored scores hold every query of the
    release that counts, and when none was skipped (none without a relevant document, or
    the contract scores those 0) that is all of them: a read the page makes anyway, where
    the release's distinct qids cost a pass over all its labels (25 ms for 100,000)."""
    if per_query is not None and counts.get("skipped_no_relevant") == 0:
        return sorted(per_query)
    labels = ReleaseLabel.objects.filter(release=release)
    return sorted(set(labels.values_list("qid", flat=True).distinct()))


def _query_text(release: Release, qid: str) -> str:
    text = Query.objects.filter(project_id=release.project_id, qid=qid).values_list("text")
    found = text.first()
    return found[0] if found else ""


def _titles(release: Release, inspection: Inspection) -> dict[str, str]:
    """Titles of the documents the page names: the top 100, the judged ones below it, the
    ideal ranking's. A document without a title shows the beginning of its text."""
    wanted = {row.docid for row in inspection.rows[:DEPTH]}
    wanted |= {row.docid for row in inspection.rows[DEPTH:] if row.grade is not None}
    wanted |= {row.docid for row in inspection.ideal}
    rows = (
        Document.objects.filter(project_id=release.project_id, docid__in=wanted)
        .annotate(snippet=Left("text", SNIPPET))
        .values_list("docid", "title", "snippet")
    )
    return {docid: title or snippet for docid, title, snippet in rows}
