"""Search logs into a project: ingest, stratify, sample, accept (chapter 7, step 1).

The maths and the file formats are in the pure core (`sampling/core.py` and its modules);
this module stores what the core computes. Raw log rows never reach the database: only
per-query statistics are kept, and the uploaded file is deleted once ingested, whether
ingestion worked or not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from annotation.models import Project, Query
from assay.db import bulk_insert
from jobs.errors import JobInputError
from jobs.models import Job
from jobs.run import job_run_inline
from jobs.services import job_create
from jobs.uploads import UploadError, upload_keep, upload_name

from .core import (
    STRATA,
    ColumnMap,
    DefinitionError,
    LogError,
    LogStats,
    Normalisation,
    QueryStats,
    Strata,
    StrataDefinition,
    StratumName,
    check_seed,
    ingest_log,
    normalise_query,
    sample_queries,
    stratify,
)
from .models import (
    LogQueryStat,
    LogStatus,
    QueryLog,
    QuerySample,
    SampledQuery,
    SamplingScheme,
)

log = logging.getLogger(__name__)


DEFINITION_KEPT = (
    "the strata definition given with this log was not used: the project's first log fixed "
    "its definition, and every later log is read with it"
)


class SamplingError(ValueError):
    """A request the sampling steps cannot honour; the message says what to do."""


def scheme_of(project: Project) -> StrataDefinition:
    """The project's stored strata definition, or the defaults before its first log."""
    return stored_scheme(project) or StrataDefinition()


def stored_scheme(project: Project) -> StrataDefinition | None:
    """The strata definition the project's first log fixed, if it has one yet."""
    scheme = SamplingScheme.objects.filter(project=project).first()
    return StrataDefinition.from_dict(scheme.definition) if scheme else None


def definition_ignored(
    project: Project, requested: StrataDefinition | None
) -> StrataDefinition | None:
    """The project's fixed definition when `requested` asks for another one, which is then
    not used (see `definition_for`); None when nothing is ignored."""
    stored = stored_scheme(project)
    if requested is None or stored is None or requested == stored:
        return None
    return stored


def definition_for(query_log: QueryLog) -> StrataDefinition:
    """What a log is read with: the project's definition, else the one asked for at upload.

    The first log of a project fixes its definition, so that later samples count queries
    the same way; a definition asked for with a later log is not used.
    """
    stored = stored_scheme(query_log.project)
    if stored is not None:
        return stored
    if query_log.definition:
        return StrataDefinition.from_dict(query_log.definition)
    return StrataDefinition()


LOG_INGEST = "log_ingest"


@transaction.atomic
def log_create(
    *,
    project: Project,
    upload: UploadedFile,
    user: User | None,
    columns: str = "",
    definition: StrataDefinition | None = None,
) -> QueryLog:
    """Keep an uploaded log in MEDIA_ROOT until a worker ingests it; returns the queued log
    (publish its job with `jobs.services.job_enqueue` once this has committed).

    The upload is checked before anything is written, and the file is stored under a
    generated name; if storing the rows fails, the file goes too. ``definition`` is the strata
    definition asked for; only the project's first log uses it.
    """
    try:
        name = upload_name(upload.name or "log", "log")
    except UploadError as error:
        raise SamplingError(str(error)) from None
    if columns:
        try:
            ColumnMap.parse(columns)
        except LogError as error:
            raise SamplingError(str(error)) from None
    # The name as uploaded is shown, never used on disk: only its format suffixes are kept.
    target = upload_keep(upload, "logs")
    try:
        return log_queue(
            project=project, name=name, path=target, owned=True, columns=columns,
            definition=definition, user=user,
        )  # fmt: skip
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def log_queue(
    *,
    project: Project,
    name: str,
    path: str | Path,
    owned: bool,
    columns: str = "",
    definition: StrataDefinition | None = None,
    user: User | None = None,
    statistics: bool | None = None,
) -> QueryLog:
    """A log and its queued ingest job. ``owned``: the job deletes the file when it ends (an
    upload), else the file is the caller's (the import_log command's argument)."""
    job = job_create(
        project=project,
        kind=LOG_INGEST,
        handler="sampling.tasks.log_ingest_job",
        params={"path": str(path), "statistics": statistics},
        files=[path] if owned else [],
        user=user,
    )
    return QueryLog.objects.create(
        project=project,
        name=name,
        job=job,
        columns=columns,
        definition=definition.to_dict() if definition else None,
        uploaded_by=user,
    )


def log_ingest(*, log_id: int) -> QueryLog:
    """Run a log's ingest job here, in this process (the import_log command), to its end."""
    job_run_inline(QueryLog.objects.get(pk=log_id).job_id)
    return QueryLog.objects.select_related("job").get(pk=log_id)


def log_ingest_run(*, job: Job, progress: Callable[[float, str], None]) -> QueryLog:
    """The ingest job's work: per-query statistics and strata of its log. Idempotent: a
    restarted attempt replaces any statistics of an earlier one, so a row is never stored
    twice. A bad log raises JobInputError with a message that says what to fix, and the
    project is left unchanged; the job's state is written by the job runner.

    The job's ``statistics`` parameter true reads the file as per-query statistics
    (docs/warehouse.md); None tells a statistics file by its columns.
    """
    query_log = QueryLog.objects.select_related("project").get(job=job)
    source = Path(job.params["path"])
    try:
        definition = definition_for(query_log)
        columns = ColumnMap.parse(query_log.columns) if query_log.columns else None
        stats = ingest_log(
            source,
            columns=columns,
            definition=definition,
            on_progress=progress,
            statistics=job.params.get("statistics"),
        )
        strata = stratify(stats, definition)
        _store(query_log, stats, strata, definition)
    except ConnectionError:
        raise  # transient: the job runner queues the job again
    except (LogError, DefinitionError, SamplingError, OSError) as error:
        # An upload is stored under a generated name: name the file as it was uploaded.
        shown = str(error).replace(str(source), query_log.name) if job.files else str(error)
        raise JobInputError(shown) from error
    return query_log


@transaction.atomic
def _store(
    query_log: QueryLog, stats: LogStats, strata: Strata, definition: StrataDefinition
) -> None:
    scheme, created = SamplingScheme.objects.select_for_update().get_or_create(
        project=query_log.project, defaults={"definition": definition.to_dict()}
    )
    if not created and StrataDefinition.from_dict(scheme.definition) != definition:
        # Another log of the project was stored first, with its own definition.
        raise SamplingError(
            "the project's strata definition was fixed by another log while this one was "
            "being read; read this log again to use it"
        )
    LogQueryStat.objects.filter(log=query_log).delete()
    rows = (
        (query_log.pk, r.query, r.frequency, r.sessions, r.users, r.zero_result_rate,
         r.reformulation_rate, r.abandonment_rate, r.pii or "", str(strata.labels[i]))
        for i, r in enumerate(stats.records())
    )  # fmt: skip
    columns = ["log_id", "query", "frequency", "sessions", "users", "zero_result_rate",
               "reformulation_rate", "abandonment_rate", "pii", "stratum"]  # fmt: skip
    bulk_insert(LogQueryStat, columns, rows)
    report = stats.report.to_dict() if stats.report else None
    summary = strata_summary(strata)
    if query_log.definition and StrataDefinition.from_dict(query_log.definition) != definition:
        summary["warnings"].insert(0, DEFINITION_KEPT)
    QueryLog.objects.filter(pk=query_log.pk).update(report=report, strata=summary)


def strata_summary(strata: Strata) -> dict[str, Any]:
    """What the log page shows: the strata table, the chart's points and the cut ranks."""
    return {
        "table": [asdict(row) for row in strata.summary],
        "rank_frequency": [list(point) for point in strata.rank_frequency],
        "cut_ranks": list(strata.cut_ranks),
        "warnings": list(strata.warnings),
        "definition": strata.definition.to_dict(),
    }


def log_stats(query_log: QueryLog) -> LogStats:
    rows = query_log.stats.values_list(
        "query", "frequency", "sessions", "users", "zero_result_rate", "reformulation_rate",
        "abandonment_rate", "pii",
    )  # fmt: skip
    records = [
        QueryStats(*row[:-1], pii=row[-1] or None) for row in rows.iterator(chunk_size=10_000)
    ]
    return LogStats.from_records(records)


@transaction.atomic
def sample_draw(
    *,
    query_log: QueryLog,
    quotas: Mapping[StratumName, int],
    seed: int,
    weighted: bool = False,
    user: User | None = None,
) -> QuerySample:
    """Draw a stratified sample from an ingested log, excluding queries already in the project.

    The sample is a preview until accepted; drawing again with the same seed gives the same
    queries.
    """
    if query_log.status != LogStatus.DONE:
        raise SamplingError(f"log {query_log.name!r} is not ingested yet ({query_log.status})")
    try:
        check_seed(seed)
    except ValueError as error:
        raise SamplingError(str(error)) from None
    definition = scheme_of(query_log.project)
    stats = log_stats(query_log)
    strata = stratify(stats, definition)
    exclude = _texts_in(query_log.project, definition.normalisation)
    sample = sample_queries(
        stats, strata, quotas=dict(quotas), seed=seed, weighted=weighted, exclude=exclude
    )
    return QuerySample.objects.create(
        project=query_log.project,
        log=query_log,
        quotas={name: int(quotas.get(name, 0)) for name in STRATA},
        seed=seed,
        weighted=weighted,
        draws=[asdict(d) | {"shortfall": d.shortfall} for d in sample.draws],
        drawn=[q.to_json() for q in sample.queries],
        created_by=user,
    )


@dataclass(frozen=True)
class Accepted:
    """What accepting a sample did: queries added, and drawn queries already in the project."""

    added: int
    skipped: int


@transaction.atomic
def sample_accept(*, sample: QuerySample) -> Accepted:
    """Add the sample's queries to the project (once), with stratum, weight and signals.

    A drawn query the project holds by now (another preview of the same log accepted first,
    or an import since the draw) is skipped and counted, compared by normalised text as the
    draw's exclusion compares it; the others keep their place (``qid`` ``s<sample>-<n>``).
    """
    # Lock the project row: two samples accepted at once would each miss the other's queries.
    Project.objects.select_for_update().get(pk=sample.project_id)
    locked = QuerySample.objects.select_for_update().select_related("project").get(pk=sample.pk)
    if locked.accepted_at is not None:
        raise SamplingError(f"sample #{sample.pk} was accepted already")
    project = locked.project
    normalisation = scheme_of(project).normalisation
    present = _texts_in(project, normalisation)
    existing = set(project.queries.values_list("qid", flat=True))
    queries = []
    for index, row in enumerate(locked.drawn, start=1):
        text = normalise_query(row["query"], normalisation)
        if text in present:
            continue
        present.add(text)
        queries.append(
            Query(
                project=project,
                qid=_qid(locked, index, existing),
                text=row["query"],
                stratum=row["stratum"],
                frequency=row["frequency"],
                inclusion_probability=row["inclusion_probability"],
                signals=row["signals"],
            )
        )
    Query.objects.bulk_create(queries)
    SampledQuery.objects.bulk_create(SampledQuery(query=query, sample=locked) for query in queries)
    locked.accepted_at = timezone.now()
    locked.save(update_fields=["accepted_at"])
    return Accepted(added=len(queries), skipped=len(locked.drawn) - len(queries))


def accepted_message(accepted: Accepted, project_name: str) -> str:
    message = f"{accepted.added} queries added to {project_name}"
    if accepted.skipped:
        message += f"; {accepted.skipped} drawn queries were in the project already and skipped"
    return message + "."


def _texts_in(project: Project, normalisation: Normalisation) -> set[str]:
    """The project's queries, normalised as a log's queries are."""
    texts = project.queries.values_list("text", flat=True).iterator(chunk_size=10_000)
    return {normalise_query(text, normalisation) for text in texts}


def _qid(sample: QuerySample, index: int, existing: set[str]) -> str:
    qid = f"s{sample.pk}-{index:03d}"
    if qid in existing:  # a query imported by hand took the name: never overwrite it
        raise SamplingError(f"query id {qid} exists already in {sample.project.slug!r}")
    return qid
