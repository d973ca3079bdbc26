"""Runs in and queries out: run files uploaded on the pool page or imported by `import_runs`
(one job for both), the built-in baselines over a project's own corpus and queries, and the
queries a team's own systems must answer.

After runs come in, a lead needs to know per run (:class:`RunReport`) how many documents it
names that the corpus lacks (a pool must leave them out, or the documents be imported first)
and how many of its queries the project does not hold (a pool ignores them). The reports are
the job's result, which the pool page shows beside each run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from annotation.models import Document, Project, Query
from formats.beir import CorpusDoc, QueryRow
from formats.trec import FormatError, RunRow, rank_run
from jobs.errors import JobInputError
from jobs.models import Job, JobState
from jobs.run import Progress, job_keep_result, job_run_inline
from jobs.services import job_create
from jobs.uploads import UploadError, upload_keep, upload_name

from .baselines import BASELINES, baseline_names
from .models import Run, RunResult
from .services import PoolingError, run_create, run_import, run_name_check, run_read

RUN_IMPORT = "run_import"  # job kinds, as the pool page finds them
RUN_BASELINES = "run_baselines"
EXAMPLES = 5  # ids shown of what is missing
MAX_BASELINE_K = 10_000


def _ignore(fraction: float, message: str) -> None:
    """Progress nobody watches (the demo)."""


# --------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class RunReport:
    """A stored run and what of it the project lacks (counts of distinct ids, a few examples)."""

    run_id: int
    name: str
    source: str
    lines: int
    queries: int
    missing_documents: int
    missing_examples: tuple[str, ...]
    unknown_queries: int
    unknown_examples: tuple[str, ...]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunReport:
        fields = dict(data)
        for key in ("missing_examples", "unknown_examples"):
            fields[key] = tuple(fields[key])
        return cls(**fields)

    @property
    def missing_text(self) -> str:
        """What to do about documents the corpus lacks (the command prints it, the page shows
        it): the same choice `build_pool --skip-missing` offers."""
        if not self.missing_documents:
            return ""
        return (
            f"{self.missing_documents:,} documents named by run {self.name!r} are not in the "
            f"corpus (e.g. {', '.join(self.missing_examples)}): import the documents first "
            "(import_corpus), or leave them out when pooling (build_pool --skip-missing)"
        )

    @property
    def unknown_text(self) -> str:
        if not self.unknown_queries:
            return ""
        return (
            f"{self.unknown_queries:,} queries of run {self.name!r} are not queries of the "
            f"project (e.g. {', '.join(self.unknown_examples)}): pooling ignores them"
        )


def run_report(run: Run) -> RunReport:
    """What `run` names that its project lacks, by distinct document and query id."""
    results = RunResult.objects.filter(run=run)
    held_docs = Document.objects.filter(project_id=run.project_id, docid=OuterRef("docid"))
    held_queries = Query.objects.filter(project_id=run.project_id, qid=OuterRef("qid"))
    missing = results.filter(~Exists(held_docs)).values_list("docid", flat=True).distinct()
    unknown = results.filter(~Exists(held_queries)).values_list("qid", flat=True).distinct()
    return RunReport(
        run_id=run.pk,
        name=run.name,
        source=run.source,
        lines=results.count(),
        queries=results.values("qid").distinct().count(),
        missing_documents=missing.count(),
        missing_examples=tuple(missing.order_by("docid")[:EXAMPLES]),
        unknown_queries=unknown.count(),
        unknown_examples=tuple(unknown.order_by("qid")[:EXAMPLES]),
    )


def _runs_result(runs: Sequence[Run], skipped: Sequence[str] = ()) -> dict[str, Any]:
    reports = [run_report(run) for run in runs]
    names = ", ".join(f"{r.name} ({r.lines:,} lines)" for r in reports)
    summary = f"{len(reports)} run{'s' if len(reports) != 1 else ''} stored: {names}"
    lacking = sum(1 for r in reports if r.missing_documents)
    if lacking:
        summary += (
            f"; {lacking} of them name{'s' if lacking == 1 else ''} documents not in the corpus"
        )
    return {"runs": [asdict(r) for r in reports], "skipped": list(skipped), "summary": summary}


def run_reports(project: Project) -> dict[int, RunReport]:
    """The report of each run stored by a job (an upload, the command, the baselines), by id."""
    kinds = (RUN_IMPORT, RUN_BASELINES)
    jobs = Job.objects.filter(project=project, kind__in=kinds, state=JobState.DONE)
    reports: dict[int, RunReport] = {}
    for result in jobs.filter(result__isnull=False).values_list("result", flat=True):
        for data in (result or {}).get("runs", []):
            report = RunReport.from_dict(data)
            reports[report.run_id] = report
    return reports


# --------------------------------------------------------------------------- run files in


@dataclass(frozen=True)
class RunFile:
    path: str  # where the file is read
    shown: str  # what errors and the run's source call it (the name it was uploaded under)


@transaction.atomic
def runs_upload_create(
    *, project: Project, uploads: Sequence[UploadedFile], name: str = "", user: User | None
) -> Job:
    """Keep uploaded run files in MEDIA_ROOT until a worker imports them; returns the queued
    job (publish it with `jobs.services.job_enqueue` once this has committed). If queueing
    fails, the files go too."""
    if not uploads:
        raise PoolingError("Choose one or more run files (TREC format, gzip accepted).")
    if name and len(uploads) > 1:
        raise PoolingError("A run name needs exactly one file: leave it empty to name each "
                           "run by its file's tag.")  # fmt: skip
    try:
        shown = [upload_name(upload.name or "run", "run") for upload in uploads]
    except UploadError as error:
        raise PoolingError(str(error)) from None
    kept: list[Path] = []
    try:
        kept.extend(upload_keep(upload, "runs") for upload in uploads)
        files = [RunFile(str(path), given) for path, given in zip(kept, shown, strict=True)]
        return runs_import_queue(project=project, files=files, name=name, owned=True, user=user)
    except BaseException:
        for path in kept:
            path.unlink(missing_ok=True)
        raise


def runs_import_queue(
    *,
    project: Project,
    files: Sequence[RunFile],
    name: str | None = None,
    owned: bool,
    user: User | None = None,
) -> Job:
    """The queued job importing run files, all or none. ``owned``: the job deletes the files
    when it ends (an upload); else they are the caller's (the import_runs command's)."""
    return job_create(
        project=project,
        kind=RUN_IMPORT,
        handler="pooling.tasks.runs_import_job",
        params={"files": [asdict(f) for f in files], "name": name or ""},
        files=[f.path for f in files] if owned else [],
        user=user,
    )


def runs_import(*, project: Project, paths: Sequence[str | Path], name: str | None = None) -> Job:
    """The import_runs command: the upload's job, run here to its end; returns it done.

    A failure raises PoolingError with the job's message, and the failed job is deleted too:
    the person at the terminal has read why, and the database is left as it was.
    """
    files = [RunFile(str(path), str(path)) for path in paths]
    job = runs_import_queue(project=project, files=files, name=name, owned=False)
    job_run_inline(job.pk)
    job.refresh_from_db()
    if job.state != JobState.DONE:
        Job.objects.filter(pk=job.pk).delete()
        raise PoolingError(job.error)
    return job


def runs_import_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """The import job's work: check every file, then store them all in one transaction, with
    a report per run. A bad file raises JobInputError naming it (``file:line: ...``, the
    reader's message) and nothing is stored. A restarted attempt returns the result of an
    earlier one that committed.

    Files are read twice, once to check them (with progress) and once to store them, so that
    a worker holds one file's rows at a time and writes no progress inside the transaction.
    """
    if job.result is not None:
        return dict(job.result)
    files = [RunFile(**f) for f in job.params["files"]]
    name = job.params.get("name") or None
    try:
        _check_files(job.project, files, name, progress)
        progress(0.9, f"storing {len(files)} run{'s' if len(files) != 1 else ''}")
        return _store_files(job, files, name)
    except (FormatError, PoolingError, OSError) as error:
        raise JobInputError(_shown(str(error), files)) from error


def _check_files(
    project: Project, files: Sequence[RunFile], name: str | None, progress: Progress
) -> None:
    if name and len(files) > 1:
        raise PoolingError("a run name needs exactly one file")
    seen: dict[str, str] = {}
    for i, run_file in enumerate(files):
        progress(0.9 * i / len(files), f"checking {run_file.shown} ({i + 1} of {len(files)})")
        run_name, _ = run_read(path=run_file.path, name=name, shown=run_file.shown)
        if run_name in seen:
            raise PoolingError(
                f"{run_file.shown}: run {run_name!r} is also the run of {seen[run_name]}; "
                "each file of an upload must hold another run"
            )
        run_name_check(project=project, name=run_name, source=Path(run_file.shown).name)
        seen[run_name] = run_file.shown


@transaction.atomic
def _store_files(job: Job, files: Sequence[RunFile], name: str | None) -> dict[str, Any]:
    runs = [
        run_import(project=job.project, path=f.path, name=name, user=job.created_by, shown=f.shown)
        for f in files
    ]
    result = _runs_result(runs)
    job_keep_result(job, result)
    return result


def _shown(message: str, files: Sequence[RunFile]) -> str:
    # An OS error names the path a file is kept under: name it as it was uploaded.
    for run_file in files:
        message = message.replace(run_file.path, run_file.shown)
    return message


# --------------------------------------------------------------------------- baselines


def baselines_queue(
    *, project: Project, k: int = 100, only: Sequence[str] | None = None, user: User | None
) -> Job:
    """The queued job running the built-in baselines (publish it once committed). Refused
    while the project has no documents or no queries, or runs the baselines already."""
    names = _names(only)
    _check_k(k)
    _check_inputs(project)
    running = Job.objects.filter(
        project=project, kind=RUN_BASELINES, state__in=(JobState.QUEUED, JobState.RUNNING)
    )
    if running.exists():
        raise PoolingError("The baselines are running already; their runs appear when done.")
    return job_create(
        project=project,
        kind=RUN_BASELINES,
        handler="pooling.tasks.baselines_job",
        params={"k": k, "only": names},
        user=user,
    )


def baselines_create(
    *,
    project: Project,
    k: int = 100,
    only: Sequence[str] | None = None,
    user: User | None = None,
    progress: Progress = _ignore,
) -> list[Run]:
    """Run the built-in baselines over the project's corpus and all its queries and store one
    run each (the demo and the run_baselines command; the page's button runs the same as a
    job). See `baselines_store` for the runs' names."""
    ranked = baselines_compute(project=project, k=k, only=only, progress=progress)
    progress(0.95, "storing the runs")
    return baselines_store(project=project, ranked=ranked, k=k, user=user)


def baselines_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """The baselines job's work; a restarted attempt returns the result of one that committed."""
    if job.result is not None:
        return dict(job.result)
    k, only = job.params["k"], job.params["only"]
    try:
        ranked = baselines_compute(project=job.project, k=k, only=only, progress=progress)
    except PoolingError as error:
        raise JobInputError(str(error)) from error
    progress(0.95, "storing the runs")
    with transaction.atomic():
        runs = baselines_store(project=job.project, ranked=ranked, k=k, user=job.created_by)
        skipped = [name for name, by_query in ranked.items() if not by_query]
        result = _runs_result(runs, skipped)
        job_keep_result(job, result)
    return result


def baselines_compute(
    *, project: Project, k: int, only: Sequence[str] | None, progress: Progress
) -> dict[str, dict[str, list[RunRow]]]:
    """Each baseline's rows by query (trec_eval order), over every document and query of the
    project; nothing is written. A baseline that retrieves nothing maps to ``{}``."""
    names = _names(only)
    _check_k(k)
    _check_inputs(project)
    progress(0.0, "reading the corpus")
    docs = [CorpusDoc(*row) for row in _documents(project)]
    pairs = project.queries.order_by("pk").values_list("qid", "text")
    queries = [QueryRow(qid, text) for qid, text in pairs]
    ranked: dict[str, dict[str, list[RunRow]]] = {}
    for i, name in enumerate(names):
        progress(
            0.05 + 0.9 * i / len(names),
            f"{name} over {len(docs):,} documents and {len(queries):,} queries",
        )
        ranked[name] = ranked_by_query(BASELINES[name](docs, queries, k))
    return ranked


def _documents(project: Project) -> Iterator[tuple[str, str, str]]:
    rows = project.documents.order_by().values_list("docid", "title", "text")
    return rows.iterator(chunk_size=5000)


@transaction.atomic
def baselines_store(
    *,
    project: Project,
    ranked: dict[str, dict[str, list[RunRow]]],
    k: int,
    user: User | None = None,
) -> list[Run]:
    """Store each baseline's rows as a run (one that retrieved nothing is left out).

    Runs are immutable and cover the queries of their day, so a later call (after new queries
    were sampled) stores new runs beside the old ones: a run takes the baseline's name when it
    is free (``bm25``), else the name with the first free number (``bm25-2``, ``bm25-3``).
    The project row is locked, so that two calls at once never take the same name.
    """
    Project.objects.select_for_update().get(pk=project.pk)
    taken = set(project.runs.values_list("name", flat=True))
    queries = project.queries.count()
    runs: list[Run] = []
    for name, by_query in ranked.items():
        if not by_query:
            continue
        run_name = free_name(name, taken)
        taken.add(run_name)
        source = f"built-in baseline {name}, top {k} of {queries:,} queries"
        runs.append(
            run_create(project=project, name=run_name, ranked=by_query, source=source, user=user)
        )
    return runs


def free_name(base: str, taken: Iterable[str]) -> str:
    """``base`` if no run has it, else ``base-N`` with the smallest free N from 2."""
    names = set(taken)
    if base not in names:
        return base
    number = 2
    while f"{base}-{number}" in names:
        number += 1
    return f"{base}-{number}"


def ranked_by_query(rows: Iterable[RunRow]) -> dict[str, list[RunRow]]:
    """Rows grouped by query, each query in trec_eval order (as `run_create` stores them)."""
    grouped: dict[str, list[RunRow]] = defaultdict(list)
    for row in rows:
        grouped[row.qid].append(row)
    return {qid: rank_run(query_rows) for qid, query_rows in grouped.items()}


def _check_inputs(project: Project) -> None:
    if not project.documents.exists():
        raise PoolingError(f"project {project.slug!r} has no documents; import a corpus first")
    if not project.queries.exists():
        raise PoolingError(f"project {project.slug!r} has no queries; import or sample some")


def _names(only: Sequence[str] | None) -> list[str]:
    try:
        return baseline_names(only)
    except ValueError as error:
        raise PoolingError(str(error)) from None


def _check_k(k: int) -> None:
    if not 1 <= k <= MAX_BASELINE_K:
        raise PoolingError(f"k must be from 1 to {MAX_BASELINE_K:,}, not {k}")


# --------------------------------------------------------------------------- queries out


def queries_for_export(*, project: Project, without_runs: bool = False) -> QuerySet[Query]:
    """The project's queries in the order they were added; ``without_runs``: only those no run
    of the project has a line for (new queries that systems have yet to answer)."""
    queries = project.queries.order_by("pk")
    if without_runs:
        answered = RunResult.objects.filter(run__project=project, qid=OuterRef("qid"))
        queries = queries.filter(~Exists(answered))
    return queries


def query_rows(queries: QuerySet[Query]) -> Iterator[QueryRow]:
    """The queries as records for the writers of `formats.beir`, streamed from the database."""
    fields = ("qid", "text", "description", "stratum")
    for qid, text, description, stratum in queries.values_list(*fields).iterator(chunk_size=2000):
        yield QueryRow(qid=qid, text=text, description=description, stratum=stratum)
