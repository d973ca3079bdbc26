"""Security headers: a CSP without inline code, HSTS and HTTPS behind a proxy, no-store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import World

REPO = Path(__file__).resolve().parents[1]


def pages(world: World) -> list[str]:
    slug = world.project.slug
    return [
        reverse("project_detail", args=[slug]),
        reverse("judge", args=[slug]),
        reverse("pool_detail", args=[slug]),
        reverse("judging_overview", args=[slug]),
        reverse("qrels_download", args=[slug]),
        reverse("log_list", args=[slug]),
        reverse("account"),
        reverse("api_next", args=[slug]),
        reverse("api_tokens"),
    ]


@pytest.mark.django_db
def test_every_page_and_api_answer_is_neither_stored_nor_inline_scripted(world: World) -> None:
    client = world.client_for(world.lead)
    for url in pages(world):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "no-store" in response["Cache-Control"], url
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


@pytest.mark.django_db
def test_the_sign_in_page_carries_the_headers_too() -> None:
    response = Client().get(reverse("login"))
    assert "no-store" in response["Cache-Control"]
    assert "default-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_static_files_stay_cacheable() -> None:
    response = Client().get("/static/css/assay.css")
    assert response.status_code == 200
    assert "no-store" not in response.get("Cache-Control", "")


@pytest.mark.django_db
def test_behind_a_tls_proxy_it_redirects_to_https_and_sends_hsts(world: World, settings) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    client = Client()
    plain = client.get(reverse("login"))
    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    secure = client.get(reverse("login"), HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000"
    assert client.get("/healthz").status_code == 200  # the probe over plain HTTP


TEMPLATE_DIRS = [REPO / "templates", *REPO.glob("*/templates")]
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\shx-on[:-]|\son[a-z]+=|javascript:", re.I
)


def test_no_template_has_inline_script_or_style() -> None:
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for folder in TEMPLATE_DIRS
        for path in sorted(folder.rglob("*.html"))
        for match in INLINE.finditer(path.read_text())
    ]
    assert found == []
