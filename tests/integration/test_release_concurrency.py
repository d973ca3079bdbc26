"""Leads cutting releases at once on PostgreSQL get distinct numbers: 1, 2, 3, 4, never two
of one number (the number is taken under the project's lock)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.db import connection

from evaluation.models import Release
from evaluation.services_release import release_create
from tests.release_world import release_world

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LEADS = 4


def test_leads_cutting_releases_at_once_get_distinct_numbers(tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are only exercised on PostgreSQL")
    world = release_world(tmp_path)
    start, errors = threading.Barrier(LEADS), []

    def cut() -> None:
        try:
            start.wait()
            release_create(project=world.project, policy="adjudicated", start_rescore=False)
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=cut) for _ in range(LEADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    releases = Release.objects.filter(project=world.project).order_by("number")
    assert [r.number for r in releases] == list(range(1, LEADS + 1))
    assert len({r.content_hash for r in releases}) == 1
    assert all(r.labels.count() == 32 for r in releases)
