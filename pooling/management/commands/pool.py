"""``manage.py pool``: the depth-k pool of run files, with provenance; no database involved.

stdout carries the pool and nothing else, so that it can be piped or redirected; the
statistics and the judging budget go to stderr.
"""

from __future__ import annotations

import ctypes
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assay import options as bounded
from formats.trec import FormatError
from pooling.output import format_pool_jsonl, format_pool_trec
from pooling.pooling import Budget, PoolStats, judging_budget, pool_table

FORMATS = {"trec": format_pool_trec, "jsonl": format_pool_jsonl}
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


class Command(BaseCommand):
    help = (
        "Pool the top K documents of every query of the run files (TREC format, gzip or not), "
        "ranked as trec_eval ranks them: score descending (in single precision, as trec_eval "
        "holds it), then docid descending; the rank column is ignored. Writes the pool to "
        "stdout, ordered by qid, best rank, docid, and the pool statistics and the judging "
        "budget to stderr. A broken run file stops it with the file and line (exit status 1)."
    )
    # A file-level command: no database, no project, so no system checks to wait for.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--run",
            action="append",
            required=True,
            metavar="FILE",
            help="a run file, qid Q0 docid rank score tag (repeat for every run); "
            "the path, as given, names the run in the output",
        )
        parser.add_argument(
            "--depth", type=bounded.depth, required=True, metavar="K", help="pool depth"
        )
        parser.add_argument(
            "--format",
            choices=sorted(FORMATS),
            default="trec",
            help="trec (default): the pool as a TREC run, one line 'qid Q0 docid rank score "
            "pool@K' per pair, rank 1, 2, ... within each query and score counting down to 1, "
            "so that any TREC tool (and import_runs) reads the pairs in the pool's order; "
            'jsonl: one line {"qid": ..., "docid": ..., "runs": {"<run path>": rank}} per '
            "pair, rank being the document's 1-based rank in that run (trec_eval order)",
        )
        parser.add_argument(
            "--double-share",
            type=bounded.real_number(0, 1),
            default=0.2,
            metavar="SHARE",
            help="share of the pairs judged twice, for agreement (default 0.2)",
        )
        parser.add_argument(
            "--seconds",
            type=bounded.real_number(0, 86_400),
            default=30.0,
            help="seconds per judgment, for the budget (default 30)",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        # From the command line the process is ours alone, and short-lived: tune its malloc.
        # (call_command, from a long-lived process, does not come this way.)
        keep_freed_memory()
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            # Check the budget's figures before the (possibly long) pooling, not after.
            judging_budget(0, options["double_share"], options["seconds"])
            table = pool_table(options["run"], options["depth"])
        except (FormatError, OSError, ValueError) as error:
            raise CommandError(str(error)) from error
        for block in FORMATS[options["format"]](table):
            self.stdout.write(block, ending="")
        budget = judging_budget(len(table), options["double_share"], options["seconds"])
        report = describe(
            table.stats(),
            budget,
            depth=options["depth"],
            share=options["double_share"],
            seconds=options["seconds"],
        )
        # Not an error: plain text even on a terminal, where stderr would be coloured red.
        self.stderr.write(report, style_func=lambda text: text)


def keep_freed_memory() -> None:
    """Let glibc's malloc keep freed memory for reuse rather than hand it back at once.

    Pooling allocates and frees arrays of a few megabytes for every block of every run.
    By default glibc maps each afresh or trims the heap after it, and every new page then
    costs a page fault: about a third of the pooling time on a virtual machine. The command
    is a short-lived process, so keeping the memory until it exits costs nothing. Where
    the C library has no mallopt (not glibc), nothing changes.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's ceiling for this threshold
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)


def describe(stats: PoolStats, budget: Budget, *, depth: int, share: float, seconds: float) -> str:
    """The pool statistics and the judging budget, as lines for a person to read."""
    width = max((len(run.name) for run in stats.runs), default=3)
    lines = [
        f"pool: depth {depth}, {len(stats.runs)} runs, {stats.n_queries:,} queries, "
        f"{stats.total:,} query-document pairs",
        f"pairs per query: min {stats.per_query_min:,}, mean {stats.per_query_mean:,.1f}, "
        f"max {stats.per_query_max:,}",
        f"  #  {'run':<{width}}  {'pairs':>9}  {'only this run':>13}",
    ]
    number = {run.name: i for i, run in enumerate(stats.runs, start=1)}
    lines.extend(
        f"{number[run.name]:>3}  {run.name:<{width}}  {run.contributed:>9,}  {run.unique:>13,}"
        for run in stats.runs
    )
    if stats.overlap:
        lines.append("overlap between runs: pairs both pooled, Jaccard index (shared / union)")
        lines.extend(
            f"  #{number[a]} & #{number[b]}: {stats.shared.get((a, b), 0):,} shared, "
            f"Jaccard {jaccard:.3f}"
            for (a, b), jaccard in stats.overlap.items()
        )
    lines.append(
        f"judging budget: {budget.judgments:,} judgments + {budget.double_judged:,} "
        f"double-judged ({share:.0%}) = {budget.total_judgments:,} x {seconds:g} s "
        f"= {budget.hours:,.1f} person-hours"
    )
    return "\n".join(lines)
