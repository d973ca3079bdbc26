from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotation.cli import input_errors, project_by_slug
from annotation.services import queries_import


class Command(BaseCommand):
    help = (
        "Import queries into a project: queries.jsonl ({_id or qid, text, description?, "
        "stratum?}), TSV (qid<TAB>text) or TREC topics XML (<topics><topic number=...><query>), "
        "gzip accepted. All or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        with input_errors():
            report = queries_import(project=project, path=options["file"])
        self.stdout.write(f"queries: {report}")
