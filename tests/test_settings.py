"""Settings read the environment through typed helpers that fail loudly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from assay.settings.env import env_bool, env_int, env_list, parse_database_url

REPO = Path(__file__).resolve().parents[1]


def test_it_parses_postgres_urls() -> None:
    config = parse_database_url(
        "postgres://u:p%40ss@db.example:6543/assay?sslmode=require", base_dir=REPO
    )
    assert config == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "assay",
        "USER": "u",
        "PASSWORD": "p@ss",
        "HOST": "db.example",
        "PORT": "6543",
        "OPTIONS": {"sslmode": "require"},
    }
    assert parse_database_url("postgresql://h/db", base_dir=REPO)["PORT"] == "5432"


def test_it_parses_sqlite_urls() -> None:
    assert parse_database_url("sqlite:///db.sqlite3", base_dir=REPO)["NAME"] == str(
        REPO / "db.sqlite3"
    )
    assert parse_database_url("sqlite:////tmp/x.db", base_dir=REPO)["NAME"] == "/tmp/x.db"
    assert parse_database_url("sqlite:///:memory:", base_dir=REPO)["NAME"] == ":memory:"


@pytest.mark.parametrize(
    "url", ["mysql://h/db", "postgres://h", "postgres://h:notaport/db", "sqlite:///", "nonsense"]
)
def test_it_rejects_database_urls_it_cannot_use(url: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        parse_database_url(url, base_dir=REPO)


def test_it_fails_loudly_on_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "maybe")
    monkeypatch.setenv("X_INT", "ten")
    with pytest.raises(ImproperlyConfigured, match="X_BOOL"):
        env_bool("X_BOOL", False)
    with pytest.raises(ImproperlyConfigured, match="X_INT"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "-3")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int("X_INT", 1, minimum=0)
    monkeypatch.setenv("X_LIST", " a.example, ,b.example ")
    assert env_list("X_LIST", []) == ["a.example", "b.example"]
    monkeypatch.setenv("X_BOOL", "Yes")
    assert env_bool("X_BOOL", False) is True


def load_settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Import the production settings in a fresh interpreter with exactly this environment."""
    script = (
        "import json; from assay.settings import base as s; "
        "print(json.dumps({'debug': s.DEBUG, 'eager': s.CELERY_TASK_ALWAYS_EAGER, "
        "'engine': s.DATABASES['default']['ENGINE'], 'hosts': s.ALLOWED_HOSTS, "
        "'broker': s.CELERY_BROKER_URL, 'openai': s.OPENAI_BASE_URL}))"
    )
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
    )


def test_it_refuses_to_start_without_a_secret_key_in_production() -> None:
    result = load_settings(DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_it_uses_development_defaults_only_in_debug() -> None:
    result = load_settings(DEBUG="1")
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings == {
        "debug": True,
        "eager": True,  # no broker: tasks run in-process
        "engine": "django.db.backends.sqlite3",
        "hosts": ["127.0.0.1", "localhost"],
        "broker": None,
        "openai": None,
    }


def test_it_reads_production_settings_from_the_environment() -> None:
    result = load_settings(
        SECRET_KEY="s" * 50,
        ALLOWED_HOSTS="assay.example",
        DATABASE_URL="postgres://assay:pw@db:5432/assay",
        CELERY_BROKER_URL="redis://redis:6379/0",
        OPENAI_BASE_URL="http://127.0.0.1:9999/v1",
    )
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["debug"] is False and settings["eager"] is False
    assert settings["engine"] == "django.db.backends.postgresql"
    assert settings["hosts"] == ["assay.example"]
    assert settings["broker"] == "redis://redis:6379/0"
    assert settings["openai"] == "http://127.0.0.1:9999/v1"


def test_it_rejects_a_malformed_debug_flag() -> None:
    result = load_settings(DEBUG="sometimes")
    assert result.returncode != 0 and "DEBUG='sometimes' is not a boolean" in result.stderr


def test_it_answers_the_health_probe(db: None) -> None:
    from django.test import Client

    response = Client().get("/healthz")
    assert response.status_code == 200 and response.content == b"ok\n"


def test_it_answers_the_health_probe_whatever_the_host_and_scheme(db: None, settings) -> None:
    # Behind a TLS proxy the site lists only its public name and redirects HTTP to HTTPS; the
    # container's own probe still reaches the database and gets its 200.
    from django.test import Client

    settings.ALLOWED_HOSTS = ["assay.example.org"]
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    assert client.get("/", HTTP_HOST="127.0.0.1:8000").status_code == 400  # the rest is guarded


def test_it_takes_the_log_level_in_any_case_and_refuses_an_unknown_one() -> None:
    script = "from assay.settings import base as s; print(s.LOGGING['root']['level'])"
    env = {"PATH": os.environ["PATH"], "SECRET_KEY": "s" * 50}

    def run(level: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env={**env, "LOG_LEVEL": level},
            capture_output=True,
            text=True,
        )

    lower = run("debug")
    assert lower.returncode == 0 and lower.stdout.strip() == "DEBUG", lower.stderr
    unknown = run("loud")
    assert unknown.returncode != 0
    assert "LOG_LEVEL='LOUD' is not a log level" in unknown.stderr


def make_run_commands(*args: str, **env: str) -> list[str]:
    """The commands `make run` would run (make -n), with this environment."""
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    result = subprocess.run(
        ["make", "-n", "-s", "run", *args],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_make_run_serves_where_it_is_told_and_ignores_a_host_name_in_the_environment() -> None:
    runserver = "DEBUG=1 .venv/bin/python manage.py runserver"
    assert make_run_commands()[-1] == f"{runserver} 127.0.0.1:8000"
    assert make_run_commands("HOST=127.0.0.1:8001")[-1] == f"{runserver} 127.0.0.1:8001"
    # tcsh exports the machine's name as HOST; runserver would refuse it.
    assert make_run_commands(HOST="buildbox")[-1] == f"{runserver} 127.0.0.1:8000"
