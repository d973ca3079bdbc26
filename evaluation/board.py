"""The scoreboard of a release: what the page shows, read from the stored evaluations.

Nothing is scored here: every number comes from the RunEvaluation rows the re-scoring job
wrote. The table reads only the means, intervals and counts; the per-query values (a few
hundred kilobytes of JSON per run) are read only for the per-stratum section, when it is
asked for, and then only the one measure it shows, which the database takes out of the JSON.
The sums are the pure core's (`evaluation/slices.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.db.models.fields.json import KeyTransform

from annotation.models import Document, Query
from pooling.models import Run

from .models import Release, ReleaseLabel, RunEvaluation
from .slices import (
    Condition,
    SliceMean,
    WeightedMean,
    parse_condition,
    slice_mean,
    stratum_means,
    stratum_order,
    weighted_mean,
)

# The table's columns, in the order; judged@10 has its own column and warning.
BOARD_MEASURES = ("ndcg@10", "recall@100", "mrr", "map", "hit@5", "hit@10")
JUDGED = "judged@10"
HOLE_DEPTH = 10  # judged@10's window: a depth-10 pool of the run adds exactly its holes
SORTABLE = ("run", *BOARD_MEASURES, JUDGED)
CANARY_KINDS = {
    "stratum": "query stratum is",
    "qids": "query ids (comma or space separated)",
    "text": "query text contains",
    "metadata": "a relevant document's metadata: key op value",
}


@dataclass(frozen=True)
class BoardRow:
    """One run's stored scores. A mean is None (or absent) for a measure no query defines,
    an interval bound None likewise."""

    run_id: int
    name: str
    means: Mapping[str, float | None]
    intervals: Mapping[str, list[float | None]]
    queries: Mapping[str, int]

    def mean(self, measure: str) -> float | None:
        return self.means.get(measure)

    def interval(self, measure: str) -> tuple[float, float] | None:
        pair = self.intervals.get(measure) or []
        if len(pair) != 2 or pair[0] is None or pair[1] is None:
            return None
        return (float(pair[0]), float(pair[1]))

    @property
    def judged(self) -> float | None:
        return self.mean(JUDGED)

    @property
    def has_holes(self) -> bool:
        """Some query's top 10 holds a pair nobody judged (pooling bias)."""
        return self.judged is not None and self.judged < 1.0

    @property
    def cells(self) -> list[tuple[str, float | None, tuple[float, float] | None]]:
        return [(m, self.mean(m), self.interval(m)) for m in BOARD_MEASURES]


@dataclass(frozen=True)
class Board:
    rows: list[BoardRow]
    contracts: list[dict[str, Any]]  # distinct contracts of the rows (one, normally)


def board_read(*, release: Release, sort: str = "ndcg@10", descending: bool = True) -> Board:
    """Every run scored under the release, sorted by a column (the run name or a measure;
    runs without the measure last)."""
    stored = (
        RunEvaluation.objects.filter(release=release)
        .select_related("run")
        .only("run__name", "contract", "means", "intervals", "queries")
    )
    rows, contracts = [], []
    for evaluation in stored:
        rows.append(
            BoardRow(
                run_id=evaluation.run_id,
                name=evaluation.run.name,
                means=evaluation.means,
                intervals=evaluation.intervals,
                queries=evaluation.queries,
            )
        )
        if evaluation.contract not in contracts:
            contracts.append(evaluation.contract)
    return Board(rows=sort_rows(rows, sort, descending), contracts=contracts)


def sort_rows(rows: list[BoardRow], sort: str, descending: bool) -> list[BoardRow]:
    if sort == "run":
        return sorted(rows, key=lambda r: r.name, reverse=descending)
    present = [r for r in rows if r.mean(sort) is not None]
    ordered = sorted(present, key=lambda r: (r.mean(sort), r.name), reverse=descending)
    return ordered + sorted((r for r in rows if r.mean(sort) is None), key=lambda r: r.name)


# --------------------------------------------------------------------------- strata and slices


@dataclass(frozen=True)
class Canary:
    """A slice of the release's queries picked by an attribute (see CANARY_KINDS)."""

    kind: str
    value: str
    condition: Condition | None = None

    def __str__(self) -> str:
        if self.kind == "stratum":
            return f"the queries of stratum {self.value!r}"
        if self.kind == "qids":
            return f"the queries {', '.join(self.value.replace(',', ' ').split())}"
        if self.kind == "text":
            return f"the queries whose text contains {self.value!r}"
        return f"the queries with a relevant document whose metadata has {self.condition}"


def canary_of(kind: str, value: str) -> Canary | None:
    """The slice the form asks for (None when it asks for none); ValueError when wrong."""
    value = value.strip()
    if not kind or not value:
        return None
    if kind not in CANARY_KINDS:
        raise ValueError(f"unknown slice kind {kind!r}; one of {', '.join(CANARY_KINDS)}")
    condition = parse_condition(value) if kind == "metadata" else None
    return Canary(kind, value, condition)


@dataclass(frozen=True)
class StrataRow:
    name: str
    overall: SliceMean
    strata: tuple[SliceMean | None, ...]  # in the board's order of strata
    weighted: WeightedMean  # per distinct query of the log: 1 / pi
    traffic: WeightedMean  # per search: frequency / pi
    canary: SliceMean | None
    human_only: SliceMean | None = None  # over the human-only slice, when the release has one


@dataclass(frozen=True)
class StrataBoard:
    metric: str
    strata: list[str]
    rows: list[StrataRow]
    canary: Canary | None = None
    canary_queries: int = 0  # queries of the release in the slice
    weighted_queries: int = 0  # queries of the release with an inclusion probability
    human_only_queries: int = 0  # queries of the human-only slice (no judge labels them)


def strata_read(*, release: Release, metric: str, canary: Canary | None = None) -> StrataBoard:
    """Each run's mean of `metric` per stratum, weighted to the log, and over the canary."""
    qids = _release_qids(release)
    strata = _strata(release, qids)
    pi, frequency = _inclusion_probabilities(release)
    picked = _canary_qids(release, qids, strata, canary) if canary else None
    # The slice no judge ever labels, as the release's manifest recorded it: a release with LLM
    # labels is read beside it, so that what the judge changed shows.
    human_only = set(release.manifest.get("human_only") or [])
    runs = _one_measure(release, metric)
    by_run = [stratum_means(values, strata) for _, values in runs]
    names = sorted({s for means in by_run for s in means}, key=stratum_order)
    rows = [
        StrataRow(
            name=name,
            overall=slice_mean(values, values.keys()),
            strata=tuple(means.get(s) for s in names),
            weighted=weighted_mean(values, pi),
            traffic=weighted_mean(values, pi, frequency),
            canary=slice_mean(values, picked) if picked is not None else None,
            human_only=slice_mean(values, human_only) if human_only else None,
        )
        for (name, values), means in zip(runs, by_run, strict=True)
    ]
    return StrataBoard(
        metric=metric,
        strata=names,
        rows=rows,
        canary=canary,
        canary_queries=len(picked) if picked is not None else 0,
        weighted_queries=len(pi),
        human_only_queries=len(human_only),
    )


# One measure of every query of every run under the release, taken out of the stored JSON by
# the database: the per-query values of 50 runs x 1,000 queries are ~12 MB of JSON text to
# send and decode, of which one measure is an eighth (the section renders 3x faster).
_ONE_MEASURE = """
SELECT r.name, q.key, {value}
FROM {evaluations} e JOIN {runs} r ON r.id = e.run_id CROSS JOIN {each}(e.per_query) q
WHERE e.release_id = %s
"""
_EACH = {"postgresql": "jsonb_each", "sqlite": "json_each"}
_VALUE = {"postgresql": "(q.value ->> %s)::float8", "sqlite": "q.value ->> %s"}


def _one_measure(release: Release, metric: str) -> list[tuple[str, dict[str, float]]]:
    """(run name, qid -> value) of every run scored under the release, by run name; the
    queries where the measure is undefined (null) are left out."""
    names = RunEvaluation.objects.filter(release=release).values_list("run__name", flat=True)
    values: dict[str, dict[str, float]] = {name: {} for name in sorted(names)}
    sql = _ONE_MEASURE.format(
        value=_VALUE[connection.vendor],
        each=_EACH[connection.vendor],
        evaluations=connection.ops.quote_name(RunEvaluation._meta.db_table),
        runs=connection.ops.quote_name(Run._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [metric, release.pk])
        for name, qid, value in cursor.fetchall():
            if value is not None:
                values[name][qid] = float(value)
    return list(values.items())


def _release_qids(release: Release) -> set[str]:
    return set(_labels(release).values_list("qid", flat=True))


def _labels(release: Release) -> QuerySet[ReleaseLabel]:
    return ReleaseLabel.objects.filter(release=release)


def _queries(release: Release) -> QuerySet[Query]:
    """The project's queries the release labels (a subquery: no list of ids sent over)."""
    in_release = _labels(release).values("qid")
    return Query.objects.filter(project_id=release.project_id, qid__in=in_release)


def _strata(release: Release, qids: set[str]) -> dict[str, str]:
    """qid -> stratum: the one copied into the release, else the query's as it is now."""
    copied = _labels(release).exclude(stratum="")
    strata = dict(copied.values_list("qid", "stratum").distinct())
    if qids - strata.keys():
        now = _queries(release).exclude(stratum="").exclude(qid__in=list(strata))
        strata.update(now.values_list("qid", "stratum"))
    return strata


def _inclusion_probabilities(release: Release) -> tuple[dict[str, float], dict[str, float]]:
    """qid -> inclusion probability, and qid -> frequency in the log, where known."""
    queries = _queries(release).filter(inclusion_probability__isnull=False)
    pi, frequency = {}, {}
    for qid, p, f in queries.values_list("qid", "inclusion_probability", "frequency"):
        if p is not None:
            pi[qid] = float(p)
        if f:
            frequency[qid] = float(f)
    return pi, frequency


def _canary_qids(
    release: Release, qids: set[str], strata: Mapping[str, str], canary: Canary
) -> set[str]:
    if canary.kind == "qids":
        return qids & set(canary.value.replace(",", " ").split())
    if canary.kind == "stratum":
        return {q for q, s in strata.items() if s == canary.value}
    if canary.kind == "text":
        matching = _queries(release).filter(text__icontains=canary.value)
        return set(matching.values_list("qid", flat=True))
    assert canary.condition is not None
    return _queries_with_matching_relevant(release, canary.condition)


def _queries_with_matching_relevant(release: Release, condition: Condition) -> set[str]:
    """Queries with at least one release-relevant document (grade at or above the stored
    contract's threshold) whose metadata matches the condition. The database finds the
    relevant documents holding the key and hands over that one value of each; the
    comparison is the pure core's."""
    contract = RunEvaluation.objects.filter(release=release).values_list("contract", flat=True)
    threshold = int((contract.first() or {}).get("rel_threshold", 1))
    relevant = _labels(release).filter(grade__gte=threshold)
    documents = Document.objects.filter(
        project_id=release.project_id,
        docid__in=relevant.values("docid"),
        metadata__has_key=condition.key,
    ).annotate(found=KeyTransform(condition.key, "metadata"))
    matching = {d for d, found in documents.values_list("docid", "found") if condition.holds(found)}
    return {q for q, d in relevant.values_list("qid", "docid") if d in matching}
