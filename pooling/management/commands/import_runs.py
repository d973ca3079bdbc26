from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.cli import input_errors, project_by_slug
from pooling.services import PoolingError, run_import


class Command(BaseCommand):
    help = (
        "Import TREC run files (qid Q0 docid rank score tag), gzip accepted. Each file becomes one "
        "run named by its tag. All files or none."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("files", nargs="+")
        parser.add_argument("--name", help="name of the run (only with a single file)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        if options["name"] and len(options["files"]) > 1:
            raise CommandError("--name needs exactly one file")
        with input_errors(PoolingError), transaction.atomic():
            runs = [
                run_import(project=project, path=path, name=options["name"])
                for path in options["files"]
            ]
        for run in runs:
            self.stdout.write(f"run {run.name!r}: {run.results.count()} lines from {run.source}")
