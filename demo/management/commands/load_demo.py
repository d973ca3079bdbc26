from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from demo.loader import demo_load


def login_url(address: str) -> str:
    """The address a browser opens for a server started with runserver's ``addrport``: a bare
    port means 127.0.0.1, and a wildcard host is reachable on this machine as 127.0.0.1."""
    host, _, port = address.rpartition(":")
    if not host:
        host = "127.0.0.1"
    if host in ("0", "0.0.0.0"):
        host = "127.0.0.1"
    if host in ("[::]", "::"):
        host = "[::1]"
    return f"http://{host}:{port}/"


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
        parser.add_argument(
            "--address",
            default="127.0.0.1:8000",
            help="where the server will listen, as runserver takes it (PORT, HOST:PORT or "
            "[IPv6]:PORT); the login banner shows it (default: 127.0.0.1:8000)",
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
        self.stdout.write(f"Log in at {login_url(options['address'])} as:")
        for login in logins:
            self.stdout.write(
                f"  {login.username:<12} {login.role.label:<10} password: {login.password}"
            )
        self.stdout.write("")
