from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import input_errors, project_by_slug
from assay import options as bounded
from judging.services import pool_open
from pooling.pooling import judging_budget
from pooling.services import PoolingError


class Command(BaseCommand):
    help = "Pool the top-k documents of the project's runs (all runs unless --run is given)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("--depth", type=bounded.depth, default=10)
        parser.add_argument("--run", action="append", default=[], help="run name (repeatable)")
        parser.add_argument("--seed", type=bounded.seed, help="seed of the display order")
        parser.add_argument(
            "--skip-missing",
            action="store_true",
            help="leave out pooled documents that are not in the corpus instead of failing",
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
        with input_errors(PoolingError):
            pool = pool_open(
                project=project,
                runs=runs,
                depth=options["depth"],
                seed=options["seed"],
                skip_missing=options["skip_missing"],
            )
        size = pool.items.count()
        budget = judging_budget(size)
        self.stdout.write(
            f"pool #{pool.pk}: depth {pool.depth}, {len(runs)} runs, {size} pairs to judge "
            f"(with 20% double-judged at 30 s each: {budget.hours:.1f} person-hours)"
        )
