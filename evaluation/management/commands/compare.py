"""`compare`: the paired five-line report and the regression gate, on files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assay import options as bounded
from evaluation.cli import add_contract_arguments
from evaluation.comparison import Side, report_json, single_metric, text_report
from evaluation.gate import (
    SECONDARY,
    gate_report,
    must_never_break,
    read_must_never_break,
)
from evaluation.measures import Contract, RunScores, evaluate, parse_measures
from formats.trec import FormatError, read_qrels, read_run


class Command(BaseCommand):
    help = (
        "Compare a candidate run with a baseline on the same qrels: paired mean difference with "
        "a 95%% interval (paired bootstrap over queries), wins/losses/ties, secondary metrics and "
        "the worst query. Exit 1 when the whole interval is below zero or a must-never-break "
        "query has its gold document below rank 3 in the candidate; otherwise 0."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--qrels", metavar="FILE", help="qid 0 docid grade")
        source.add_argument(
            "--release",
            metavar="SLUG@N",
            help="instead of --qrels: the labels of release N of project SLUG (the same as "
            "its downloaded qrels file); the project's must-never-break list applies unless "
            "--must-never-break names a file",
        )
        parser.add_argument(
            "--baseline", required=True, metavar="FILE", help="the incumbent's run file"
        )
        parser.add_argument(
            "--candidate", required=True, metavar="FILE", help="the candidate's run file"
        )
        parser.add_argument(
            "--metric",
            default="ndcg@10",
            help="the one measure the verdict is on (default ndcg@10): ndcg@K, recall@K, p@K, "
            "hit@K, judged@K, mrr, mrr@K or map; recall@100 and hit@5 are always reported "
            "beside it",
        )
        add_contract_arguments(parser, relevance="the binary measures")
        parser.add_argument(
            "--bootstrap",
            type=bounded.resamples,
            default=10_000,
            metavar="N",
            help="paired bootstrap resamples for the 95%% interval (default 10000); "
            "0: the normal interval mean +/- z*se",
        )
        parser.add_argument(
            "--seed",
            type=bounded.seed,
            default=0,
            help="bootstrap and permutation seed (default 0)",
        )
        parser.add_argument(
            "--must-never-break",
            metavar="FILE",
            help="`qid docid` lines (# starts a comment): the gate fails when the candidate "
            "puts such a document below rank 3 or does not retrieve it",
        )
        parser.add_argument(
            "--format",
            choices=["text", "json"],
            default="text",
            help="text (default): the five-line report and the verdict; json: the same "
            "numbers with the sign test, t-test and permutation test",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        contract = Contract(
            gain=options["gain"], rel_threshold=options["rel_threshold"], empty=options["empty"]
        )
        try:
            metric = single_metric(options["metric"])
            measures = parse_measures([metric, *SECONDARY])
            qrels, eval_set, cases = inputs_of(options)
            base_run, cand_run = read_run(options["baseline"]), read_run(options["candidate"])
        except (FormatError, OSError, ValueError) as error:
            raise CommandError(str(error)) from error
        base = evaluate(qrels, base_run, measures, contract)
        cand = evaluate(qrels, cand_run, measures, contract)
        try:
            report = gate_report(
                base.per_query,
                cand.per_query,
                metric=metric,
                bootstrap=options["bootstrap"],
                seed=options["seed"],
                violations=must_never_break(cases, cand_run),
            )
        except ValueError as error:
            raise CommandError(str(error)) from error
        baseline = side_of(options["baseline"], base)
        candidate = side_of(options["candidate"], cand)
        if options["format"] == "json":
            payload = report_json(report, baseline, candidate, contract)
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            lines = text_report(report, baseline, candidate, contract, eval_set)
            self.stdout.write("\n".join(lines))
        if report.exit_code:
            raise SystemExit(report.exit_code)


def inputs_of(
    options: dict[str, Any],
) -> tuple[dict[str, dict[str, int]], str, list[tuple[str, str]]]:
    """The qrels, the name of the set they are, and the must-never-break cases: from files,
    or from a release of a project and that project's list."""
    path = options["must_never_break"]
    cases = read_must_never_break(path) if path else []
    if not options["release"]:
        return read_qrels(options["qrels"]), Path(options["qrels"]).name, cases
    # Imported here: the file-level command works without a database project.
    from evaluation.services_compare import (
        must_never_break_cases,
        release_from_tag,
        release_qrels_map,
    )

    release = release_from_tag(options["release"])
    if not path:
        cases = must_never_break_cases(project=release.project)
    eval_set = f"{release.project.slug} release {release.number}"
    return release_qrels_map(release=release), eval_set, cases


def side_of(path: str, scores: RunScores) -> Side:
    return Side(Path(path).name, scores.per_query, scores.missing_from_run, scores.no_relevant)
