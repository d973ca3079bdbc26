"""Test settings: the same as production but fast hashing and eager Celery by default.

`DATABASE_URL` still chooses the database, so the suite runs on SQLite by default and on
PostgreSQL in CI. Integration tests that need a real worker start one themselves.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "assay-tests-only")

from .base import *  # noqa: F403
from .base import DATABASES, STORAGES

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
ALLOWED_HOSTS = ["*"]
CELERY_TASK_ALWAYS_EAGER = True
JOB_RETRY_BACKOFF = 0  # a transient failure is retried at once in tests
LLM_BACKOFF_MS = 10  # an LLM call retried after 10 ms, 20 ms, ...
LLM_BACKOFF_CAP = 1  # and a Retry-After of the endpoint capped at 1 s
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not :memory:, so that a Celery worker or a live server in another process sees the
    # same test database; one per test process, so that two test runs never share it.
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"assay-test-{os.getpid()}.sqlite3")
    }
