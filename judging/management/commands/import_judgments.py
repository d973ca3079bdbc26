"""``manage.py import_judgments SLUG FILE --as NAME [--kind human|llm]``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotation.cli import input_errors, project_by_slug
from judging.services_import import KINDS, JudgmentsImportError, judgments_import


class Command(BaseCommand):
    help = (
        "Import TREC qrels (qid 0 docid grade, gzip accepted) as one person's judgments "
        "(--kind human, the default: the person is created without a password if needed and "
        "made an annotator of the project) or as the labels of an external LLM judge (--kind "
        "llm: a judge version whose digest hashes the labels). All or nothing; grades 0..3; "
        "every pair must be a pair of the project. Importing the same file again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", metavar="SLUG")
        parser.add_argument("file", metavar="FILE")
        parser.add_argument("--as", dest="name", required=True, metavar="NAME")
        parser.add_argument("--kind", choices=KINDS, default="human")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        with input_errors(JudgmentsImportError):
            result = judgments_import(
                project=project, path=options["file"], name=options["name"], kind=options["kind"]
            )
        self.stdout.write(result.summary())
