"""``manage.py evaluate``: score run files against qrels under a stated metric contract.

Files in, numbers out: no database, no project. The measures are computed by
:mod:`evaluation.measures`; this module only parses arguments and formats the result.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.cli import add_contract_arguments
from evaluation.measures import Contract, RunScores, evaluate_files, parse_measures
from formats.trec import FormatError

DEFAULT_METRICS = "ndcg@10,recall@100,mrr,map,p@10,hit@5"
COUNTS = ("scored", "skipped_no_relevant", "missing_from_run")


class Command(BaseCommand):
    help = (
        "Score TREC runs against TREC qrels (gzip accepted) and print the metric contract with "
        "the scores. Measures: ndcg@K, recall@K, p@K, hit@K, judged@K, mrr, mrr@K, map. "
        "Runs are ordered as trec_eval orders them (score descending, then docid descending), "
        "so --gain linear --empty zero reproduces trec_eval -c to the last digit."
    )
    # A file-level command: no database, no project, so no system checks to wait for.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--qrels", required=True, metavar="FILE", help="qid 0 docid grade")
        parser.add_argument(
            "--run",
            action="append",
            required=True,
            metavar="FILE",
            help="a run file, qid Q0 docid rank score tag (repeat for more runs); the path, "
            "as given, names the run in the output",
        )
        parser.add_argument(
            "--metrics",
            default=DEFAULT_METRICS,
            help=f"comma-separated measure names (default {DEFAULT_METRICS})",
        )
        add_contract_arguments(
            parser, relevance="recall, p, hit, mrr, map; nDCG always uses the grades"
        )
        parser.add_argument(
            "--per-query",
            action="store_true",
            help="also print every query's values in table and csv (json always has them)",
        )
        parser.add_argument(
            "--format",
            choices=["table", "json", "csv"],
            default="table",
            help="table (default): the contract, then aligned columns with 4 decimals; "
            'json: {"contract": {...}, "runs": {"<run>": {"mean": {...}, "per_query": {...}, '
            '"queries": {...}}}}; csv: one row per run, '
            "and one per query with --per-query",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            contract = Contract(options["gain"], options["rel_threshold"], options["empty"])
            measures = parse_measures(options["metrics"])
            check_distinct(options["run"])
            scores = evaluate_files(options["qrels"], options["run"], measures, contract)
        except (FormatError, ValueError) as error:
            raise CommandError(str(error)) from error
        except OSError as error:
            raise CommandError(f"{error.filename}: {error.strerror}") from error
        render = {"table": render_table, "json": render_json, "csv": render_csv}
        text = render[options["format"]](scores, measures, contract, options["per_query"])
        self.stdout.write(text, ending="")


def check_distinct(runs: list[str]) -> None:
    """The path names the run in every format, so a run given twice would be scored once."""
    seen: set[str] = set()
    for run in runs:
        if run in seen:
            raise ValueError(f"run name {run!r} is given twice; each run needs its own")
        seen.add(run)


def cutoffs(measures: list[str]) -> list[int]:
    return sorted({int(m.split("@")[1]) for m in measures if "@" in m})


def contract_dict(contract: Contract, measures: list[str]) -> dict[str, object]:
    return {**contract.as_dict(), "measures": measures, "cutoffs": cutoffs(measures)}


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value  # JSON has no NaN: a mean of no query


def render_json(
    scores: dict[str, RunScores], measures: list[str], contract: Contract, per_query: bool
) -> str:
    runs: dict[str, object] = {}
    for name, run in scores.items():
        entry: dict[str, object] = {"mean": {m: _number(v) for m, v in run.mean.items()}}
        # Always in JSON, as the contract's shape shows it: pipelines read per-query values
        # (for their own paired tests) without having to know about a flag.
        entry["per_query"] = run.per_query
        entry["queries"] = {count: getattr(run, count) for count in COUNTS}
        runs[name] = entry
    document = {"contract": contract_dict(contract, measures), "runs": runs}
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def render_csv(
    scores: dict[str, RunScores], measures: list[str], contract: Contract, per_query: bool
) -> str:
    """A row per run (empty qid) with its mean and counts; with per_query, a row per query."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "qid", "gain", "rel_threshold", "empty", *COUNTS, *measures])
    terms = [contract.gain, contract.rel_threshold, contract.empty]
    for name, run in scores.items():
        counts = [getattr(run, count) for count in COUNTS]
        writer.writerow([name, "", *terms, *counts, *(_csv_value(run.mean[m]) for m in measures)])
        if per_query:
            for qid, values in run.per_query.items():
                row = [name, qid, *terms, "", "", "", *(repr(values[m]) for m in measures)]
                writer.writerow(row)
    return out.getvalue()


def _csv_value(value: float) -> str:
    return "" if math.isnan(value) else repr(value)


def render_table(
    scores: dict[str, RunScores], measures: list[str], contract: Contract, per_query: bool
) -> str:
    lines = describe_contract(contract, measures, next(iter(scores.values())))
    header = ["run", *COUNTS, *measures]
    rows = [
        [name, *(str(getattr(run, c)) for c in COUNTS), *(_cell(run.mean[m]) for m in measures)]
        for name, run in scores.items()
    ]
    lines += ["", *_aligned([header, *rows])]
    if per_query:
        for name, run in scores.items():
            per = [
                [qid, *(_cell(values[m]) for m in measures)]
                for qid, values in run.per_query.items()
            ]
            lines += ["", f"per query: {name}", *_aligned([["qid", *measures], *per])]
    return "\n".join(lines) + "\n"


def describe_contract(contract: Contract, measures: list[str], run: RunScores) -> list[str]:
    """The header block: every choice that changes the numbers below it."""
    terms = contract.as_dict()
    treated = "skipped" if contract.empty == "skip" else "scored 0"
    total = run.scored + run.skipped_no_relevant
    no_rel = (
        f"{treated}: {run.no_relevant} of the {total} qrels queries have no document "
        f"with grade >= {contract.rel_threshold}"
    )
    pairs = [
        ("gain", f"{contract.gain}: {terms['gain_formula']}, discount {terms['discount']}"),
        ("ideal DCG", str(terms["ideal"])),
        ("relevant", str(terms["relevant"])),
        ("cutoffs", ", ".join(str(k) for k in cutoffs(measures)) or "none"),
        ("no relevant", no_rel),
        ("missing", "queries of the qrels absent from a run score 0 and count"),
        ("ties", str(terms["ties"])),
        ("judged@k", "judged documents (any grade) in the top k / min(k, retrieved)"),
    ]
    return ["metric contract", *(f"  {key:<12} {value}" for key, value in pairs)]


def _cell(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def _aligned(rows: list[list[str]]) -> list[str]:
    """Left-aligned first column, right-aligned numbers."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
