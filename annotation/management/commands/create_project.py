from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Project
from annotation.services import project_create


class Command(BaseCommand):
    help = "Create a project (its slug is what every other command takes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", help="display name (default: the slug)")
        parser.add_argument("--description", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["slug"]
        if Project.objects.filter(slug=slug).exists():
            raise CommandError(f"project {slug!r} exists already")
        project = project_create(
            slug=slug, name=options["name"] or slug, description=options["description"]
        )
        self.stdout.write(f"created project {project.slug!r}")
