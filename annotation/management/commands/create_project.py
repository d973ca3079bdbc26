from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.services import ProjectError, project_start


class Command(BaseCommand):
    help = (
        "Create a project (its slug is what every other command takes); its protocol editor "
        "opens on a starter draft."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", help="display name (default: the slug)")
        parser.add_argument("--description", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["slug"]
        try:
            project = project_start(
                slug=slug, name=options["name"] or slug, description=options["description"]
            )
        except ProjectError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"created project {project.slug!r}")
