"""A real Celery worker on Redis, sharing the test database, for integration tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.db import connection

from assay.celery import app

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def redis_is_up() -> bool:
    parts = urlsplit(REDIS_URL)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 1):
            return True
    except OSError:
        return False


def database_url_of_test_db() -> str:
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        name = str(settings["NAME"])
        if name == ":memory:" or name.startswith("file:"):
            pytest.skip("the worker cannot share an in-memory SQLite test database")
        return f"sqlite:///{Path(name).resolve()}"
    user, password = settings["USER"] or "", settings["PASSWORD"] or ""
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    return f"postgres://{auth}{host}:{port}/{settings['NAME']}"


@pytest.fixture
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if not redis_is_up():
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    media = tmp_path_factory.mktemp("media")
    settings.MEDIA_ROOT = media  # uploads land where the worker looks for them
    env = dict(os.environ, DATABASE_URL=database_url_of_test_db(), CELERY_BROKER_URL=REDIS_URL)
    env["MEDIA_ROOT"] = str(media)
    env["DJANGO_SETTINGS_MODULE"] = "assay.settings.base"
    env.setdefault("SECRET_KEY", "worker-in-tests")
    app.conf.update(broker_url=REDIS_URL, task_always_eager=False)
    _drop_connections()
    app.connection_for_write().default_channel.client.flushdb()  # no stale tasks of earlier runs
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "assay",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--loglevel=WARNING",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=REPO,
        env=env,
    )
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=20)
        app.conf.update(task_always_eager=True)
        _drop_connections()


def _drop_connections() -> None:
    # Celery caches its connection and producer pools on first use; an earlier test may have
    # created them for another broker setting, so drop them as Celery does after a fork.
    app._after_fork()


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError("the worker did not finish in time")
