"""Comparisons against a release, and the project's must-never-break list.

Two runs archived in the project are compared from their stored per-query values
(RunEvaluation, written when a release is re-scored): nothing is scored at request time. A run
file sent by a CI job is scored against the release's qrels under the contract the stored
values were computed with. The statistics are evaluation.gate's and evaluation.stats', as for
`compare` on files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import Project
from formats.text import lines
from formats.trec import FormatError, RunRow, read_run
from pooling.models import Run
from pooling.services import runs_ranked

from .comparison import Side
from .gate import SECONDARY, GateReport, gate_report, must_never_break, read_must_never_break
from .measures import Contract, evaluate
from .models import MustNeverBreak, Release, RunEvaluation
from .services_release import release_qrels

RELEASE_TAG = re.compile(r"(?P<slug>[-a-zA-Z0-9_]+)@(?P<number>[0-9]+)")


class CompareError(ValueError):
    """A comparison that cannot be made; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------
# Releases
# ---------------------------------------------------------------------------------------------


def release_from_tag(tag: str) -> Release:
    """`SLUG@N`: release N of project SLUG. Raises CompareError naming what is missing."""
    match = RELEASE_TAG.fullmatch(tag.strip())
    if not match:
        raise CompareError(f"--release {tag!r}: expected SLUG@N, as in acme@2")
    slug, number = match["slug"], int(match["number"])
    release = Release.objects.filter(project__slug=slug, number=number).first()
    if release is None:
        if not Project.objects.filter(slug=slug).exists():
            raise CompareError(f"--release {tag}: no project {slug!r}")
        raise CompareError(f"--release {tag}: project {slug!r} has no release {number}")
    return release


def release_qrels_map(*, release: Release) -> dict[str, dict[str, int]]:
    """The release's labels as qrels (qid -> docid -> grade), as its qrels download has them."""
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, grade in release_qrels(release=release):
        qrels.setdefault(qid, {})[docid] = grade
    return qrels


# ---------------------------------------------------------------------------------------------
# The must-never-break list
# ---------------------------------------------------------------------------------------------


def must_never_break_cases(*, project: Project) -> list[tuple[str, str]]:
    rows = project.must_never_break.order_by("qid", "docid")
    return [(qid, docid) for qid, docid in rows.values_list("qid", "docid")]


def _check_case(project: Project, qid: str, docid: str) -> None:
    if not qid or not docid or any(c.isspace() for c in qid + docid):
        raise CompareError("a case needs a query id and a document id, without spaces")
    if not project.queries.filter(qid=qid).exists():
        raise CompareError(f"query {qid!r} is not a query of project {project.slug!r}")


@transaction.atomic
def must_never_break_add(
    *, project: Project, qid: str, docid: str, note: str = "", user: User | None = None
) -> MustNeverBreak:
    """Add a case (the note of a case already listed is replaced)."""
    qid, docid = qid.strip(), docid.strip()
    _check_case(project, qid, docid)
    case, _ = MustNeverBreak.objects.update_or_create(
        project=project,
        qid=qid,
        docid=docid,
        defaults={"note": " ".join(note.split()), "added_by": user},
    )
    return case


@transaction.atomic
def must_never_break_remove(*, project: Project, case_id: int) -> int:
    deleted, _ = project.must_never_break.filter(pk=case_id).delete()
    return deleted


@transaction.atomic
def must_never_break_import(
    *, project: Project, path: str | Path, shown: str, user: User | None = None
) -> int:
    """Add every `qid docid  # note` line of a file (the `compare --must-never-break`
    format); all or nothing. Returns the number of cases added or updated."""
    try:
        cases = read_must_never_break(path)
    except FormatError as error:
        raise CompareError(str(FormatError(shown, error.line, error.reason))) from error
    notes = _notes(path)
    for qid, docid in cases:
        try:
            must_never_break_add(
                project=project, qid=qid, docid=docid, note=notes.get((qid, docid), ""), user=user
            )
        except CompareError as error:
            raise CompareError(f"{shown}: {error}; nothing was imported") from error
    return len(cases)


def _notes(path: str | Path) -> dict[tuple[str, str], str]:
    """The comment after a case on its line, kept as the case's note."""
    notes = {}
    for _, line in lines(path):
        text, _, comment = line.partition("#")
        parts = text.split()
        if len(parts) == 2 and comment.strip():
            notes[(parts[0], parts[1])] = comment.strip()
    return notes


def must_never_break_export(*, project: Project) -> str:
    """The list as a `compare --must-never-break` file, notes as comments."""
    lines = [f"# must-never-break cases of project {project.slug}: qid docid  # note"]
    for case in project.must_never_break.order_by("qid", "docid"):
        note = f"  # {case.note}" if case.note else ""
        lines.append(f"{case.qid} {case.docid}{note}")
    return "\n".join(lines) + "\n"


def ranked_for(*, run: Run, qids: set[str]) -> dict[str, list[RunRow]]:
    """The stored rankings of `qids` (trec_eval order, as stored), for the gate's check."""
    return runs_ranked(runs=[run], qids=sorted(qids))[run.pk]


# ---------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseComparison:
    release: Release
    report: GateReport
    baseline: Side
    candidate: Side
    contract: Contract

    @property
    def eval_set(self) -> str:
        return f"{self.release.project.slug} release {self.release.number}"


def stored_scores(*, release: Release, run: Run) -> RunEvaluation:
    evaluation = RunEvaluation.objects.filter(release=release, run=run).first()
    if evaluation is None:
        raise CompareError(
            f"run {run.name!r} has not been scored under release {release.number} yet "
            "(the release's re-scoring job writes the scores; try again when it is done)"
        )
    return evaluation


def contract_of(evaluation: RunEvaluation) -> Contract:
    terms = evaluation.contract
    return Contract(
        gain=terms.get("gain", "exponential"),
        rel_threshold=int(terms.get("rel_threshold", 1)),
        empty=terms.get("empty", "skip"),
    )


def stored_measures(evaluation: RunEvaluation) -> list[str]:
    first: dict[str, float] = next(iter(evaluation.per_query.values()), {})
    return list(first) or list(evaluation.means)


def _side(name: str, evaluation: RunEvaluation) -> Side:
    counts = evaluation.queries
    no_relevant = counts.get("no_relevant", counts.get("skipped_no_relevant", 0))
    return Side(name, evaluation.per_query, int(counts.get("missing_from_run", 0)), no_relevant)


def _check_metric(metric: str, evaluation: RunEvaluation) -> None:
    known = stored_measures(evaluation)
    if metric not in known:
        raise CompareError(
            f"{metric} is not among the measures stored for this release: {', '.join(known)}"
        )


def comparison_stored(
    *,
    release: Release,
    baseline: Run,
    candidate: Run,
    metric: str,
    bootstrap: int = 10_000,
    seed: int = 0,
) -> ReleaseComparison:
    """Two archived runs compared on their stored per-query values, the candidate held to the
    project's must-never-break list."""
    base_eval = stored_scores(release=release, run=baseline)
    cand_eval = stored_scores(release=release, run=candidate)
    _check_metric(metric, base_eval)
    cases = must_never_break_cases(project=release.project)
    ranked = ranked_for(run=candidate, qids={qid for qid, _ in cases})
    report = _report(
        base_eval.per_query, cand_eval.per_query, metric, bootstrap, seed, cases, ranked
    )
    return ReleaseComparison(
        release,
        report,
        _side(baseline.name, base_eval),
        _side(candidate.name, cand_eval),
        contract_of(base_eval),
    )


def comparison_of_file(
    *,
    release: Release,
    baseline: Run,
    path: str | Path,
    shown: str,
    metric: str,
    bootstrap: int = 10_000,
    seed: int = 0,
) -> ReleaseComparison:
    """A run file (a CI job's candidate) scored against the release under the stored contract
    and compared with an archived run's stored values. FormatError names `shown` and the line."""
    base_eval = stored_scores(release=release, run=baseline)
    _check_metric(metric, base_eval)
    try:
        run = read_run(path)
    except FormatError as error:
        raise FormatError(shown, error.line, error.reason) from None
    contract = contract_of(base_eval)
    qrels = release_qrels_map(release=release)
    scores = evaluate(qrels, run, [metric, *SECONDARY], contract)
    cases = must_never_break_cases(project=release.project)
    report = _report(base_eval.per_query, scores.per_query, metric, bootstrap, seed, cases, run)
    candidate = Side(shown, scores.per_query, scores.missing_from_run, scores.no_relevant)
    return ReleaseComparison(release, report, _side(baseline.name, base_eval), candidate, contract)


def _report(
    base: Mapping[str, Mapping[str, float]],
    cand: Mapping[str, Mapping[str, float]],
    metric: str,
    bootstrap: int,
    seed: int,
    cases: list[tuple[str, str]],
    ranked: Mapping[str, list[RunRow]],
) -> GateReport:
    try:
        return gate_report(
            base,
            cand,
            metric=metric,
            bootstrap=bootstrap,
            seed=seed,
            violations=must_never_break(cases, ranked),
        )
    except ValueError as error:
        raise CompareError(str(error)) from error
