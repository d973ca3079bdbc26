"""Sessions end on the server; API tokens die with the password, and can be listed and revoked."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import token_create
from annotation.models import Role
from annotation.services import membership_set, project_create
from tests.conftest import PASSWORD, World, make_user

pytestmark = pytest.mark.django_db


def signed_in(username: str) -> Client:
    client = Client()
    response = client.post(reverse("login"), {"username": username, "password": PASSWORD})
    assert response.status_code == 302
    return client


def copy_of(client: Client) -> Client:
    """Another browser holding the same session cookie (a stolen or copied cookie)."""
    other = Client()
    other.cookies = client.cookies.__class__(client.cookies)
    return other


def home_status(client: Client) -> int:
    return client.get(reverse("home")).status_code


def test_logging_out_ends_the_session_for_a_copied_cookie(world: World) -> None:
    client = signed_in("alice")
    thief = copy_of(client)
    assert home_status(thief) == 200
    client.post(reverse("logout"))
    assert home_status(thief) == 302  # back to the sign-in page


def test_a_password_change_ends_every_other_session(world: World) -> None:
    client = signed_in("alice")
    elsewhere = signed_in("alice")
    thief = copy_of(elsewhere)
    new = "another horse battery staple"
    response = client.post(
        reverse("password_change"),
        {"old_password": PASSWORD, "new_password1": new, "new_password2": new},
    )
    assert response.status_code == 302
    assert home_status(client) == 200  # the session that changed it stays signed in
    assert home_status(elsewhere) == 302
    assert home_status(thief) == 302


def test_a_password_set_in_the_admin_ends_every_session(world: World) -> None:
    User.objects.create_superuser("root", password=PASSWORD)
    admin = signed_in("root")
    victim = signed_in("alice")
    url = reverse("admin:auth_user_password_change", args=[world.alice.pk])
    new = "another horse battery staple"
    response = admin.post(
        url, {"password1": new, "password2": new, "usable_password": "true", "set_usable": "x"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert home_status(victim) == 302


# --- API tokens ---------------------------------------------------------------------------------


def token_for(username: str, name: str = "script") -> tuple[int, str]:
    response = APIClient().post(
        reverse("api_token"), {"username": username, "password": PASSWORD, "name": name}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    return body["id"], body["token"]


def api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def works(key: str) -> bool:
    return api(key).get(reverse("api_tokens")).status_code == 200


def test_it_stores_no_key_and_makes_a_new_token_each_time(world: World) -> None:
    _, first = token_for("alice")
    _, second = token_for("alice")
    assert first != second and works(first) and works(second)
    stored = ApiToken.objects.values_list("digest", flat=True)
    assert first not in stored and second not in stored


def test_a_token_stops_working_when_the_password_changes(world: World) -> None:
    _, key = token_for("alice")
    world.alice.set_password("another horse battery staple")
    world.alice.save()
    response = api(key).get(reverse("api_tokens"))
    assert response.status_code in (401, 403)
    assert "password changed" in response.json()["detail"]


def test_a_token_stops_working_when_the_user_is_deactivated(world: World) -> None:
    _, key = token_for("alice")
    world.alice.is_active = False
    world.alice.save()
    assert not works(key)


def test_the_owner_lists_and_revokes_their_tokens(world: World) -> None:
    token_id, key = token_for("alice", name="laptop")
    listed = api(key).get(reverse("api_tokens")).json()
    assert [(t["id"], t["user"], t["name"]) for t in listed] == [(token_id, "alice", "laptop")]
    assert "token" not in listed[0] and "digest" not in listed[0]  # the key is never shown again
    assert listed[0]["last_used_at"] is not None
    response = api(key).delete(reverse("api_token_detail", args=[token_id]))
    assert response.status_code == 204
    assert not works(key)


def test_a_lead_revokes_the_tokens_of_their_annotators_only(world: World) -> None:
    alice_id, alice_key = token_for("alice")
    lead_id, lead_key = token_for("lena")
    other_lead = make_user("otto")
    membership_set(project=world.project, user=other_lead, role=Role.LEAD)
    otto_id, _ = token_for("otto")
    elsewhere = project_create(slug="other", name="Other")
    stranger = make_user("sam")
    membership_set(project=elsewhere, user=stranger, role=Role.ANNOTATOR)
    sam_id, _ = token_for("sam")

    listed = {t["id"] for t in api(lead_key).get(reverse("api_tokens")).json()}
    assert listed == {alice_id, lead_id}  # not another lead's, not another project's people
    for hidden in (otto_id, sam_id):
        response = api(lead_key).delete(reverse("api_token_detail", args=[hidden]))
        assert response.status_code == 404
    assert api(lead_key).delete(reverse("api_token_detail", args=[alice_id])).status_code == 204
    assert not works(alice_key)


def test_an_annotator_cannot_see_or_revoke_anothers_token(world: World) -> None:
    _, alice_key = token_for("alice")
    bob_id, bob_key = token_for("bob")
    assert {t["user"] for t in api(alice_key).get(reverse("api_tokens")).json()} == {"alice"}
    assert api(alice_key).delete(reverse("api_token_detail", args=[bob_id])).status_code == 404
    assert works(bob_key)


def test_a_superuser_sees_and_revokes_every_token(world: World) -> None:
    User.objects.create_superuser("root", password=PASSWORD)
    bob_id, bob_key = token_for("bob")
    _, root_key = token_for("root")
    assert bob_id in {t["id"] for t in api(root_key).get(reverse("api_tokens")).json()}
    assert api(root_key).delete(reverse("api_token_detail", args=[bob_id])).status_code == 204
    assert not works(bob_key)


def test_the_account_page_makes_shows_once_and_revokes_a_token(world: World) -> None:
    client = world.client_for(world.alice)
    response = client.post(reverse("token_new"), {"name": "notebook"})
    assert response.status_code == 201
    key = response.context["new_key"]
    assert key in response.content.decode() and works(key)
    page = client.get(reverse("account")).content.decode()
    assert "notebook" in page and key not in page  # never shown again
    token = ApiToken.objects.get(user=world.alice)
    response = client.post(reverse("token_revoke", args=[token.pk]))
    assert response.status_code == 302 and not works(key)


def test_the_account_page_shows_a_lead_their_annotators_tokens(world: World) -> None:
    token_create(user=world.alice, name="alice's script")
    token_create(user=world.bob, name="bob's script")
    lead_page = world.client_for(world.lead).get(reverse("account")).content.decode()
    assert "alice&#x27;s script" in lead_page and "bob&#x27;s script" in lead_page
    alice_page = world.client_for(world.alice).get(reverse("account")).content.decode()
    assert "alice&#x27;s script" in alice_page and "bob&#x27;s script" not in alice_page
    bob_token = ApiToken.objects.get(user=world.bob)
    response = world.client_for(world.alice).post(reverse("token_revoke", args=[bob_token.pk]))
    assert response.status_code == 404


def test_the_command_makes_a_token(world: World) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("create_api_token", "bob", "--name", "ci", stdout=out)
    assert works(out.getvalue().strip())
