"""``python manage.py sample_queries --log F``: a stratified query sample from a search log.

File level: no database, no models. JSON lines (or a table) on stdout; the ingestion report,
the strata table, privacy counts and the per-stratum draws on stderr.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assay import options as bounded
from sampling.core import (
    ColumnMap,
    DefinitionError,
    EngineSettings,
    LogError,
    LogStats,
    Sample,
    Strata,
    StrataDefinition,
    ingest_log,
    normalise_query,
    parse_quotas,
    sample_queries,
    stratify,
)
from sampling.options import (
    DEFINITION_OPTIONS,
    add_definition_arguments,
    add_statistics_argument,
    definition_from_options,
)


class Command(BaseCommand):
    help = (
        "Stratified sample of queries from a search log (CSV, TSV, JSON lines or Parquet; "
        "gzip accepted): head / torso / tail by share of traffic plus known failures, each "
        "query with its stratum, signals and inclusion probability."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--log", required=True, help="the log file")
        parser.add_argument(
            "--quota",
            default="head=60,torso=90,tail=120,failures=30",
            help="queries per stratum (default: head=60,torso=90,tail=120,failures=30)",
        )
        parser.add_argument(
            "--seed", type=bounded.seed, help="random seed (default: a fresh one, shown)"
        )
        parser.add_argument("--format", choices=("jsonl", "table"), default="jsonl")
        parser.add_argument(
            "--column",
            default="",
            help="field=column renames, e.g. query=q,session_id=sid,clicked=click_url",
        )
        parser.add_argument(
            "--format-in",
            choices=("csv", "tsv", "jsonl", "parquet"),
            help="log format (default: from the file extension)",
        )
        add_statistics_argument(parser)
        add_definition_arguments(parser)
        parser.add_argument(
            "--weighted",
            action="store_true",
            help="sample proportionally to frequency within a stratum (default: uniform)",
        )
        parser.add_argument(
            "--exclude",
            help="file of queries already in the project, one per line: never sampled again",
        )
        parser.add_argument(
            "--definition",
            help="JSON strata definition to reuse (a project's stored one); "
            "excludes --cuts, --failures, --reformulation-window and --mask-pii",
        )
        parser.add_argument(
            "--memory-limit",
            type=bounded.memory_size,
            help="memory DuckDB may hold while reading the log, e.g. 500MB; beyond it, it "
            "spills to disk (default: 500MB)",
        )
        parser.add_argument(
            "--temp-directory",
            help="where DuckDB spills beyond the memory limit (default: a private directory "
            "in the system's temporary directory, deleted afterwards)",
        )
        parser.add_argument(
            "--threads", type=bounded.whole_number(1, 256), help="threads (default: cores, max 4)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            definition = _definition(options)
            quotas = parse_quotas(options["quota"])
            columns = ColumnMap.parse(options["column"])
            exclude = _exclusions(options["exclude"], definition)
        except (ValueError, OSError) as error:
            raise CommandError(str(error)) from error
        seed = options["seed"] if options["seed"] is not None else secrets.randbelow(2**31)
        engine = EngineSettings(
            threads=options["threads"], temp_directory=options["temp_directory"] or None
        )
        if options["memory_limit"]:
            engine = replace(engine, memory_limit=options["memory_limit"])
        try:
            stats = ingest_log(
                options["log"],
                columns=columns,
                log_format=options["format_in"],
                definition=definition,
                engine=engine,
                on_progress=self._progress if options["verbosity"] >= 2 else None,
                statistics=options["statistics"] or None,
            )
        except LogError as error:
            raise CommandError(str(error)) from error
        strata = stratify(stats, definition)
        sample = sample_queries(
            stats, strata, quotas=quotas, seed=seed, weighted=options["weighted"], exclude=exclude
        )
        self._write_sample(sample, options["format"])
        self._write_report(stats, strata, sample, definition)

    def _progress(self, fraction: float, message: str) -> None:
        self.stderr.write(f"[{fraction:4.0%}] {message}")

    def _write_sample(self, sample: Sample, output: str) -> None:
        if output == "jsonl":
            for query in sample.queries:
                self.stdout.write(json.dumps(query.to_json(), ensure_ascii=False))
            return
        self.stdout.write(
            f"{'stratum':<9} {'freq':>8} {'p':>9} {'zero':>5} {'refo':>5} {'aban':>5}  query"
        )
        for query in sample.queries:
            signals = query.signals
            rates = " ".join(
                f"{_rate(v):>5}"
                for v in (
                    signals.zero_result_rate,
                    signals.reformulation_rate,
                    signals.abandonment_rate,
                )
            )
            self.stdout.write(
                f"{query.stratum:<9} {query.frequency:>8} {query.inclusion_probability:>9.3g} "
                f"{rates}  {query.query}"
            )

    def _write_report(
        self, stats: LogStats, strata: Strata, sample: Sample, definition: StrataDefinition
    ) -> None:
        for line in _report_lines(stats, strata, sample, definition):
            self.stderr.write(line)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _definition(options: dict[str, Any]) -> StrataDefinition:
    if options["definition"]:
        if any(options[name] is not None for name in DEFINITION_OPTIONS) or options["mask_pii"]:
            raise CommandError(
                "--definition fixes the strata; drop --cuts, --failures, "
                "--reformulation-window and --mask-pii"
            )
        try:
            return StrataDefinition.from_json(Path(options["definition"]).read_text("utf-8"))
        except (DefinitionError, OSError) as error:
            raise CommandError(f"{options['definition']}: {error}") from error
    return definition_from_options(
        cuts=options["cuts"],
        failures=options["failures"],
        reformulation_window=options["reformulation_window"],
        mask_pii=options["mask_pii"],
    )


def _exclusions(path: str | None, definition: StrataDefinition) -> set[str]:
    if not path:
        return set()
    lines = Path(path).read_text("utf-8").splitlines()
    return {normalise_query(line, definition.normalisation) for line in lines if line.strip()}


def _report_lines(
    stats: LogStats, strata: Strata, sample: Sample, definition: StrataDefinition
) -> list[str]:
    report = stats.report
    lines = []
    if report is not None:
        lines.append(
            f"{'statistics' if report.input == 'statistics' else 'log'}: {report.path} "
            f"({report.log_format}), {report.rows} rows, {report.events} "
            f"events in the statistics, {report.distinct_queries} distinct queries "
            f"({report.distinct_raw_queries} raw forms), {report.seconds:.1f} s"
        )
        lines.append(
            f"skipped: {report.malformed_rows} malformed lines, {report.blank_queries} blank "
            f"queries; {report.invalid_utf8_lines} lines with invalid UTF-8 repaired"
        )
        pii = ", ".join(f"{c.kind} {c.queries} queries / {c.events} events" for c in report.pii)
        action = "excluded" if report.pii_policy == "exclude" else "masked"
        lines.append(f"personal data ({action}): {pii or 'none found'}")
        lines.extend(f"warning: {warning}" for warning in report.warnings)
    lines.extend(f"warning: {warning}" for warning in strata.warnings)
    lines.append(
        f"cuts: head <= {definition.head_share:.1%} of traffic, head+torso <= "
        f"{definition.torso_share:.1%}; cut ranks {strata.cut_ranks[0]} and {strata.cut_ranks[1]}"
    )
    lines.append(f"{'stratum':<9} {'queries':>9} {'traffic':>11} {'share':>7}  frequencies")
    for row in strata.summary:
        span = "-" if row.min_frequency is None else f"{row.min_frequency}..{row.max_frequency}"
        lines.append(f"{row.name:<9} {row.queries:>9} {row.traffic:>11} {row.share:>7.1%}  {span}")
    lines.append(f"sample: seed {sample.seed}, {sample.scheme}")
    for draw in sample.draws:
        short = f", short by {draw.shortfall}" if draw.shortfall else ""
        lines.append(
            f"  {draw.stratum:<9} quota {draw.quota:>4}, drew {draw.drawn:>4} of "
            f"{draw.population} ({draw.excluded} already in the project){short}"
        )
    return lines
