"""Failed sign-ins are throttled per account and per address, on the form and on /api/token/."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.conftest import PASSWORD, World

pytestmark = pytest.mark.django_db

LIMIT = settings.AXES_FAILURE_LIMIT


def form_login(username: str, password: str, address: str = "198.51.100.1") -> int:
    client = Client(REMOTE_ADDR=address)
    response = client.post(reverse("login"), {"username": username, "password": password})
    return response.status_code


def api_login(username: str, password: str, address: str = "198.51.100.1") -> tuple[int, dict]:
    response = Client(REMOTE_ADDR=address).post(
        reverse("api_token"),
        {"username": username, "password": password},
        content_type="application/json",
    )
    return response.status_code, response.json()


def test_it_locks_an_account_out_of_the_form_after_the_limit(world: World) -> None:
    statuses = [form_login("alice", "wrong") for _ in range(LIMIT)]
    assert statuses[:-1] == [200] * (LIMIT - 1)  # the form again, with its error
    assert statuses[-1] == 429
    response = Client(REMOTE_ADDR="198.51.100.1").post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )
    assert response.status_code == 429  # even the right password, until the cool-off
    assert "Too many failed sign-ins" in response.content.decode()
    assert int(response["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()
    assert "_auth_user_id" not in response.client.session


def test_it_locks_an_account_out_of_the_api_after_the_limit(world: World) -> None:
    results = [api_login("alice", "wrong") for _ in range(LIMIT)]
    assert [status for status, _ in results[:-1]] == [400] * (LIMIT - 1)
    status, body = results[-1]
    assert status == 429 and "Too many failed sign-ins" in body["detail"]
    assert api_login("alice", PASSWORD)[0] == 429


def test_it_counts_the_form_and_the_api_together(world: World) -> None:
    for _ in range(LIMIT - 1):
        form_login("alice", "wrong")
    assert api_login("alice", "wrong")[0] == 429


def test_it_locks_the_account_from_every_address(world: World) -> None:
    for i in range(LIMIT):
        form_login("alice", "wrong", address=f"198.51.100.{i + 1}")
    assert form_login("alice", PASSWORD, address="203.0.113.9") == 429  # an unseen address
    assert form_login("bob", PASSWORD, address="203.0.113.9") == 302  # others are not affected


def test_it_locks_the_address_for_every_account(world: World) -> None:
    for i in range(LIMIT):  # password spraying: one guess per account
        form_login(f"user{i}", "wrong", address="198.51.100.7")
    assert form_login("bob", PASSWORD, address="198.51.100.7") == 429
    assert form_login("bob", PASSWORD, address="198.51.100.8") == 302


def test_it_lets_people_in_again_after_the_cool_off(world: World) -> None:
    from axes.models import AccessAttempt
    from django.utils.timezone import now

    for _ in range(LIMIT):
        form_login("alice", "wrong")
    AccessAttempt.objects.update(attempt_time=now() - settings.AXES_COOLOFF_TIME)
    assert form_login("alice", PASSWORD) == 302


def test_a_successful_sign_in_clears_the_accounts_failures(world: World) -> None:
    for _ in range(LIMIT - 1):
        form_login("alice", "wrong")
    assert form_login("alice", PASSWORD) == 302
    assert form_login("alice", "wrong") == 200  # counting starts again
    assert form_login("alice", PASSWORD) == 302


def test_signing_in_to_ones_own_account_does_not_clear_the_addresss_failures(
    world: World,
) -> None:
    for i in range(LIMIT - 1):
        form_login(f"victim{i}", "wrong")
    assert form_login("bob", PASSWORD) == 302  # the guesser's own account
    assert form_login("victim0", "wrong") == 429


def test_it_reads_the_clients_address_from_the_proxy(world: World, settings) -> None:
    # Behind a TLS proxy, the right-most X-Forwarded-For entry is the one the proxy appended;
    # a client that writes its own header cannot pick another address.
    settings.AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    settings.AXES_IPWARE_PROXY_ORDER = "right-most"
    proxy = "172.18.0.2"

    def via_proxy(username: str, password: str, forwarded: str) -> int:
        client = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=forwarded)
        response = client.post(reverse("login"), {"username": username, "password": password})
        return response.status_code

    for i in range(LIMIT):
        via_proxy(f"user{i}", "wrong", forwarded=f"10.9.9.{i}, 198.51.100.7")
    assert via_proxy("bob", PASSWORD, forwarded="198.51.100.7") == 429  # spoofing did not help
    assert via_proxy("bob", PASSWORD, forwarded="198.51.100.8") == 302  # the proxy is not locked
