from __future__ import annotations

import io
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agreement.labels import DEFAULT_POLICY, POLICIES
from annotation.cli import project_by_slug
from evaluation.services import ExportError, qrels_export


class Command(BaseCommand):
    help = (
        "Write the project's final labels as TREC qrels (qid 0 docid grade): a pair's "
        "adjudicated grade, else its judges' grade when they agree or one judged it; pairs "
        "whose judges disagree and that nobody adjudicated follow --unresolved."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        parser.add_argument(
            "--annotator", help="only this user's own current grades (for the agreement command)"
        )
        parser.add_argument(
            "--unresolved",
            choices=POLICIES,
            default=DEFAULT_POLICY,
            help="pairs whose judges disagree, not adjudicated: the lowest grade given (lower, "
            "default: no more relevant than every judge found it, and still judged), the "
            "highest (higher), or left out of the file (exclude)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        # Exported in memory first: a refused export must not truncate an existing file.
        buffer = io.StringIO()
        try:
            report = qrels_export(
                project=project,
                out=buffer,
                annotator=options["annotator"],
                unresolved=options["unresolved"],
            )
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
        sys.stderr.write(report.summary() + "\n")
