from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from annotation.models import Role
from annotation.services import membership_set


class Command(BaseCommand):
    help = "Give a user a role (annotator or lead) in a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("username")
        parser.add_argument("--role", choices=[r.value for r in Role], default=Role.ANNOTATOR)

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        user_model = get_user_model()
        try:
            user = user_model.objects.get(username=options["username"])
        except user_model.DoesNotExist:
            raise CommandError(
                f"no user {options['username']!r}; create it in the admin or with "
                "`python manage.py createsuperuser`"
            ) from None
        membership_set(project=project, user=user, role=Role(options["role"]))
        self.stdout.write(f"{user.get_username()} is now {options['role']} in {project.slug!r}")
