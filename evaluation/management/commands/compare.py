"""`compare`: the paired five-line report and the regression gate, on files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assay import options as bounded
from evaluation.cli import add_contract_arguments
from evaluation.gate import (
    SECONDARY,
    GateReport,
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
        parser.add_argument("--qrels", required=True, metavar="FILE", help="qid 0 docid grade")
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
            qrels = read_qrels(options["qrels"])
            base_run, cand_run = read_run(options["baseline"]), read_run(options["candidate"])
            cases = (
                read_must_never_break(options["must_never_break"])
                if options["must_never_break"]
                else []
            )
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
        if options["format"] == "json":
            payload = report.as_dict() | {"contract": contract.as_dict()}
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            self.stdout.write("\n".join(text_report(report, base, contract, options)))
        if report.exit_code:
            raise SystemExit(report.exit_code)


def single_metric(text: str) -> str:
    """The verdict is on one measure: refuse a list rather than silently keep its first."""
    names = parse_measures(text)
    if len(names) != 1:
        raise ValueError(
            f"--metric takes one measure, not {len(names)} ({', '.join(names)}); "
            "recall@100 and hit@5 are reported beside it anyway"
        )
    return names[0]


def text_report(
    report: GateReport, base: RunScores, contract: Contract, options: dict[str, Any]
) -> list[str]:
    """The five lines of chapter 5, then the verdict and any must-never-break violation."""
    s = report.comparison.summary
    gain = "2^rel-1" if contract.gain == "exponential" else "rel"
    empty = "skipped" if contract.empty == "skip" else "scored 0"
    lo, hi = report.ci
    second = "  ·  ".join(
        f"{x.metric} {x.mean_diff:+.3f} (CI {x.ci[0]:+.3f} to {x.ci[1]:+.3f})"
        for x in report.secondary
    )
    worst = report.worst_query()
    worst_text = f"worst query {worst['qid']} {worst['diff']:+.2f}" if worst else ""
    candidate, baseline = Path(options["candidate"]).name, Path(options["baseline"]).name
    lines = [
        f"candidate  {candidate}  vs incumbent  {baseline}",
        f"eval       {Path(options['qrels']).name} · {s.n} queries",
        f"metric     {report.metric} · gain {gain} · rel>={contract.rel_threshold} for binary · "
        f"{base.no_relevant} queries with no relevant docs {empty} · "
        f"{base.missing_from_run} missing from the baseline run scored 0",
        f"result     paired mean {s.mean:+.3f}  (95% CI {lo:+.3f} to {hi:+.3f}, {report.ci_method})"
        f"  ·  wins {s.wins} / losses {s.losses} / ties {s.ties}",
        f"secondary  {second}  ·  {worst_text}",
        f"verdict    {report.verdict}"
        + ("  (the interval straddles zero)" if report.verdict == "inconclusive" else ""),
    ]
    for v in report.violations:
        where = f"at rank {v.rank}" if v.rank else "not retrieved"
        lines.append(f"BROKEN     must-never-break {v.qid}: gold {v.docid} {where} (must be <= 3)")
    return lines
