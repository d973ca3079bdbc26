"""The project's data from the browser: a corpus or a query file uploaded on the Data page
and imported by a worker, all or nothing, by the same services the commands run
(`annotation.services.corpus_import` / `queries_import`).

It lives here, not in annotation, because a background job needs the jobs app, which sits
above annotation; pooling is where the other inputs of a pool (runs) come in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.template.defaultfilters import filesizeformat

from annotation.models import Project
from annotation.services import ImportReport, corpus_import, queries_import
from formats.text import FormatError, ReadProgress
from jobs.errors import JobInputError
from jobs.models import Job
from jobs.services import job_create
from jobs.uploads import upload_keep, upload_name

Importer = Callable[..., ImportReport]


@dataclass(frozen=True)
class DataKind:
    """One kind of file the Data page takes: its job's kind, its form field, its importer."""

    job_kind: str
    field: str
    noun: str  # what the rows are, for people
    what: str  # what the file is, for people
    command: str  # the command that imports such a file (and has no size limit)
    importer: Importer


CORPUS = DataKind("corpus_import", "corpus", "documents", "corpus", "import_corpus", corpus_import)
QUERIES = DataKind(
    "queries_import", "queries", "queries", "query file", "import_queries", queries_import
)
KINDS = {kind.field: kind for kind in (CORPUS, QUERIES)}
JOB_KINDS = [kind.job_kind for kind in KINDS.values()]
READ_SHARE = 0.95  # of the bar: reading and storing go together; the rest is the commit


@transaction.atomic
def data_upload_create(
    *, project: Project, kind: DataKind, upload: UploadedFile, user: User | None
) -> Job:
    """Keep an uploaded corpus or query file until a worker imports it; returns the queued
    job (publish it with `jobs.services.job_enqueue` once this has committed). The job owns
    the file and deletes it when it ends."""
    name = upload_name(upload.name or kind.field, kind.field)
    target = upload_keep(upload, "imports")
    try:
        return job_create(
            project=project,
            kind=kind.job_kind,
            handler="pooling.tasks.data_import_job",
            params={"field": kind.field, "path": str(target), "name": name},
            files=[target],
            user=user,
        )
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def data_import_run(*, job: Job, progress: Callable[[float, str], None]) -> ImportReport:
    """The job's work: import the file into the project, all or nothing. A bad file raises
    JobInputError naming the file as uploaded and the line; nothing is kept. A restarted
    attempt imports again: rows an earlier attempt stored were rolled back with it."""
    kind = KINDS[job.params["field"]]
    path, name = Path(job.params["path"]), job.params["name"]

    def on_progress(at: ReadProgress) -> None:
        read = f"{filesizeformat(at.done)} of {filesizeformat(at.total)}"
        progress(at.fraction * READ_SHARE, f"{name}: {read} read, line {at.line:,}")

    try:
        return kind.importer(project=job.project, path=path, on_progress=on_progress)
    except FormatError as error:
        # The file is stored under a generated name: name it as it was uploaded.
        raise JobInputError(str(FormatError(name, error.line, error.reason))) from error
    except ConnectionError:
        raise  # transient: the job runner queues the job again
    except OSError as error:
        raise JobInputError(f"{name}: {error.strerror or error}") from error


def data_import_result(kind: DataKind, report: ImportReport) -> dict[str, Any]:
    return {
        "created": report.created,
        "unchanged": report.unchanged,
        "summary": f"{kind.noun}: {report}",
    }


def data_jobs(project: Project, limit: int = 10) -> list[Job]:
    """The project's latest corpus and query imports, newest first."""
    jobs = Job.objects.filter(project=project, kind__in=JOB_KINDS)
    jobs = jobs.select_related("project", "created_by")
    return list(jobs.order_by("-created_at", "-pk")[:limit])
