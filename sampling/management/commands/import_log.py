from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from assay import options as bounded
from sampling.core import parse_quotas
from sampling.models import LogStatus, QueryLog
from sampling.options import (
    DEFINITION_OPTIONS,
    add_definition_arguments,
    add_statistics_argument,
    describe_definition,
    requested_definition,
)
from sampling.services import (
    SamplingError,
    accepted_message,
    definition_ignored,
    log_ingest,
    log_queue,
    sample_accept,
    sample_draw,
)


class Command(BaseCommand):
    help = (
        "Ingest a search log into a project's per-query statistics and strata (the raw rows are "
        "not kept). With --quota, also draw a stratified sample; with --accept, add it to the "
        "project's queries. The project's first log fixes its strata definition (--cuts, "
        "--failures, --reformulation-window, --mask-pii); later logs are read with it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("file")
        parser.add_argument("--column", default="", help="mapping, e.g. query=q,session_id=sid")
        add_statistics_argument(parser)
        add_definition_arguments(parser)
        parser.add_argument(
            "--quota",
            help="draw a sample after the ingest, e.g. head=60,torso=90,tail=120,failures=30",
        )
        parser.add_argument(
            "--seed", type=bounded.seed, default=0, help="seed of the draw (default 0)"
        )
        parser.add_argument(
            "--weighted",
            action="store_true",
            help="with --quota: sample proportionally to frequency within a stratum",
        )
        parser.add_argument(
            "--accept", action="store_true", help="with --quota: add the sample to the queries"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        # Checked before the (possibly long) ingest: without a quota nothing is drawn, so
        # these would be silently ignored and the user left believing queries were added.
        if not options["quota"]:
            given = [flag for flag in ("accept", "weighted") if options[flag]]
            if given:
                raise CommandError(
                    f"--{given[0]} needs --quota (no sample is drawn without one); "
                    "nothing was imported"
                )
        try:
            requested = requested_definition(
                **{name: options[name] for name in DEFINITION_OPTIONS}, mask_pii=options["mask_pii"]
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        stored = definition_ignored(project, requested)
        if stored is not None:
            self.stderr.write(
                "note: the project's first log fixed its strata definition; the options given "
                f"are not used. The log is read with: {describe_definition(stored)}."
            )
        query_log = log_queue(
            project=project,
            name=path.name,
            path=path,
            owned=False,  # the user's file: never deleted
            columns=options["column"],
            definition=requested,
            statistics=options["statistics"] or None,
        )
        query_log = log_ingest(log_id=query_log.pk)
        if query_log.status != LogStatus.DONE:
            # The error names the file already. The failed attempt stays in the project's
            # log history (as a failed upload does), holding no statistics.
            raise CommandError(
                f"{query_log.error} No statistics or queries were added; the failed attempt "
                f"is listed among the project's logs (#{query_log.pk})."
            )
        self._write_report(query_log)
        if options["quota"]:
            self._sample(query_log, options)

    def _write_report(self, query_log: QueryLog) -> None:
        for line in report_lines(query_log.report or {}):
            self.stdout.write(line)
        strata = query_log.strata or {}
        for row in strata.get("table", []):
            self.stdout.write(
                f"{row['name']:<9} {row['queries']:>9} queries {row['share']:>7.1%} of traffic"
            )
        for warning in strata.get("warnings", []):
            self.stdout.write(f"warning: {warning}")

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
            for draw in sample.draws:
                short = f", short by {draw['shortfall']}" if draw["shortfall"] else ""
                self.stdout.write(
                    f"  {draw['stratum']:<9} quota {draw['quota']:>4}, drew {draw['drawn']:>4} of "
                    f"{draw['population']} ({draw['excluded']} already in the project){short}"
                )
            if options["accept"]:
                accepted = sample_accept(sample=sample)
                self.stdout.write(accepted_message(accepted, repr(query_log.project.slug)))
        except (SamplingError, ValueError) as error:
            raise CommandError(str(error)) from error


def report_lines(report: dict[str, Any]) -> list[str]:
    """What ingestion read, skipped, repaired and screened, from a stored report."""
    if not report:
        return []
    pii = ", ".join(
        f"{count['kind']} {count['queries']} queries / {count['events']} events"
        for count in report.get("pii", [])
    )
    action = "masked" if report.get("pii_policy") == "mask" else "excluded"
    unit = "rows of statistics" if report.get("input") == "statistics" else "lines"
    lines = [
        f"{report['rows']} {unit} read, {report['events']} events in the statistics, "
        f"{report['distinct_queries']} distinct queries",
        f"skipped: {report['malformed_rows']} malformed lines, {report['blank_queries']} blank "
        f"queries; {report['invalid_utf8_lines']} lines with invalid UTF-8 repaired",
        f"personal data ({action}): {pii or 'none found'}",
    ]
    return lines + [f"warning: {warning}" for warning in report.get("warnings", [])]
