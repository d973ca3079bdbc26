"""Calibrating an LLM judge version against the project's humans, and storing the verdict.

The subset is every pair two or more people graded (the double-judged pairs); when there is
none, the pairs one person graded, and the report then says the ceiling cannot be measured.
An endpoint judge is asked for the subset (repeat 0) and for a seeded sample of it again
(repeat 1, test-retest); an external judge is computed from the labels imported for it. The
figures are `evaluation.calibration`'s; a `Calibration` row keeps them with the thresholds
they were judged by, and the latest row of a version is its gate.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from agreement.labels import PairGrades, final_label
from agreement.services_adjudication import latest_adjudications
from annotation.models import Project
from jobs.models import Job
from jobs.services import job_create
from judging.answers import current_answers
from judging.models import (
    Calibration,
    HumanOnlyQuery,
    JudgeKind,
    JudgeSettings,
    JudgeVersion,
    LLMJudge,
    LLMJudgment,
    LLMStatus,
)
from judging.models import Kind as AnswerKind
from judging.services_llm import (
    JudgeError,
    judge_settings_of,
    judge_version_current,
    latest_calibration,
    llm_label_pairs,
)
from pooling.services import runs_ranked

from .calibration import MIN_RUNS, Observations, Thresholds, calibrate, observations
from .measures import Contract, evaluate

LLM_CALIBRATE = "llm_calibrate"
RANKING_MEASURE = "ndcg@10"
RANKING_DEPTH = 10  # nDCG@10 reads each run's top ten only
RESAMPLES = 10_000
SEED = 0

Progress = Callable[[float, str], None]


class CalibrationError(ValueError):
    """A calibration that cannot be made; the message says what is missing."""


# --------------------------------------------------------------------------- what is read


def _grades_by_pair(project: Project) -> dict[int, list[tuple[float, str, int, str, str]]]:
    """Each graded pair's current grades: (time, person, grade, qid, docid) in time order."""
    found: dict[int, list[tuple[float, str, int, str, str]]] = defaultdict(list)
    for answer in current_answers(project_id=project.pk):
        if answer.kind == AnswerKind.GRADE and answer.grade is not None:
            found[answer.pair_id].append(
                (answer.at, answer.username, answer.grade, answer.qid, answer.docid)
            )
    for grades in found.values():
        grades.sort(key=lambda g: g[0])  # stable: answers of one instant keep their order
    return found


def calibration_subset(*, project: Project) -> list[int]:
    """The pairs two or more people graded; when there is none, the pairs one person graded."""
    graded = _grades_by_pair(project)
    double = sorted(pair for pair, grades in graded.items() if len(grades) >= 2)
    return double or sorted(graded)


def thresholds_of(settings: JudgeSettings) -> Thresholds:
    names = Thresholds.__dataclass_fields__
    return Thresholds(**{name: getattr(settings, name) for name in names})


def judge_version_of(*, judge: LLMJudge) -> JudgeVersion:
    """The version calibration applies to: an external judge's labels imported last, an
    endpoint judge's current configuration."""
    try:
        return judge_version_current(judge=judge)
    except JudgeError as error:
        raise CalibrationError(str(error)) from error


def _llm_rows(version: JudgeVersion, repeat: int) -> dict[int, int | None]:
    """pair -> the version's grade (None when the row is not ok) for one repeat."""
    rows = LLMJudgment.objects.filter(version=version, repeat=repeat)
    return {
        pair: grade if status == LLMStatus.OK else None
        for pair, status, grade in rows.values_list("pair_id", "status", "grade").iterator()
    }


def _retest(version: JudgeVersion, first: dict[int, int | None]) -> list[tuple[int, int]] | None:
    if version.judge.kind == JudgeKind.EXTERNAL:
        return None
    second = _llm_rows(version, 1)
    return [
        (g0, g1)
        for pair, g1 in second.items()
        if g1 is not None and (g0 := first.get(pair)) is not None
    ]


def _run_scores(
    project: Project, human: dict[str, dict[str, int]], llm: dict[str, dict[str, int]]
) -> dict[str, tuple[float, float]] | None:
    """nDCG@10 (the default contract) of each project run under both sets of labels; None
    under `MIN_RUNS` runs."""
    project_runs = list(project.runs.all())
    if len(project_runs) < MIN_RUNS or not human:
        return None
    names = {run.pk: run.name for run in project_runs}
    runs = runs_ranked(runs=project_runs, depth=RANKING_DEPTH)
    contract = Contract()
    return {
        names[pk]: (
            evaluate(human, ranked, [RANKING_MEASURE], contract).mean.get(RANKING_MEASURE, 0.0),
            evaluate(llm, ranked, [RANKING_MEASURE], contract).mean.get(RANKING_MEASURE, 0.0),
        )
        for pk, ranked in sorted(runs.items(), key=lambda item: names[item[0]])
    }


def calibration_observations(*, version: JudgeVersion, pair_ids: list[int]) -> Observations:
    """Everything calibration reads of the database, as columns."""
    project = version.judge.project
    graded = _grades_by_pair(project)
    adjudicated = dict(latest_adjudications(project=project).values_list("pair_id", "grade"))
    first = _llm_rows(version, 0)
    slice_qids = set(
        HumanOnlyQuery.objects.filter(project=project).values_list("query__qid", flat=True)
    )
    pairs = [p for p in pair_ids if p in graded]
    humans: list[tuple[int, str, int]] = []
    qids: list[str] = []
    consensus: list[int | None] = []
    human_qrels: dict[str, dict[str, int]] = defaultdict(dict)
    llm_qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for i, pair in enumerate(pairs):
        grades = graded[pair]
        qid, docid = grades[0][3], grades[0][4]
        humans += [(i, name, grade) for _, name, grade, _, _ in grades]
        label = final_label(
            PairGrades(pair, qid, docid, tuple(g[2] for g in grades), adjudicated.get(pair))
        )
        qids.append(qid)
        consensus.append(None if label is None else label.grade)
        graded_by_llm = first.get(pair)
        if graded_by_llm is not None and label is not None and label.grade is not None:
            human_qrels[qid][docid] = label.grade
            llm_qrels[qid][docid] = graded_by_llm
    return observations(
        qids=qids,
        llm=[first.get(p) for p in pairs],
        has_llm=[p in first for p in pairs],
        consensus=consensus,
        humans=humans,
        human_only=[q in slice_qids for q in qids],
        retest=_retest(version, first),
        run_scores=_run_scores(project, dict(human_qrels), dict(llm_qrels)),
    )


# --------------------------------------------------------------------------- calibrating


def _label(
    version: JudgeVersion, subset: list[int], progress: Progress | None, job: Job | None
) -> None:
    """Ask an endpoint judge for the subset, then for a seeded retest sample of it."""
    judge = version.judge
    llm_label_pairs(
        version=version, pair_ids=subset, concurrency=judge.concurrency, progress=progress, job=job
    )
    size = min(judge_settings_of(project=judge.project).retest_sample, len(subset))
    # Seeded by the version: a resumed calibration asks for the same pairs, which are stored.
    sample = random.Random(int(version.digest[:12], 16)).sample(subset, size)
    llm_label_pairs(
        version=version,
        pair_ids=sorted(sample),
        concurrency=judge.concurrency,
        repeat=1,
        progress=progress,
        job=job,
    )


def calibration_run(
    *,
    judge: LLMJudge,
    user: User | None = None,
    progress: Progress | None = None,
    job: Job | None = None,
) -> Calibration:
    """Calibrate the judge's current version: label the subset (an endpoint judge), compute
    the report, store it. Not one transaction: the calls are stored as they come back, so an
    interrupted calibration resumes where it stopped."""
    version = judge_version_of(judge=judge)
    subset = calibration_subset(project=judge.project)
    if not subset:
        raise CalibrationError(
            f"project {judge.project.slug!r} has no human grades to calibrate against; judge "
            "(or import with `import_judgments`) some pairs first"
        )
    if judge.kind == JudgeKind.ENDPOINT:
        _label(version, subset, progress, job)
    if progress is not None:
        progress(0.95, "computing the calibration report")
    return calibration_store(version=version, pair_ids=subset, user=user)


@transaction.atomic
def calibration_store(
    *, version: JudgeVersion, pair_ids: list[int], user: User | None = None
) -> Calibration:
    """Compute the report of the version on the pairs and store it as its latest calibration."""
    thresholds = thresholds_of(judge_settings_of(project=version.judge.project))
    obs = calibration_observations(version=version, pair_ids=pair_ids)
    report = calibrate(obs, thresholds, resamples=RESAMPLES, seed=SEED)
    report = {"judge": version.judge.name, "version": version.digest, **report}
    return Calibration.objects.create(
        version=version,
        n=report["n"],
        passed=report["passed"],
        reasons=report["reasons"],
        report=report,
        thresholds=asdict(thresholds),
        created_by=user,
    )


@transaction.atomic
def calibration_start(*, judge: LLMJudge, user: User | None = None) -> Job:
    """The queued calibration job; publish it with `jobs.services.job_enqueue` once committed."""
    judge_version_of(judge=judge)  # refuse now what the worker would refuse
    return job_create(
        project=judge.project,
        kind=LLM_CALIBRATE,
        handler="evaluation.tasks.llm_calibrate_job",
        params={"judge_id": judge.pk},
        user=user,
    )


def calibration_report(*, version: JudgeVersion) -> dict[str, Any] | None:
    """The stored report of the version's latest calibration (None before any)."""
    latest = latest_calibration(version=version)
    return None if latest is None else dict(latest.report)
