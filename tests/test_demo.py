"""`make run`'s demo: the login banner names the address the server actually listens on."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from demo.management.commands.load_demo import login_url

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("127.0.0.1:8001", "http://127.0.0.1:8001/"),
        ("8002", "http://127.0.0.1:8002/"),
        ("0.0.0.0:8000", "http://127.0.0.1:8000/"),
        ("0:9000", "http://127.0.0.1:9000/"),
        ("localhost:8003", "http://localhost:8003/"),
        ("[::1]:8004", "http://[::1]:8004/"),
    ],
)
def test_it_shows_where_a_browser_reaches_the_server(address: str, url: str) -> None:
    assert login_url(address) == url


@pytest.mark.django_db
def test_it_prints_the_address_it_is_given() -> None:
    out = io.StringIO()
    call_command("load_demo", "--password", "pw", "--address", "127.0.0.1:8001", stdout=out)
    assert "Log in at http://127.0.0.1:8001/ as:" in out.getvalue()


@pytest.mark.parametrize("host", [None, "127.0.0.1:8005"])
def test_it_passes_make_runs_host_to_the_banner_and_the_server(host: str | None) -> None:
    args = ["make", "-n", "run", "VENV=.venv-none"] + ([f"HOST={host}"] if host else [])
    printed = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=True).stdout
    served = host or "127.0.0.1:8000"
    assert f"manage.py load_demo --address {served}" in printed
    assert f"manage.py runserver {served}" in printed


def test_it_installs_only_the_app_for_make_run() -> None:
    printed = subprocess.run(
        ["make", "-n", "run", "VENV=.venv-none"], cwd=REPO, capture_output=True, text=True
    ).stdout
    assert "pip install --quiet -e ." in printed
    assert "[dev]" not in printed
