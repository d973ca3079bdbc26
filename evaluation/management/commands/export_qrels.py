from __future__ import annotations

import io
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from evaluation.services import ExportError, qrels_export


class Command(BaseCommand):
    help = "Write the project's judgments as TREC qrels (qid 0 docid grade)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        parser.add_argument("--annotator", help="only this user's judgments")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        annotator = options["annotator"]
        # Exported in memory first: a refused export must not truncate an existing file.
        buffer = io.StringIO()
        try:
            report = qrels_export(project=project, out=buffer, annotator=annotator)
        except ExportError as error:
            raise CommandError(f"{error}. Nothing was written.") from error
        if options["output"]:
            try:
                with open(options["output"], "w", encoding="utf-8") as out:
                    out.write(buffer.getvalue())
            except OSError as error:
                raise CommandError(f"{error}. Nothing was written.") from error
        else:
            self.stdout.write(buffer.getvalue(), ending="")
        note = f"{report.pairs} judged pairs written"
        if report.conflicting:
            note += f"; {report.conflicting} pairs had disagreeing judges (first judgment kept)"
        sys.stderr.write(note + "\n")
