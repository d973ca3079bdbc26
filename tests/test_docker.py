"""The container set-up under docker/, checked without a Docker engine.

compose.yaml is read the way Compose reads it (``${VAR:-default}`` and ``${VAR:?error}``
resolved) and its environment is handed to the project's own settings, so a drift between the
two fails here rather than at ``docker compose up``. The entry point runs against stub
``python``/``granian``/``celery`` commands that record how they were called.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.parse
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from assay.settings.env import parse_database_url

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
ENTRYPOINT = DOCKER / "entrypoint.sh"
APP_SERVICES = ("web", "worker")
DUMMY_KEY = "not-a-real-key-only-for-this-test"


# --- Reading the files -------------------------------------------------------------------------


@cache
def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text("utf-8"))


def services() -> dict[str, Any]:
    return compose()["services"]


_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: str, variables: Mapping[str, str]) -> str:
    """Compose's substitution: ``$$``, ``$X``, ``${X}``, ``${X:-default}``, ``${X:?error}``."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, argument = match.group(2), match.group(3)
        current = variables.get(name)
        missing = current is None or (current == "" and operator in (":-", ":?"))
        if operator in ("?", ":?") and missing:
            raise LookupError(f"{name}: {argument}")
        if operator in ("-", ":-") and missing:
            return argument
        return current or ""

    return _VARIABLE.sub(substitute, value)


def service_env(service: str, variables: Mapping[str, str]) -> dict[str, str]:
    environment = services()[service]["environment"]
    assert isinstance(environment, dict), f"{service}: environment must be a mapping"
    return {name: interpolate(str(value), variables) for name, value in environment.items()}


def names_read_by_settings() -> set[str]:
    source = (REPO / "assay" / "settings" / "base.py").read_text("utf-8")
    return set(re.findall(r'env_(?:str|bool|int|list)\("([A-Z0-9_]+)"', source))


def names_read_by_entrypoint() -> set[str]:
    return set(re.findall(r"\$\{([A-Z0-9_]+):-", ENTRYPOINT.read_text("utf-8")))


@cache
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", (DOCKER / "Dockerfile").read_text("utf-8"))
    instructions = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, arguments = line.strip().partition(" ")
            instructions.append((keyword.upper(), " ".join(arguments.split())))
    return instructions


def instruction(keyword: str) -> list[str]:
    return [arguments for name, arguments in dockerfile() if name == keyword]


def dockerfile_env() -> dict[str, str]:
    return dict(item.split("=", 1) for args in instruction("ENV") for item in shlex.split(args))


def copied_sources() -> list[str]:
    return [source for args in instruction("COPY") for source in args.split()[:-1]]


def settings_in_subprocess(env: Mapping[str, str], *names: str) -> dict[str, Any]:
    probe = (
        "import json\nfrom django.conf import settings\n"
        f"names = {list(names)!r}\n"
        "print(json.dumps({n: getattr(settings, n, None) for n in names}, default=str))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def container_env(**variables: str) -> dict[str, str]:
    """What the web container sees: the image's ENV under compose's environment."""
    image = {**dockerfile_env(), "PYTHONPATH": str(REPO)}
    return {**image, **service_env("web", {"SECRET_KEY": DUMMY_KEY, **variables})}


# --- compose.yaml ------------------------------------------------------------------------------


def test_it_declares_the_five_services_and_no_version_key() -> None:
    assert set(services()) == {"postgres", "redis", "web", "worker", "beat"}
    assert "version" not in compose()


def test_it_checks_the_health_of_postgres_and_redis() -> None:
    assert "pg_isready" in str(services()["postgres"]["healthcheck"]["test"])
    assert services()["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


@pytest.mark.parametrize("service", APP_SERVICES)
def test_it_starts_the_app_only_once_postgres_and_redis_are_healthy(service: str) -> None:
    depends_on = services()[service]["depends_on"]
    assert set(depends_on) == {"postgres", "redis"}
    assert all(dep["condition"] == "service_healthy" for dep in depends_on.values())


def test_it_keeps_the_database_in_a_named_volume() -> None:
    mounts = [str(volume).split(":") for volume in services()["postgres"]["volumes"]]
    named = [source for source, target in mounts if target == "/var/lib/postgresql/data"]
    assert len(named) == 1
    assert named[0] in compose()["volumes"]


def test_it_builds_web_and_worker_from_the_repository_dockerfile() -> None:
    for service in APP_SERVICES:
        build = services()[service]["build"]
        assert (DOCKER / build["context"]).resolve() == REPO
        assert (REPO / build["dockerfile"]).resolve() == (DOCKER / "Dockerfile").resolve()
    assert services()["web"]["command"] == ["web"]
    assert services()["worker"]["command"] == ["worker"]
    assert services()["web"]["ports"] == ["127.0.0.1:8000:8000"]


def test_it_does_not_probe_a_web_server_in_the_worker() -> None:
    assert services()["worker"]["healthcheck"] == {"disable": True}


def test_it_runs_one_beat_for_the_job_reaper_with_the_workers_environment() -> None:
    beat = services()["beat"]
    assert beat["command"] == ["beat"] and beat["healthcheck"] == {"disable": True}
    assert "replicas" not in beat.get("deploy", {})
    env = {"SECRET_KEY": DUMMY_KEY}
    assert service_env("beat", env) == service_env("worker", env)
    assert "beat)" in (DOCKER / "entrypoint.sh").read_text()


def test_it_gives_web_and_worker_the_same_app_environment() -> None:
    web, worker = (service_env(s, {"SECRET_KEY": DUMMY_KEY}) for s in APP_SERVICES)
    assert worker == {name: value for name, value in web.items() if name in worker}
    assert set(web) - set(worker) <= names_read_by_entrypoint()


@pytest.mark.parametrize(
    "variables",
    [{}, {"POSTGRES_USER": "judge", "POSTGRES_PASSWORD": "Xy-9_z", "POSTGRES_DB": "qrels"}],
    ids=["defaults", "overridden"],
)
@pytest.mark.parametrize("service", APP_SERVICES)
def test_it_points_database_url_at_the_postgres_service(
    service: str, variables: dict[str, str]
) -> None:
    postgres = service_env("postgres", variables)
    url = service_env(service, {"SECRET_KEY": DUMMY_KEY, **variables})["DATABASE_URL"]

    database = parse_database_url(url, base_dir=REPO)

    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert database["NAME"] == postgres["POSTGRES_DB"]
    assert database["USER"] == postgres["POSTGRES_USER"]
    assert database["PASSWORD"] == postgres["POSTGRES_PASSWORD"]
    assert (database["HOST"], database["PORT"]) == ("postgres", "5432")


@pytest.mark.parametrize("service", APP_SERVICES)
def test_it_points_the_celery_broker_at_the_redis_service(service: str) -> None:
    broker = urlsplit(service_env(service, {"SECRET_KEY": DUMMY_KEY})["CELERY_BROKER_URL"])
    assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)


@pytest.mark.parametrize("service", APP_SERVICES)
def test_it_sets_only_variables_that_the_settings_read(service: str) -> None:
    readers = names_read_by_settings() | (names_read_by_entrypoint() if service == "web" else set())
    assert set(services()[service]["environment"]) <= readers


@pytest.mark.parametrize("service", APP_SERVICES)
def test_it_refuses_to_start_without_a_secret_key(service: str) -> None:
    assert re.fullmatch(
        r"\$\{SECRET_KEY:\?[^}]+\}", services()[service]["environment"]["SECRET_KEY"]
    )
    for variables in ({}, {"SECRET_KEY": ""}):
        with pytest.raises(LookupError, match="SECRET_KEY"):
            service_env(service, variables)


# --- docs/deployment.md against the settings, the entry point and compose ---------------------

DEPLOYMENT_DOC = REPO / "docs" / "deployment.md"
# Set by the image or by compose itself, never taken from the operator's shell.
FIXED_BY_COMPOSE_OR_IMAGE = {"DEBUG", "DATABASE_URL", "CELERY_BROKER_URL", "MEDIA_ROOT"}


def documented(heading: str) -> set[str]:
    """The variable names in the first column of the table after the line opening `heading`."""
    text = DEPLOYMENT_DOC.read_text("utf-8")
    after = text[text.index(f"\n{heading}") :]
    table = re.search(r"\n((?:\|.*\|\n)+)", after)
    assert table, f"no table after {heading!r}"
    rows = table[1].splitlines()[2:]
    return {name for row in rows for name in re.findall(r"`([A-Z0-9_]+)`", row.split("|")[1])}


def test_the_docs_list_exactly_the_variables_the_settings_read() -> None:
    assert documented("Read by the settings") == names_read_by_settings()


def test_the_docs_list_exactly_the_variables_the_entrypoint_and_the_demo_read() -> None:
    load_demo = (REPO / "demo" / "management" / "commands" / "load_demo.py").read_text()
    assert 'os.environ.get("DEMO_PASSWORD")' in load_demo
    expected = (names_read_by_entrypoint() - names_read_by_settings()) | {"DEMO_PASSWORD"}

    assert documented("Read by the image's entry point") == expected


@pytest.mark.parametrize("service", APP_SERVICES)
def test_compose_passes_on_every_variable_the_docs_let_an_operator_set(service: str) -> None:
    environment = services()[service]["environment"]
    settable = names_read_by_settings() - {"STATIC_ROOT"}  # collected at build time
    if service == "web":
        settable |= {"WEB_CONCURRENCY", "WEB_THREADS"}

    assert settable <= set(environment)
    for name in settable - FIXED_BY_COMPOSE_OR_IMAGE - {"SECRET_KEY"}:
        assert re.fullmatch(rf"\$\{{{name}:-[^}}]*\}}", environment[name]), name


def test_composes_defaults_are_the_settings_own() -> None:
    """With nothing set in the shell, compose hands the settings their own defaults, except
    ALLOWED_HOSTS (documented: localhost and 127.0.0.1, so that the health check answers)."""
    web = services()["web"]["environment"]
    passed_on = {
        name
        for name, value in web.items()
        if re.fullmatch(rf"\$\{{{name}:-[^}}]*\}}", str(value)) and name != "ALLOWED_HOSTS"
    }
    names = (
        *("DATABASES", "SESSION_ENGINE", "SESSION_COOKIE_AGE", "LOG_UPLOAD_MAX_BYTES"),
        *("RUN_UPLOAD_MAX_BYTES",),
        *("CELERY_RESULT_BACKEND", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CSRF_TRUSTED_ORIGINS"),
        *("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_PROXY_SSL_HEADER", "LOGGING"),
        *("SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "AXES_FAILURE_LIMIT"),
        *("AXES_IPWARE_META_PRECEDENCE_ORDER",),
    )
    with_compose = container_env()
    without = {name: value for name, value in with_compose.items() if name not in passed_on}

    assert passed_on >= {"CONN_MAX_AGE", "DB_PREPARED_STATEMENTS", "LOGIN_FAILURE_LIMIT"}
    assert settings_in_subprocess(with_compose, *names) == settings_in_subprocess(without, *names)


# --- The settings, under the container's environment ---------------------------------------


def test_it_loads_the_settings_with_the_containers_environment() -> None:
    env = container_env()
    assert env["DJANGO_SETTINGS_MODULE"] == "assay.settings.base"
    assert (env["DEBUG"], env["SECRET_KEY"]) == ("0", DUMMY_KEY)

    settings = settings_in_subprocess(
        env,
        *("DATABASES", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER", "DEBUG", "ALLOWED_HOSTS"),
        *("STATIC_ROOT", "SESSION_COOKIE_SECURE", "SECURE_PROXY_SSL_HEADER", "SECRET_KEY"),
        *("SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"),
    )

    database = settings["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["NAME"], database["CONN_MAX_AGE"]) == (
        "postgres",
        "assay",
        60,
    )
    assert settings["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    assert settings["CELERY_TASK_ALWAYS_EAGER"] is False
    assert settings["DEBUG"] is False
    assert settings["ALLOWED_HOSTS"] == ["localhost", "127.0.0.1"]
    assert settings["STATIC_ROOT"] == "/app/staticfiles"
    assert settings["SESSION_COOKIE_SECURE"] is False
    assert settings["SECURE_PROXY_SSL_HEADER"] is None
    assert settings["SECURE_SSL_REDIRECT"] is False and settings["SECURE_HSTS_SECONDS"] == 0
    assert settings["SECRET_KEY"] == DUMMY_KEY


def test_it_loads_the_settings_behind_a_tls_proxy() -> None:
    env = container_env(
        ALLOWED_HOSTS="assay.example.org",
        CSRF_TRUSTED_ORIGINS="https://assay.example.org",
        BEHIND_TLS_PROXY="1",
        SECURE_COOKIES="1",
    )

    settings = settings_in_subprocess(
        env,
        *("ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "SECURE_PROXY_SSL_HEADER"),
        *("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT"),
        *("SECURE_HSTS_SECONDS", "AXES_IPWARE_META_PRECEDENCE_ORDER", "AXES_IPWARE_PROXY_ORDER"),
    )

    assert settings["SECURE_SSL_REDIRECT"] is True
    assert settings["SECURE_HSTS_SECONDS"] == 365 * 24 * 3600
    # The sign-in throttle counts the client's address, the one the proxy appended, not its own.
    assert settings["AXES_IPWARE_META_PRECEDENCE_ORDER"][0] == "HTTP_X_FORWARDED_FOR"
    assert settings["AXES_IPWARE_PROXY_ORDER"] == "right-most"
    assert settings["ALLOWED_HOSTS"] == ["assay.example.org"]
    assert settings["CSRF_TRUSTED_ORIGINS"] == ["https://assay.example.org"]
    assert settings["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert settings["SESSION_COOKIE_SECURE"] is settings["CSRF_COOKIE_SECURE"] is True


# --- The Dockerfile ----------------------------------------------------------------------------


def test_it_builds_from_python_312_slim_and_runs_as_a_non_root_user() -> None:
    assert all(args.split()[0] == "python:3.12-slim" for args in instruction("FROM"))
    user = instruction("USER")[-1].split(":")[0]
    assert user not in ("root", "0")
    assert any(re.search(rf"useradd .*--uid \d+ .*\b{user}$", args) for args in instruction("RUN"))


def test_it_installs_the_project_without_the_dev_extra() -> None:
    runs = " ".join(instruction("RUN"))
    assert "pip install --no-cache-dir ." in runs
    assert "[dev]" not in runs
    env = dockerfile_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == env["PYTHONUNBUFFERED"] == "1"


def test_it_copies_everything_the_app_reads_from_its_base_dir() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    packages = [
        p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    ]
    wanted = {"pyproject.toml", "README.md", "manage.py", "templates", "static", *packages}

    assert wanted <= set(copied_sources())
    assert instruction("WORKDIR") == ["/app"]
    # BASE_DIR comes from the location of assay/settings: the code must run from /app.
    assert dockerfile_env()["PYTHONPATH"] == "/app"
    assert dockerfile_env()["STATIC_ROOT"] == "/app/staticfiles"


def test_it_keeps_uploads_in_a_folder_the_runtime_user_owns() -> None:
    # /app belongs to root: the settings' default MEDIA_ROOT (<BASE_DIR>/media) is read-only
    # there, so the image itself must point uploads elsewhere, not only compose.
    media = dockerfile_env()["MEDIA_ROOT"]
    user = instruction("USER")[-1]
    owned = [
        match[2]
        for args in instruction("RUN")
        for match in re.finditer(r"chown -R (\S+) (\S+)", args)
        if match[1] == user
    ]
    assert any(media == folder or media.startswith(f"{folder}/") for folder in owned)
    assert not media.startswith("/app")
    for service in APP_SERVICES:
        assert service_env(service, {"SECRET_KEY": DUMMY_KEY})["MEDIA_ROOT"] == media
        targets = [str(volume).split(":")[1] for volume in services()[service]["volumes"]]
        assert media in targets


def test_it_collects_static_files_with_a_throwaway_key_only_at_build_time() -> None:
    runs = instruction("RUN")
    assert any(
        "SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput" in r for r in runs
    )
    assert "SECRET_KEY" not in dockerfile_env()
    assert not any("SECRET_KEY" in args for args in instruction("ARG"))


def test_it_collects_static_files_the_way_the_build_does(tmp_path: Path) -> None:
    env = {**dockerfile_env(), "PYTHONPATH": str(REPO), "STATIC_ROOT": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=REPO,
        env={"PATH": os.environ["PATH"], **env, "SECRET_KEY": "collectstatic-only"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "staticfiles.json").read_text("utf-8"))
    assert "css/assay.css" in manifest["paths"]


def test_it_serves_the_wsgi_application_through_the_entrypoint() -> None:
    assert instruction("ENTRYPOINT") == ['["docker-entrypoint"]']
    assert instruction("CMD") == ['["web"]']
    assert "docker/entrypoint.sh /usr/local/bin/docker-entrypoint" in instruction("COPY")
    assert instruction("EXPOSE") == ["8000"]
    assert "exec granian assay.wsgi:application" in ENTRYPOINT.read_text("utf-8")


def test_it_imports_the_wsgi_application() -> None:
    probe = (
        "import importlib\n"
        "module = importlib.import_module('assay.wsgi')\n"
        "assert callable(module.application)\n"
    )
    env = {"PATH": os.environ["PATH"], "SECRET_KEY": DUMMY_KEY}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_it_keeps_local_state_out_of_the_build_context() -> None:
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", ".git"} <= ignored
    assert not ignored & {source.split("/")[0] for source in copied_sources()}


# --- The entry point ---------------------------------------------------------------------------


def test_it_passes_a_shell_syntax_check() -> None:
    result = subprocess.run(["sh", "-n", str(ENTRYPOINT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    """A bin folder whose python, granian and celery append their argv to calls.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "granian", "celery"):
        stub = bin_dir / name
        stub.write_text(
            '#!/bin/sh\necho "$(basename "$0") $*" >> "$CALLS"\nexit "${STUB_EXIT:-0}"\n'
        )
        stub.chmod(0o755)
    return bin_dir


def run_entrypoint(
    bin_dir: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    calls = bin_dir.parent / "calls.log"
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("args", [("web",), ()], ids=["web", "default"])
def test_it_migrates_then_serves_granian_for_web(stubs: Path, args: tuple[str, ...]) -> None:
    result, calls = run_entrypoint(stubs, *args)

    assert result.returncode == 0, result.stderr
    assert calls[0] == "python manage.py migrate --noinput"
    assert calls[1].startswith(
        "granian assay.wsgi:application --interface wsgi --host 0.0.0.0 --port 8000 "
        "--workers 2 --blocking-threads 4 "
    )
    assert "--access-log" in calls[1]
    assert len(calls) == 2


def test_it_passes_the_tunables_and_extra_arguments_to_granian(stubs: Path) -> None:
    _, calls = run_entrypoint(
        stubs, "web", "--workers-lifetime=3600", PORT="9000", WEB_CONCURRENCY="5", WEB_THREADS="8"
    )

    assert "--port 9000 --workers 5 --blocking-threads 8 " in calls[1]
    assert calls[1].endswith(" --workers-lifetime=3600")


def test_it_serves_without_migrating_for_serve(stubs: Path) -> None:
    result, calls = run_entrypoint(stubs, "serve", HOST="127.0.0.1")

    assert result.returncode == 0, result.stderr
    assert len(calls) == 1
    assert calls[0].startswith("granian assay.wsgi:application --interface wsgi --host 127.0.0.1 ")


def test_it_does_not_serve_when_migrations_fail(stubs: Path) -> None:
    result, calls = run_entrypoint(stubs, "web", STUB_EXIT="3")

    assert result.returncode == 3
    assert calls == ["python manage.py migrate --noinput"]


def test_it_loads_the_demo_between_migrating_and_serving(stubs: Path) -> None:
    result, calls = run_entrypoint(stubs, "demo", DEMO_PASSWORD="demo")

    assert result.returncode == 0, result.stderr
    assert calls[:2] == [
        "python manage.py migrate --noinput",
        "python manage.py load_demo --address 127.0.0.1:8000",
    ]
    assert calls[2].startswith("granian assay.wsgi:application ")


def test_it_runs_the_celery_worker_of_the_assay_app(stubs: Path) -> None:
    result, calls = run_entrypoint(stubs, "worker", "--concurrency=2")

    assert result.returncode == 0, result.stderr
    assert calls == ["celery -A assay worker --loglevel=INFO --concurrency=2"]


def test_it_runs_any_other_command_as_given(stubs: Path) -> None:
    result, calls = run_entrypoint(stubs, "echo", "hello", "world")

    assert result.stdout == "hello world\n"
    assert calls == []


def test_the_worker_command_finds_the_celery_app_configured_by_the_settings() -> None:
    app_name = re.search(r"exec celery -A (\S+) worker", ENTRYPOINT.read_text("utf-8"))
    assert app_name
    probe = (
        "import json\nfrom celery.app.utils import find_app\n"
        f"app = find_app({app_name[1]!r})\n"
        "app.loader.import_default_modules()\n"
        "print(json.dumps({'main': app.main, 'broker': app.conf.broker_url,\n"
        "    'eager': app.conf.task_always_eager, 'tasks': sorted(app.tasks)}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={"PATH": os.environ["PATH"], **container_env()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    app = json.loads(result.stdout.splitlines()[-1])

    assert (app["main"], app["broker"], app["eager"]) == ("assay", "redis://redis:6379/0", False)
    assert {"jobs.tasks.job_run", "jobs.tasks.jobs_reap"} <= set(app["tasks"])


def test_the_healthcheck_probes_the_apps_health_view() -> None:
    from django.urls import resolve

    from assay.health import healthz

    path = re.search(r"http://127\.0\.0\.1:\{sys\.argv\[1\]\}(/\S*)\"", ENTRYPOINT.read_text())
    assert path
    assert resolve(path[1]).func is healthz


# --- The health check --------------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[tuple[int, list[int]]]:
    """A server on a free port answering every GET with the last status in the returned list."""
    statuses = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(statuses[-1])
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], statuses
    finally:
        server.shutdown()
        server.server_close()


def healthcheck(tmp_path: Path, port: int) -> int:
    bin_dir = tmp_path / "python-bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), "healthcheck"],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "PORT": str(port)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.returncode


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (400, False), (500, False)])
def test_it_reports_health_from_the_http_status(
    tmp_path: Path, http_server: tuple[int, list[int]], status: int, healthy: bool
) -> None:
    port, statuses = http_server
    statuses.append(status)

    assert (healthcheck(tmp_path, port) == 0) is healthy


def test_it_reports_unhealthy_when_nothing_listens(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    assert healthcheck(tmp_path, port) != 0


# --- The real server ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_entrypoint_serves_the_app_through_granian(tmp_path: Path) -> None:
    """The image's web command, for real: granian in front of Django, a sign-in through the
    form (cookies, CSRF and a form body cross the server), health, and a clean stop."""
    port = _free_port()
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": DUMMY_KEY,
        "DEBUG": "1",  # plain static files: no collectstatic needed for the login page
        "ALLOWED_HOSTS": "127.0.0.1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "WEB_THREADS": "2",
    }
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert migrate.returncode == 0, migrate.stderr
    user = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.contrib.auth.models import User; "
         "User.objects.create_user('ann', password='pw-for-granian')"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert user.returncode == 0, user.stderr
    server = subprocess.Popen(
        ["sh", str(ENTRYPOINT), "serve", "--no-access-log"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        for _ in range(150):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("granian did not answer on /healthz")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/accounts/login/")
        page = conn.getresponse()
        body = page.read().decode()
        cookie = page.headers["Set-Cookie"].split(";", 1)[0]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body)
        assert page.status == 200 and token
        form = urllib.parse.urlencode(
            {"username": "ann", "password": "pw-for-granian", "csrfmiddlewaretoken": token[1]}
        )
        headers = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
        conn.request("POST", "/accounts/login/", body=form, headers=headers)
        signed_in = conn.getresponse()
        signed_in.read()
        assert signed_in.status == 302
        assert "sessionid=" in " ".join(signed_in.headers.get_all("Set-Cookie") or [])
        conn.request("POST", "/accounts/login/", body=form, headers={})  # no CSRF cookie
        refused = conn.getresponse()
        refused.read()
        assert refused.status == 403
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert server.returncode is not None, stderr
