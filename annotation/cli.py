"""Helpers shared by the management commands that take a project's slug."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError

from formats.text import FormatError

from .models import Project


def project_by_slug(slug: str) -> Project:
    try:
        return Project.objects.get(slug=slug)
    except Project.DoesNotExist:
        raise CommandError(
            f"project {slug!r} does not exist; create it with "
            f"`python manage.py create_project {slug} --name ...`"
        ) from None


@contextmanager
def input_errors(*expected: type[Exception]) -> Iterator[None]:
    """Turn a bad input file into a one-line CommandError (exit 1), not a traceback."""
    try:
        yield
    except (FormatError, OSError, *expected) as error:  # type: ignore[misc]
        raise CommandError(f"{error}. Nothing was imported.") from error
