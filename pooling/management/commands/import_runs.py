from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import input_errors, project_by_slug
from pooling.services import PoolingError
from pooling.services_runs import RunReport, runs_import


class Command(BaseCommand):
    help = (
        "Import TREC run files (qid Q0 docid rank score tag), gzip accepted. Each file becomes one "
        "run named by its tag. All files or none. Reports, per run, the documents it names that "
        "are not in the corpus (import them first, or pool with build_pool --skip-missing) and "
        "the queries that are not the project's (pooling ignores them)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("files", nargs="+")
        parser.add_argument("--name", help="name of the run (only with a single file)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        if options["name"] and len(options["files"]) > 1:
            raise CommandError("--name needs exactly one file")
        with input_errors(PoolingError):
            job = runs_import(project=project, paths=options["files"], name=options["name"])
        for data in (job.result or {}).get("runs", []):
            report = RunReport.from_dict(data)
            self.stdout.write(f"run {report.name!r}: {report.lines} lines from {report.source}")
            for note in (report.missing_text, report.unknown_text):
                if note:
                    self.stdout.write(f"  {note}")
