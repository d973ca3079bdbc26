"""``manage.py run_baselines``: the built-in baselines over a project's corpus and queries."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from assay import options as bounded
from pooling.baselines import BASELINES
from pooling.services import PoolingError
from pooling.services_runs import MAX_BASELINE_K, baselines_create, run_report


class Command(BaseCommand):
    help = (
        "Run the built-in baselines (bm25: BM25 via bm25s; tfidf: TF-IDF cosine; bm25-title: "
        "BM25 over titles) over every document and query of the project, and store one run "
        "each. A run takes the baseline's name, or, when a run has it already (runs are "
        "immutable), the name with the first free number: bm25-2, bm25-3, ..."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument(
            "--k",
            type=bounded.whole_number(1, MAX_BASELINE_K),
            default=100,
            help="documents retrieved per query (default 100)",
        )
        parser.add_argument(
            "--only",
            help=f"comma-separated baselines to run (default: all of {','.join(BASELINES)})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        only = [name.strip() for name in options["only"].split(",")] if options["only"] else None
        try:
            runs = baselines_create(project=project, k=options["k"], only=only, progress=_say)
        except PoolingError as error:
            raise CommandError(f"{error}. No run was stored.") from error
        for run in runs:
            report = run_report(run)
            self.stdout.write(
                f"run {run.name!r}: {report.lines} lines over {report.queries} queries "
                f"({run.source})"
            )


def _say(fraction: float, message: str) -> None:
    sys.stderr.write(f"{fraction:4.0%} {message}\n")
