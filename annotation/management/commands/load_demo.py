from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotation.demo.loader import demo_load


class Command(BaseCommand):
    help = (
        "Create the demo project (a fictional help centre, three baseline runs, a depth-10 pool) "
        "if it is missing, and print fresh passwords for its three users."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--password",
            default=os.environ.get("DEMO_PASSWORD"),
            help="one password for all demo users (default: $DEMO_PASSWORD, else random)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project, logins = demo_load(password=options["password"])
        pool = project.pools.first()
        items = pool.items.count() if pool else 0
        self.stdout.write(
            f"\nDemo project {project.name!r}: {project.documents.count()} documents, "
            f"{project.queries.count()} queries, {project.runs.count()} runs, "
            f"{items} items to judge."
        )
        self.stdout.write("Log in at http://127.0.0.1:8000/ as:")
        for login in logins:
            self.stdout.write(
                f"  {login.username:<12} {login.role.label:<10} password: {login.password}"
            )
        self.stdout.write("")
