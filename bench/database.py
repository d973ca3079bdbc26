"""A fresh, migrated PostgreSQL database for a benchmark's child processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def psql(command: str, database: str = "postgres") -> None:
    """Run one statement on the local server, outside any transaction."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=database) as conn:
        conn.autocommit = True
        conn.execute(command)


def fresh_database(name: str) -> dict[str, str]:
    """Drop and create `name`, migrate it; the environment its child processes run with
    (the base settings, DEBUG off, warnings only)."""
    psql(f'DROP DATABASE IF EXISTS "{name}"')
    psql(f'CREATE DATABASE "{name}"')
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{name}",
        SECRET_KEY="bench",
        DEBUG="0",
        DJANGO_SETTINGS_MODULE="assay.settings.base",
        LOG_LEVEL="WARNING",
    )
    manage = [sys.executable, "manage.py", "migrate", "-v0"]
    subprocess.run(manage, cwd=REPO, env=env, check=True)
    return env
