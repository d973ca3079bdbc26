"""Search logs into a project: ingest, stratify, sample, accept (chapter 7, step 1).

The maths and the file formats are in the pure core (`sampling/core.py` and its modules);
this module stores what the core computes. Raw log rows never reach the database: only
per-query statistics are kept, and the uploaded file is deleted once ingested, whether
ingestion worked or not.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from annotation.models import Project, Query
from assay.db import bulk_insert

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
PROGRESS_EVERY = 0.5  # seconds between progress writes: enough for a smooth bar, few UPDATEs


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


@transaction.atomic
def log_create(
    *,
    project: Project,
    upload: UploadedFile,
    user: User | None,
    columns: str = "",
    definition: StrataDefinition | None = None,
) -> QueryLog:
    """Keep an uploaded log in MEDIA_ROOT until a worker ingests it; returns the queued log.

    ``definition`` is the strata definition asked for; only the project's first log uses it.
    """
    if columns:
        try:
            ColumnMap.parse(columns)
        except LogError as error:
            raise SamplingError(str(error)) from None
    folder = Path(settings.MEDIA_ROOT) / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{uuid.uuid4().hex}-{Path(upload.name or 'log').name}"
    with open(target, "wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return QueryLog.objects.create(
        project=project,
        name=Path(upload.name or "log").name,
        upload=str(target),
        columns=columns,
        definition=definition.to_dict() if definition else None,
        uploaded_by=user,
    )


def log_ingest(
    *, log_id: int, path: str | Path | None = None, statistics: bool | None = None
) -> QueryLog:
    """Ingest a queued log into per-query statistics and strata. Idempotent.

    ``statistics`` true reads the file as per-query statistics (docs/warehouse.md); None
    tells a statistics file by its columns. A log already done is returned as it is; a
    retried task starts over and replaces any statistics of an earlier attempt, so a row is
    never stored twice. On a bad log the status is `failed` with a message that says what
    to fix, and the project is left unchanged.
    """
    query_log = QueryLog.objects.select_related("project").get(pk=log_id)
    if query_log.status == LogStatus.DONE:
        return query_log
    source = Path(path or query_log.upload)
    _set(query_log, status=LogStatus.RUNNING, progress=0.0, message="starting", error="")
    try:
        definition = definition_for(query_log)
        columns = ColumnMap.parse(query_log.columns) if query_log.columns else None
        stats = ingest_log(
            source,
            columns=columns,
            definition=definition,
            on_progress=_progress(query_log),
            statistics=statistics,
        )
        strata = stratify(stats, definition)
        _store(query_log, stats, strata, definition)
    except (LogError, DefinitionError, SamplingError, OSError) as error:
        # An upload is stored under a generated name: name the file as it was uploaded.
        shown = str(error) if path is not None else str(error).replace(str(source), query_log.name)
        _set(query_log, status=LogStatus.FAILED, error=shown, message="failed")
    except Exception as error:
        # A defect, not a bad file: still never leave the log "running" for ever, and let the
        # worker (or the command) see the exception with its traceback.
        log.exception("ingesting log %s failed unexpectedly", query_log.pk)
        reason = f"{type(error).__name__}: {error}"
        _set(
            query_log,
            status=LogStatus.FAILED,
            error=f"The log could not be ingested because of an internal error ({reason}).",
            message="failed",
        )
        raise
    finally:
        if path is None and query_log.upload:
            Path(query_log.upload).unlink(missing_ok=True)  # raw rows are not kept
            QueryLog.objects.filter(pk=query_log.pk).update(upload="")
    query_log.refresh_from_db()
    return query_log


def _set(query_log: QueryLog, **fields: Any) -> None:
    QueryLog.objects.filter(pk=query_log.pk).update(**fields)


def _progress(query_log: QueryLog) -> Callable[[float, str], None]:
    last = 0.0

    def report(fraction: float, message: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY or fraction >= 1.0:
            last = now
            _set(query_log, progress=min(max(fraction, 0.0), 1.0), message=message[:500])

    return report


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
    _set(
        query_log,
        status=LogStatus.DONE,
        progress=1.0,
        message=f"{len(stats)} distinct queries",
        report=report,
        strata=summary,
    )


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
