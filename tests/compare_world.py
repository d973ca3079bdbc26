"""A project with a release and three runs scored under it, for the comparison's tests.

The release's labels and the runs' stored scores are written here directly (real scores:
evaluation.measures under the product's contract), and the same labels and runs are written
as files, so a test can check the pages and the API against `compare` on the files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from annotation.models import Project
from evaluation.measures import Contract, evaluate
from evaluation.models import Release, ReleaseLabel, RunEvaluation
from evaluation.rescore import STORED_MEASURES
from formats.trec import RunRow, format_qrels_line, write_run
from pooling.models import Run
from pooling.services import run_create

QUERIES = 40
MISSING_FROM_CANDIDATE = 5  # the candidate run lacks the last five queries


@dataclass
class Compared:
    release: Release
    runs: dict[str, Run]
    qrels_path: Path
    run_paths: dict[str, Path]


def _qrels(rng: random.Random) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for i in range(QUERIES):
        grades = {f"d{j}": rng.choice([0, 0, 0, 1, 2, 3]) for j in range(12)}
        grades["d0"] = 3  # every query has a relevant document
        qrels[f"q{i:02d}"] = grades
    return qrels


def _ranked(rng: random.Random, name: str, qids: list[str]) -> dict[str, list[RunRow]]:
    ranked = {}
    for qid in qids:
        docs = [f"d{j}" for j in range(15)]
        rng.shuffle(docs)
        ranked[qid] = [RunRow(qid, d, r, 100.0 - r, name) for r, d in enumerate(docs, start=1)]
    return ranked


def release_store(
    *, project: Project, qrels: dict[str, dict[str, int]], number: int = 1
) -> Release:
    """A release holding `qrels` (what release_create would write, without the pairs)."""
    labels = sum(len(docs) for docs in qrels.values())
    release = Release.objects.create(
        project=project, number=number, policy="humans", content_hash="0" * 64, pairs=labels
    )
    ReleaseLabel.objects.bulk_create(
        ReleaseLabel(release=release, qid=q, docid=d, grade=g, source="single")
        for q, docs in qrels.items()
        for d, g in docs.items()
    )
    return release


def scores_store(
    *, release: Release, run: Run, qrels: dict[str, dict[str, int]], ranked: dict[str, list[RunRow]]
) -> RunEvaluation:
    """The run's scores under the release, as the re-scoring job stores them."""
    scores = evaluate(qrels, ranked, STORED_MEASURES, Contract())
    return RunEvaluation.objects.create(
        release=release,
        run=run,
        contract=Contract().as_dict(),
        means=scores.mean,
        per_query=scores.per_query,
        queries={
            "scored": scores.scored,
            "skipped_no_relevant": scores.skipped_no_relevant,
            "missing_from_run": scores.missing_from_run,
        },
    )


def compared_world(project: Project, tmp_path: Path, *, seed: int = 3) -> Compared:
    """Queries q00..q39 in the project, release 1, and runs `base`, `cand` (which lacks the
    last five queries and ranks d0 first more often) and `same` (a copy of `base`)."""
    rng = random.Random(seed)
    qrels = _qrels(rng)
    qids = sorted(qrels)
    for qid in qids:
        project.queries.get_or_create(qid=qid, defaults={"text": f"question {qid}"})
    release = release_store(project=project, qrels=qrels)
    ranked = {
        "base": _ranked(rng, "base", qids),
        "cand": _ranked(rng, "cand", qids[:-MISSING_FROM_CANDIDATE]),
    }
    for qid, listed in ranked["cand"].items():  # a better system: d0 first on two in three
        if rng.random() < 0.66:
            rest = [r for r in listed if r.docid != "d0"]
            listed[:] = [RunRow(qid, "d0", 1, 200.0, "cand"), *rest]
    ranked["same"] = ranked["base"]
    runs, paths = {}, {}
    for name, run in ranked.items():
        runs[name] = run_create(project=project, name=f"r-{name}", ranked=run)
        scores_store(release=release, run=runs[name], qrels=qrels, ranked=run)
        paths[name] = tmp_path / f"r-{name}.run"
        with open(paths[name], "w") as out:
            write_run((row for q in run for row in run[q]), out)
    qrels_path = tmp_path / "release.qrels"
    qrels_path.write_text(
        "".join(format_qrels_line(q, d, g) + "\n" for q in qids for d, g in qrels[q].items())
    )
    return Compared(release, runs, qrels_path, paths)
