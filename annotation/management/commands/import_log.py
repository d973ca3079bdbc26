from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from annotation.models import LogStatus, QueryLog
from annotation.sampling import check_seed, parse_quotas
from annotation.services_sampling import (
    SamplingError,
    accepted_message,
    log_ingest,
    sample_accept,
    sample_draw,
)


class Command(BaseCommand):
    help = (
        "Ingest a search log into a project's per-query statistics and strata (the raw rows are "
        "not kept). With --quota, also draw a stratified sample; with --accept, add it to the "
        "project's queries."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("file")
        parser.add_argument("--column", default="", help="mapping, e.g. query=q,session_id=sid")
        parser.add_argument("--quota", help="e.g. head=60,torso=90,tail=120,failures=30")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--weighted", action="store_true")
        parser.add_argument("--accept", action="store_true", help="add the sample to the queries")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        try:
            check_seed(options["seed"], "--seed")
        except ValueError as error:
            raise CommandError(str(error)) from None
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        query_log = QueryLog.objects.create(
            project=project, name=path.name, columns=options["column"]
        )
        query_log = log_ingest(log_id=query_log.pk, path=path)
        if query_log.status != LogStatus.DONE:
            raise CommandError(f"{path}: {query_log.error} Nothing was added to the project.")
        for row in (query_log.strata or {}).get("table", []):
            self.stdout.write(
                f"{row['name']:<9} {row['queries']:>9} queries {row['share']:>7.1%} of traffic"
            )
        if options["quota"]:
            self._sample(query_log, options)

    def _sample(self, query_log: QueryLog, options: dict[str, Any]) -> None:
        try:
            quotas = parse_quotas(options["quota"])
            sample = sample_draw(
                query_log=query_log,
                quotas=quotas,
                seed=options["seed"],
                weighted=options["weighted"],
            )
            self.stdout.write(f"sample #{sample.pk}: {len(sample.drawn)} queries")
            if options["accept"]:
                accepted = sample_accept(sample=sample)
                self.stdout.write(accepted_message(accepted, repr(query_log.project.slug)))
        except (SamplingError, ValueError) as error:
            raise CommandError(str(error)) from error
