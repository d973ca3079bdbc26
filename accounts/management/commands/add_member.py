from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import (
    AccountError,
    SignInLink,
    member_invite,
    signin_link,
    signin_link_refusal,
)
from annotation.cli import project_by_slug
from annotation.models import Project, Role
from annotation.services import membership_set


class Command(BaseCommand):
    help = (
        "Give a user a role (annotator or lead) in a project. With --create, a username "
        "nobody has yet gets a new account without a password, and a one-time sign-in link "
        "is printed (also a fresh one for an account that has never set a password)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("username")
        parser.add_argument("--role", choices=[r.value for r in Role], default=Role.ANNOTATOR)
        parser.add_argument(
            "--create",
            action="store_true",
            help="create the account if it does not exist and print its one-time sign-in link",
        )
        parser.add_argument(
            "--base-url",
            default="",
            help="the site's address for the link, e.g. https://assay.example "
            "(default: ASSAY_BASE_URL)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        role, username = Role(options["role"]), options["username"]
        user = User.objects.filter(username=username).first()
        if not options["create"]:
            if user is None:
                raise CommandError(
                    f"no user {username!r}; add --create to make the account and print a "
                    "one-time sign-in link, or create it in the admin"
                )
            membership_set(project=project, user=user, role=role)
            self.stdout.write(f"{user.get_username()} is now {role} in {project.slug!r}")
            return
        base = (options["base_url"] or settings.ASSAY_BASE_URL).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise CommandError(
                "--create prints a link: give the site's address with --base-url "
                "https://assay.example or set ASSAY_BASE_URL (nothing was changed)"
            )
        try:
            link = self._link(project=project, username=username, role=role, user=user)
        except AccountError as error:
            raise CommandError(f"{error} (nothing was changed)") from None
        self.stdout.write(f"{username} is now {role} in {project.slug!r}")
        if link is None:
            self.stdout.write("the account signs in with its password; no link is needed")
            return
        expires = link.expires_at.strftime("%Y-%m-%d %H:%M %Z")
        self.stdout.write(f"one-time sign-in link (works once, until {expires}; not stored):")
        self.stdout.write(base + link.path)

    def _link(
        self, *, project: Project, username: str, role: Role, user: User | None
    ) -> SignInLink | None:
        if user is None:
            return member_invite(project=project, username=username, role=role)
        refusal = "" if user.has_usable_password() else signin_link_refusal(by=None, user=user)
        if refusal:
            raise AccountError(refusal)
        membership_set(project=project, user=user, role=role)
        if user.has_usable_password():
            return None
        return signin_link(user=user, project=project)
