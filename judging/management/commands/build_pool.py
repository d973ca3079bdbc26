from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.cli import input_errors, project_by_slug
from assay import options as bounded
from judging.pools import PoolPlan, pool_plan, pool_write, project_lock
from pooling.models import PoolScope
from pooling.services import PoolingError, new_seed


class Command(BaseCommand):
    help = (
        "Pool the top-k documents of the project's runs (all runs unless --run is given) and "
        "open the pool for judging. Pools only add: pairs already graded keep their judgments "
        "and only pairs nobody has graded become work. --preview says what it would add."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("--depth", type=bounded.depth, default=10)
        parser.add_argument("--run", action="append", default=[], help="run name (repeatable)")
        parser.add_argument("--seed", type=bounded.seed, help="seed of the display order")
        parser.add_argument(
            "--queries",
            choices=PoolScope.values,
            default=PoolScope.ALL,
            help="all: every query of the project; new: only queries no pool holds yet",
        )
        parser.add_argument(
            "--skip-missing",
            action="store_true",
            help="leave out pooled documents that are not in the corpus instead of failing",
        )
        parser.add_argument(
            "--preview", action="store_true", help="say what the pool would add; build nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        runs = list(project.runs.all())
        if options["run"]:
            by_name = {run.name: run for run in runs}
            unknown = sorted(set(options["run"]) - by_name.keys())
            if unknown:
                raise CommandError(
                    f"no run named {', '.join(unknown)}; known: {', '.join(by_name)}"
                )
            runs = [by_name[name] for name in options["run"]]
        seed = options["seed"] if options["seed"] is not None else new_seed()
        with input_errors(PoolingError), transaction.atomic():
            project_lock(project)  # planned and built with no other build in between
            plan = pool_plan(
                project=project,
                runs=runs,
                depth=options["depth"],
                seed=seed,
                scope=options["queries"],
                skip_missing=options["skip_missing"],
            )
            self.stdout.write(_summary(plan, len(runs), options["depth"]))
            if options["preview"]:
                return
            pool = pool_write(
                plan,
                project=project,
                runs=runs,
                depth=options["depth"],
                scope=options["queries"],
                user=None,
            )
        self.stdout.write(f"pool #{pool.pk} built and open for judging")


def _summary(plan: PoolPlan, runs: int, depth: int) -> str:
    lines = [
        f"depth {depth}, {runs} runs: {plan.selected} pairs selected, {plan.added} new, "
        f"{plan.judged_before} already judged (they keep their judgments)",
        f"to judge: {plan.to_judge} pairs in {plan.queries} queries "
        f"({plan.carried_count} carried from the previous pool); "
        f"{plan.double_drawn} new queries judged twice, {plan.double_before} from earlier pools",
        f"judgments needed: {plan.judgments_needed} "
        f"(at {plan.seconds_per_judgment:.0f} s each: {plan.hours:.1f} person-hours)",
    ]
    if plan.selection.missing:
        examples = ", ".join(plan.selection.missing[:5])
        lines.append(f"left out, not in the corpus: {len(plan.selection.missing)} ({examples})")
    return "\n".join(lines)
