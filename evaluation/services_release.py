"""Qrels releases: numbered, immutable snapshots of the final labels under a stated policy,
their diff, and every archived run scored under each release.

A release's labels, by policy (each adds to the one before):

- ``humans``: the people's current grades (`agreement.labels`: one judge, or all agreeing;
  pairs whose judges disagree by the ``unresolved`` policy); adjudications are left out;
- ``adjudicated``: the final labels the project exports (`final_labels_of`: a lead's latest
  adjudication stands over the judges);
- ``llm``: and, for pairs no person labelled, the grade of the newest judge version whose
  gate passed (its `ok` answer, repeat 0), never on a query of the human-only slice.

The labels are copied with their provenance (who; which judge version), so a release reads
the same whatever is judged, adjudicated or deleted later. Its content hash is the sha256 of
its TREC qrels file, byte for byte what the download serves.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Max

from agreement.labels import Policy, policy_of
from annotation.models import Project, Query
from formats.trec import format_qrels_line
from jobs.errors import QueueUnavailable
from jobs.models import Job
from jobs.services import job_create, job_enqueue
from judging.pools import project_lock
from pooling.models import Run, RunResult

from . import measures
from .models import (
    LabelSource,
    Release,
    ReleaseLabel,
    ReleasePolicy,
    RunEvaluation,
)
from .release_labels import Humans, Label, counted, labels_of
from .release_manifest import manifest_of
from .rescore import (
    RESAMPLES,
    SEED,
    STORED_CONTRACT,
    STORED_MEASURES,
    ReleaseTable,
    Resamples,
    stored,
)

log = logging.getLogger(__name__)

RESCORE = "release_rescore"
RESCORE_HANDLER = "evaluation.tasks.release_rescore_job"
BATCH = 5_000  # labels per INSERT


class ReleaseError(ValueError):
    """A release that cannot be cut as asked; the message says why."""


def release_preview(*, project: Project, policy: str, unresolved: Policy) -> dict[str, Any]:
    """The counts a release cut now would have, per source and grade; nothing is written."""
    labels = labels_of(project=project, policy=policy, unresolved=unresolved)
    return {
        "pairs": len(labels),
        "sources": counted(x.source for x in labels),
        "grades": counted(str(x.grade) for x in labels),
    }


def qrels_text(lines: Iterable[tuple[str, str, int]]) -> Iterable[str]:
    """The TREC qrels file of the lines, line by line (what the download serves)."""
    for qid, docid, grade in lines:
        yield format_qrels_line(qid, docid, grade) + "\n"


def content_hash(lines: Iterable[tuple[str, str, int]]) -> str:
    digest = hashlib.sha256()
    for line in qrels_text(lines):
        digest.update(line.encode("utf-8"))
    return digest.hexdigest()


# --------------------------------------------------------------------------- cutting a release


@transaction.atomic
def release_create(
    *,
    project: Project,
    policy: ReleasePolicy | str,
    unresolved: str = "lower",
    note: str = "",
    user: User | None = None,
    start_rescore: bool = True,
) -> Release:
    """Cut the project's next release: its labels with their provenance, its manifest and
    content hash, all in one transaction. The number is taken under the project's lock, so
    two leads at once get two numbers. Then (after commit) the re-scoring job is published;
    with `start_rescore` False none is made (the command runs its own)."""
    if policy not in ReleasePolicy.values:
        choices = ", ".join(ReleasePolicy.values)
        raise ReleaseError(f"policy must be one of {choices}, not {policy!r}")
    try:
        rule = policy_of(unresolved)
    except ValueError as error:
        raise ReleaseError(str(error)) from error
    if "\x00" in note:
        raise ReleaseError("The note holds a NUL character, which cannot be stored.")
    project_lock(project)
    humans = Humans.read(project)
    labels = labels_of(project=project, policy=str(policy), unresolved=rule, humans=humans)
    if not labels:  # a release nothing can be scored against is a mistake, not a snapshot
        raise ReleaseError(
            f"Nothing to release: no pair has a label under the {ReleasePolicy(policy).label} "
            "policy yet. Judge some pairs (or import judgments) first."
        )
    last = Release.objects.filter(project=project).aggregate(last=Max("number"))["last"] or 0
    lines = [(x.qid, x.docid, x.grade) for x in labels]
    release = Release.objects.create(
        project=project,
        number=last + 1,
        policy=str(policy),
        unresolved=rule,
        note=note.strip(),
        content_hash=content_hash(lines),
        pairs=len(labels),
        created_by=user,
    )
    strata = dict(Query.objects.filter(project=project).values_list("qid", "stratum"))
    _store_labels(release, labels, strata)
    release.manifest = manifest_of(release=release, labels=labels, strata=strata, humans=humans)
    release.save(update_fields=["manifest"])
    if start_rescore:
        job = release_rescore_start(release=release, user=user)
        transaction.on_commit(lambda: _publish(job))
    return release


def _store_labels(release: Release, labels: Sequence[Label], strata: dict[str, str]) -> None:
    ReleaseLabel.objects.bulk_create(
        (
            ReleaseLabel(
                release=release,
                pair_id=x.pair_id,
                qid=x.qid,
                docid=x.docid,
                stratum=strata.get(x.qid, ""),
                grade=x.grade,
                source=x.source,
                by=list(x.by),
                judge_version_id=x.judge_version_id,
            )
            for x in labels
        ),
        batch_size=BATCH,
    )


def _publish(job: Job) -> None:
    # After commit: the release stands whatever the queue says; the lead re-scores from its page.
    try:
        job_enqueue(job)
    except QueueUnavailable:
        log.warning("release re-scoring job %s not published: the queue is unavailable", job.pk)


def release_rescore_start(*, release: Release, user: User | None = None) -> Job:
    """The queued re-scoring job of a release (scores the runs it has not scored yet); publish
    it with `jobs.services.job_enqueue` once committed, or run it with `job_run_inline`."""
    return job_create(
        project=release.project,
        kind=RESCORE,
        handler=RESCORE_HANDLER,
        params={"release_id": release.pk},
        user=user,
    )


def rescore_job_of(*, release: Release) -> Job | None:
    """The release's latest re-scoring job."""
    jobs = Job.objects.filter(project_id=release.project_id, kind=RESCORE)
    return jobs.filter(params__release_id=release.pk).order_by("-pk").first()


# --------------------------------------------------------------------------- reading a release


def release_of(*, project: Project, number: int) -> Release:
    """The project's release `number` (raises Release.DoesNotExist)."""
    releases = Release.objects.select_related("project", "created_by")
    return releases.get(project=project, number=number)


def release_labels(*, release: Release) -> list[ReleaseLabel]:
    """The release's labels in qrels order, with their judge versions."""
    rows = ReleaseLabel.objects.filter(release=release).select_related("judge_version")
    return sorted(rows, key=lambda x: (x.qid, x.docid))


def release_qrels(*, release: Release) -> list[tuple[str, str, int]]:
    """(qid, docid, grade) of every label of the release, in qrels order."""
    rows = ReleaseLabel.objects.filter(release=release).values_list("qid", "docid", "grade")
    return sorted(rows)


# --------------------------------------------------------------------------- the diff


@dataclass(frozen=True)
class Regraded:
    qid: str
    docid: str
    stratum: str
    old: int
    new: int
    why: str  # adjudication, new judgments, LLM label


@dataclass(frozen=True)
class StratumDiff:
    stratum: str
    added: int = 0
    removed: int = 0
    regraded: int = 0


@dataclass(frozen=True)
class ReleaseDiff:
    old: Release
    new: Release
    added: list[tuple[str, str, int]]  # (qid, docid, grade)
    removed: list[tuple[str, str, int]]
    regraded: list[Regraded]
    strata: list[StratumDiff]

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.removed or self.regraded)


_Key = tuple[str, str]


def _keyed(release: Release) -> dict[_Key, tuple[int, str, tuple[str, ...], int | None, str]]:
    rows = ReleaseLabel.objects.filter(release=release).values_list(
        "qid", "docid", "grade", "source", "by", "judge_version_id", "stratum"
    )
    return {(q, d): (g, s, tuple(b or ()), v, st) for q, d, g, s, b, v, st in rows}


def why_regraded(old_source: str, new_source: str) -> str:
    """Why a pair's grade moved between two releases, from the new label's provenance: a
    lead's (new) adjudication, a judge version's label, or else the people's grades changed
    (new or changed judgments, or an adjudication no longer counted)."""
    if new_source == LabelSource.ADJUDICATED:
        return "adjudication"
    if new_source == LabelSource.LLM:
        return "LLM label"
    if old_source == LabelSource.LLM:
        return "new judgments (people now label the pair)"
    return "new judgments"


def release_diff(*, old: Release, new: Release) -> ReleaseDiff:
    """What changed from `old` to `new`: pairs added, removed and regraded (with why), and
    the counts per stratum."""
    before, after = _keyed(old), _keyed(new)
    added = sorted((q, d, after[(q, d)][0]) for q, d in after.keys() - before.keys())
    removed = sorted((q, d, before[(q, d)][0]) for q, d in before.keys() - after.keys())
    regraded = []
    for key in sorted(before.keys() & after.keys()):
        (g0, s0, _, _, _), (g1, s1, _, _, stratum) = before[key], after[key]
        if g0 != g1:
            regraded.append(Regraded(*key, stratum, g0, g1, why_regraded(s0, s1)))
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for q, d, _ in added:
        counts[after[(q, d)][4]]["added"] += 1
    for q, d, _ in removed:
        counts[before[(q, d)][4]]["removed"] += 1
    for x in regraded:
        counts[x.stratum]["regraded"] += 1
    strata = [StratumDiff(name, **dict(c)) for name, c in sorted(counts.items())]
    return ReleaseDiff(old, new, added, removed, regraded, strata)


# --------------------------------------------------------------------------- re-scoring

Progress = Callable[[float, str], None]

# A run's judged rows, as (label id, rank). On PostgreSQL, integers only, aggregated into two
# arrays (a row per judged line costs the driver more than the scoring), and one probe of the
# unique index (run, qid, docid) per label: the planner would otherwise hash the run's every
# line (OFFSET 0 keeps the lateral probe a probe). Without JIT, which costs more to compile
# than this query runs.
_JUDGED_PG = (
    "SELECT array_agg(l.id), array_agg(r.rank) FROM evaluation_releaselabel l"
    " CROSS JOIN LATERAL (SELECT x.rank FROM pooling_runresult x WHERE x.run_id = %s"
    " AND x.qid = l.qid AND x.docid = l.docid OFFSET 0) r"
    " WHERE l.release_id = %s"
)
_JUDGED = (
    "SELECT l.id, r.rank FROM evaluation_releaselabel l"
    " JOIN pooling_runresult r ON r.run_id = %s AND r.qid = l.qid AND r.docid = l.docid"
    " WHERE l.release_id = %s"
)
# A run's documents per query is its last rank (ranks are 1..n): one step down the index
# (run, qid, rank) per query of the release, not a count of the run's lines.
_RETRIEVED = (
    "SELECT q.qid, (SELECT max(r.rank) FROM pooling_runresult r WHERE r.run_id = %s"
    " AND r.qid = q.qid) FROM (SELECT DISTINCT qid FROM evaluation_releaselabel"
    " WHERE release_id = %s) q"
)
READERS = 2  # connections reading runs at once (PostgreSQL, outside a transaction)

_Read = tuple[list[int], list[int], list[tuple[str, int]]]


def _read_run(run_id: int, release_id: int) -> _Read:
    """A run's judged rows (label ids, ranks) and its documents per query of the release."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(_JUDGED_PG, [run_id, release_id])
            ids, ranks = cursor.fetchone() or (None, None)
        else:
            cursor.execute(_JUDGED, [run_id, release_id])
            rows = cursor.fetchall()
            ids, ranks = [i for i, _ in rows], [r for _, r in rows]
        cursor.execute(_RETRIEVED, [run_id, release_id])
        retrieved = [(qid, n) for qid, n in cursor.fetchall() if n]
    return ids or [], ranks or [], retrieved


def _read_in_thread(run_id: int, release_id: int) -> _Read:
    try:
        return _read_run(run_id, release_id)
    finally:
        connection.close()  # this thread's own connection


def _reads(runs: Sequence[Run], release_id: int) -> Iterator[_Read]:
    """Each run's rows, in order. On PostgreSQL, READERS connections read ahead at once (the
    database does the work, on as many cores); inside a transaction (a test, a request) the
    other connections could not see its rows, so the runs are read here, one by one."""
    if connection.vendor != "postgresql" or connection.in_atomic_block or len(runs) < 2:
        yield from (_read_run(run.pk, release_id) for run in runs)
        return
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        yield from pool.map(_read_in_thread, [run.pk for run in runs], repeat(release_id))


def release_rescore(
    *,
    release: Release,
    runs: Sequence[Run] | None = None,
    progress: Progress | None = None,
) -> int:
    """Score runs under the release with the stored contract and store them (one row per
    release and run: a run scored again replaces its row). By default, the project's runs
    the release has not scored yet, so a retried job resumes. Returns the rows written."""
    if runs is None:
        done = RunEvaluation.objects.filter(release=release).values("run_id")
        runs = list(Run.objects.filter(project_id=release.project_id).exclude(pk__in=done))
    report = progress or (lambda fraction, message: None)
    rows = ReleaseLabel.objects.filter(release=release).values_list("id", "qid", "docid", "grade")
    labels = ReleaseTable.build(list(rows))
    scorer = measures.RankedScorer(labels.table, STORED_MEASURES, STORED_CONTRACT)
    resamples: Resamples | None = None
    written = 0
    ordered = sorted(runs, key=lambda r: r.name)
    for i, (run, read) in enumerate(zip(ordered, _reads(ordered, release.pk), strict=True)):
        report(i / max(len(runs), 1), f"scoring run {run.name} ({i + 1} of {len(runs)})")
        ranked = labels.ranked(*read)
        result = scorer.score(ranked)
        if resamples is None or resamples.counts.shape[1] != result.scored:
            resamples = Resamples.draw(result.scored, resamples=RESAMPLES, seed=SEED)
        _store_scores(release, run, stored(result, resamples))
        written += 1
    report(1.0, f"{written} run{'s' if written != 1 else ''} scored")
    return written


def _store_scores(release: Release, run: Run, kept: Any) -> None:
    fields = {
        "contract": STORED_CONTRACT.as_dict(),
        "means": kept.means,
        "intervals": kept.intervals,
        "per_query": kept.per_query,
        "queries": kept.queries,
    }
    RunEvaluation.objects.bulk_create(
        [RunEvaluation(release=release, run=run, **fields)],
        update_conflicts=True,
        unique_fields=["release", "run"],
        update_fields=list(fields),
    )


def run_scores(*, release: Release) -> list[RunEvaluation]:
    """Every run scored under the release, by run name."""
    rows = RunEvaluation.objects.filter(release=release).select_related("run")
    return sorted(rows, key=lambda e: e.run.name)


def run_ranking(*, run: Run, qid: str) -> list[tuple[str, float]]:
    """(docid, score) of the run's documents for the query, in trec_eval order."""
    rows = RunResult.objects.filter(run=run, qid=qid).order_by("rank")
    return list(rows.values_list("docid", "score"))


def runs_unscored(*, release: Release) -> int:
    """How many of the project's runs the release has not scored (added after it)."""
    done = RunEvaluation.objects.filter(release=release).values("run_id")
    return Run.objects.filter(project_id=release.project_id).exclude(pk__in=done).count()
