"""Releases with stored scores for the scoreboard's tests and benchmark, before the release
service writes them: labels copied into a Release, each run scored by `evaluate` under the
product contract with 95 % bootstrap intervals, as the re-scoring job stores them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from annotation.models import Project
from evaluation.measures import Contract, evaluate
from evaluation.models import LabelSource, Release, ReleaseLabel, ReleasePolicy, RunEvaluation
from evaluation.rescore import STORED_MEASURES
from evaluation.stats import bootstrap_interval
from formats.trec import RunRow, format_qrels_line
from pooling.models import Run

Qrels = Mapping[str, Mapping[str, int]]


def ranked_of(run: Run) -> dict[str, list[RunRow]]:
    """The run's stored lines, per query, in the stored order."""
    ranked: dict[str, list[RunRow]] = {}
    lines = run.results.order_by("qid", "rank").values_list("qid", "docid", "rank", "score")
    for qid, docid, rank, score in lines:
        ranked.setdefault(qid, []).append(RunRow(qid, docid, rank, score, "stored"))
    return ranked


def release_stored(
    *,
    project: Project,
    qrels: Qrels,
    strata: Mapping[str, str] | None = None,
    number: int = 1,
    runs: Iterable[Run] | None = None,
    resamples: int = 10_000,
) -> Release:
    """Release `number` of `qrels` with every run (or `runs`) scored and stored."""
    strata = strata or {}
    release = Release.objects.create(
        project=project,
        number=number,
        policy=ReleasePolicy.HUMANS,
        content_hash=f"{number:064d}",
        pairs=sum(len(docs) for docs in qrels.values()),
    )
    ReleaseLabel.objects.bulk_create(
        ReleaseLabel(
            release=release,
            qid=qid,
            docid=docid,
            grade=grade,
            stratum=strata.get(qid, ""),
            source=LabelSource.SINGLE,
        )
        for qid, docs in qrels.items()
        for docid, grade in docs.items()
    )
    for run in runs if runs is not None else project.runs.all():
        evaluation_store(release=release, run=run, qrels=qrels, resamples=resamples)
    return release


def evaluation_store(
    *,
    release: Release,
    run: Run,
    qrels: Qrels,
    resamples: int,
    ranked: Mapping[str, Sequence[RunRow]] | None = None,
) -> RunEvaluation:
    """`run` scored under `qrels` and stored; `ranked` stands for its stored lines (the
    benchmark scores runs it does not store line by line)."""
    contract = Contract()
    scores = evaluate(
        qrels, ranked if ranked is not None else ranked_of(run), STORED_MEASURES, contract
    )
    intervals = {}
    for measure in STORED_MEASURES:
        values = [scores.per_query[q][measure] for q in scores.per_query]
        if values:
            ci = bootstrap_interval(values, resamples=resamples, seed=0)
            intervals[measure] = [ci.lo, ci.hi]
    return RunEvaluation.objects.create(
        release=release,
        run=run,
        contract=contract.as_dict(),
        means=scores.mean,
        intervals=intervals,
        per_query=scores.per_query,
        queries={
            "scored": scores.scored,
            "skipped_no_relevant": scores.skipped_no_relevant,
            "missing_from_run": scores.missing_from_run,
        },
    )


def write_qrels(path: Path, qrels: Qrels) -> Path:
    lines = (format_qrels_line(q, d, g) for q, docs in qrels.items() for d, g in docs.items())
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def write_run(path: Path, run: Run) -> Path:
    rows = (row for rows in ranked_of(run).values() for row in rows)
    path.write_text("".join(f"{r.qid} Q0 {r.docid} {r.rank} {r.score!r} {r.tag}\n" for r in rows))
    return path
