"""`sample_size`: how many queries a given difference needs, from a pilot's two runs."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assay import options as bounded
from evaluation.cli import add_contract_arguments
from evaluation.comparison import sample_size, sample_size_lines, single_metric
from evaluation.gate import aligned
from evaluation.measures import Contract, evaluate
from formats.trec import FormatError, read_qrels, read_run


class Command(BaseCommand):
    help = (
        "From a pilot (two runs scored on the same qrels), the number of queries needed to "
        "detect a mean paired difference of --effect at --power with a two-sided test at "
        "--alpha: n = ((z_{1-alpha/2} + z_power) * sd / effect)^2, sd the standard deviation "
        "of the pilot's per-query differences; and the difference the pilot's own size detects."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--qrels", metavar="FILE", help="qid 0 docid grade")
        source.add_argument(
            "--release", metavar="SLUG@N", help="instead of --qrels: release N of project SLUG"
        )
        parser.add_argument("--baseline", required=True, metavar="FILE", help="a run file")
        parser.add_argument("--candidate", required=True, metavar="FILE", help="a run file")
        parser.add_argument("--metric", default="ndcg@10", help="one measure (default ndcg@10)")
        add_contract_arguments(parser, relevance="the binary measures")
        parser.add_argument(
            "--effect",
            type=bounded.real_number(1e-6, 1.0),
            metavar="D",
            help="the mean difference to detect (default: the pilot's observed one, or 0.02 "
            "when it observed none)",
        )
        parser.add_argument(
            "--power", type=bounded.real_number(0.5, 0.999), default=0.8, help="default 0.8"
        )
        parser.add_argument(
            "--alpha", type=bounded.real_number(0.0001, 0.5), default=0.05, help="default 0.05"
        )
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        contract = Contract(options["gain"], options["rel_threshold"], options["empty"])
        try:
            metric = single_metric(options["metric"])
            qrels = qrels_of(options)
            base = evaluate(qrels, read_run(options["baseline"]), [metric], contract)
            cand = evaluate(qrels, read_run(options["candidate"]), [metric], contract)
            _, a, b = aligned(base.per_query, cand.per_query, metric)
            result = sample_size(
                b - a, effect=options["effect"], power=options["power"], alpha=options["alpha"]
            )
        except (FormatError, OSError, ValueError) as error:
            raise CommandError(str(error)) from error
        if options["format"] == "json":
            payload = {"metric": metric, **result.as_dict(), "contract": contract.as_dict()}
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            self.stdout.write("\n".join(sample_size_lines(result, metric)))


def qrels_of(options: dict[str, Any]) -> dict[str, dict[str, int]]:
    if not options["release"]:
        return read_qrels(options["qrels"])
    # Imported here: the file-level command works without a database project.
    from evaluation.services_compare import release_from_tag, release_qrels_map

    return release_qrels_map(release=release_from_tag(options["release"]))
