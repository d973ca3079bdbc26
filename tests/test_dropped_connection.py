"""A database connection dropped between two requests (a restart, a failover, a terminated
backend) costs no request a 500: the kept connection is checked once per request and replaced."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connection
from django.test import Client
from django.urls import reverse

from annotation.models import Role
from annotation.services import membership_set
from judging.models import Judgment
from tests.conftest import make_user, small_project
from tests.judging_helpers import answer, judge_page

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def kept_connections() -> Iterator[None]:
    """Connections kept between requests, as in production (`CONN_MAX_AGE`)."""
    if connection.vendor != "postgresql":
        pytest.skip("terminating a backend is a PostgreSQL operation")
    connection.close()  # the next one opens with the settings below
    before = connection.settings_dict["CONN_MAX_AGE"]
    connection.settings_dict["CONN_MAX_AGE"] = 60
    yield
    connection.settings_dict["CONN_MAX_AGE"] = before
    connection.close()


def terminate_backend() -> None:
    """What a database restart does to the connection the next request would reuse; then the
    start of a request as the server's handler begins it (the test client leaves this out):
    `close_old_connections`, which is where a kept connection is marked for a health check."""
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    close_old_connections()


def test_health_checks_are_on_by_default(kept_connections: None) -> None:
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is True


def test_the_request_after_a_dropped_connection_succeeds(kept_connections: None) -> None:
    project = small_project()
    alice = make_user("alice")
    membership_set(project=project, user=alice, role=Role.ANNOTATOR)
    client = Client()
    client.force_login(alice)
    page = judge_page(client, project.slug)
    assert connection.connection is not None  # kept after the request
    terminate_backend()
    answer(client, project.slug, page, 2)  # 200, not a 500
    assert Judgment.objects.filter(user=alice).count() == 1
    terminate_backend()
    assert client.get(reverse("judge", args=[project.slug])).status_code == 200
