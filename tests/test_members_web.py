"""Adding annotators who have no account yet: the account is made without a password, and the
lead is shown once a sign-in link that works once; through the real URLs and the command."""

from __future__ import annotations

import io
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.contrib.messages import get_messages
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from annotation.models import Role
from annotation.services import membership_set, project_create
from tests.conftest import PASSWORD, World, make_user

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a long and new passphrase"
LINK_RE = re.compile(r'id="signin-link-url">(http://testserver/accounts/welcome/[^<]+)<')


def add(client: Client, slug: str, username: str, role: str = "annotator"):
    url = reverse("judging_member_add", args=[slug])
    return client.post(url, {"username": username, "role": role})


def link_in(response) -> str:
    found = LINK_RE.search(response.content.decode())
    assert found, response.content.decode()[:2000]
    return found[1].replace("&amp;", "&").removeprefix("http://testserver")


def shown(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def set_password(link: str, password: str = NEW_PASSWORD) -> tuple[Client, Any]:
    client = Client()
    response = client.post(link, {"new_password1": password, "new_password2": password})
    return client, response


def test_a_lead_adds_a_newcomer_and_the_link_signs_them_in_once(world: World) -> None:
    lead = world.client_for(world.lead)
    slug = world.project.slug
    response = add(lead, slug, "nina")
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    assert response["Referrer-Policy"] == "same-origin"  # the link never goes to other sites
    page = response.content.decode()
    assert "nina is now an annotator of Acme search" in page
    assert "is not shown again" in page and "PASSWORD_RESET_TIMEOUT = 259200 seconds" in page
    nina = User.objects.get(username="nina")
    assert not nina.has_usable_password()
    assert world.project.memberships.get(user=nina).role == Role.ANNOTATOR
    link = link_in(response)
    assert link.endswith(f"?next=%2Fp%2F{slug}%2F")
    # The link is kept nowhere: not in the lead's session, not among pending messages.
    token = link.split("/")[4]
    assert all(token not in str(s.get_decoded()) for s in Session.objects.all())
    assert token not in lead.cookies.output()

    opened = Client().get(link)
    assert opened.status_code == 200 and "Welcome, nina" in opened.content.decode()
    assert opened["Referrer-Policy"] == "same-origin"
    client, answer = set_password(link)
    assert answer.status_code == 302 and answer["Location"] == f"/p/{slug}/"
    project_page = client.get(answer["Location"])
    assert project_page.status_code == 200 and "Welcome, nina" in project_page.content.decode()
    assert project_page.wsgi_request.user == nina
    nina.refresh_from_db()
    assert nina.check_password(NEW_PASSWORD)

    # Used: the link no longer works, and cannot change the password again.
    again = Client().get(link)
    assert again.status_code == 404 and "does not work" in again.content.decode()
    _, second = set_password(link, "another fine passphrase")
    assert second.status_code == 404
    nina.refresh_from_db()
    assert nina.check_password(NEW_PASSWORD)
    # And the account signs in with its password, through the ordinary form.
    form = {"username": "nina", "password": NEW_PASSWORD}
    assert Client().post(reverse("login"), form)["Location"] == "/"


def test_a_newcomer_can_be_made_a_lead(world: World) -> None:
    response = add(world.client_for(world.lead), world.project.slug, "lars", role="lead")
    assert response.status_code == 201
    assert world.project.memberships.get(user__username="lars").role == Role.LEAD


def test_the_set_password_page_checks_the_password(world: World) -> None:
    link = link_in(add(world.client_for(world.lead), world.project.slug, "nina"))
    client = Client()
    response = client.post(link, {"new_password1": "short", "new_password2": "short"})
    assert response.status_code == 400 and "too short" in response.content.decode()
    response = client.post(link, {"new_password1": NEW_PASSWORD, "new_password2": "different"})
    assert response.status_code == 400
    assert not User.objects.get(username="nina").has_usable_password()
    assert set_password(link)[1].status_code == 302  # still works: nothing was set


def test_an_expired_link_does_not_work(world: World, monkeypatch) -> None:
    link = link_in(add(world.client_for(world.lead), world.project.slug, "nina"))
    later = datetime.now() + timedelta(days=3, minutes=1)
    monkeypatch.setattr(default_token_generator, "_now", lambda: later)
    assert Client().get(link).status_code == 404


def test_a_forged_or_mangled_link_does_not_work(world: World) -> None:
    link = link_in(add(world.client_for(world.lead), world.project.slug, "nina"))
    parts = link.split("/")
    assert Client().get("/".join([*parts[:4], "x" + parts[4][1:], *parts[5:]])).status_code == 404
    assert Client().get(link.replace(parts[3], "!!")).status_code == 404
    assert Client().get(reverse("account_welcome", args=["MQ", "1-x"])).status_code == 404


def test_the_next_address_stays_on_this_site(world: World) -> None:
    link = link_in(add(world.client_for(world.lead), world.project.slug, "nina"))
    evil = link.split("?")[0] + "?next=https://evil.example/"
    _, response = set_password(evil)
    assert response.status_code == 302 and response["Location"] == "/"


def test_a_new_link_replaces_the_earlier_one(world: World) -> None:
    lead = world.client_for(world.lead)
    slug = world.project.slug
    first = link_in(add(lead, slug, "nina"))
    nina = User.objects.get(username="nina")
    page = lead.get(reverse("judging_overview", args=[slug])).content.decode()
    assert "no password set yet" in page and "New sign-in link" in page
    fresh = lead.post(reverse("judging_member_link", args=[slug, nina.pk]))
    assert fresh.status_code == 201 and "Any earlier link" in fresh.content.decode()
    second = link_in(fresh)
    assert second != first
    assert Client().get(first).status_code == 404
    assert set_password(second)[1].status_code == 302
    # Once the password is set, no link can be made for the account.
    refused = lead.post(reverse("judging_member_link", args=[slug, nina.pk]))
    assert refused.status_code == 302 and "has set a password already" in shown(refused)


def test_a_lead_cannot_take_over_an_account_another_project_invited(world: World) -> None:
    other = project_create(slug="other", name="Other")
    other_lead = make_user("olga")
    membership_set(project=other, user=other_lead, role=Role.LEAD)
    link_in(add(world.client_for(other_lead), "other", "pat"))
    pat = User.objects.get(username="pat")
    lead = world.client_for(world.lead)
    add(lead, world.project.slug, "pat")  # an existing account: just added
    assert world.project.memberships.filter(user=pat).exists()
    response = lead.post(reverse("judging_member_link", args=[world.project.slug, pat.pk]))
    assert response.status_code == 302 and "a project you do not lead" in shown(response)
    admin = User.objects.create_superuser("root", password=PASSWORD)
    client = Client()
    client.force_login(admin)
    response = client.post(reverse("judging_member_link", args=[world.project.slug, pat.pk]))
    assert response.status_code == 201


def test_no_link_for_an_account_with_a_password_or_a_non_member(world: World) -> None:
    lead = world.client_for(world.lead)
    slug = world.project.slug
    response = lead.post(reverse("judging_member_link", args=[slug, world.alice.pk]))
    assert response.status_code == 302 and "has set a password already" in shown(response)
    assert (
        lead.post(reverse("judging_member_link", args=[slug, world.outsider.pk])).status_code == 404
    )


def test_an_existing_account_is_added_as_before(world: World) -> None:
    response = add(world.client_for(world.lead), world.project.slug, world.outsider.username)
    assert response.status_code == 302
    assert "olaf is now an annotator of this project" in shown(response)
    assert world.project.memberships.filter(user=world.outsider).exists()


def test_a_deactivated_account_is_not_added(world: World) -> None:
    User.objects.filter(pk=world.outsider.pk).update(is_active=False)
    response = add(world.client_for(world.lead), world.project.slug, "olaf")
    assert "deactivated" in shown(response)
    assert not world.project.memberships.filter(user=world.outsider).exists()


@pytest.mark.parametrize("username", ["with space", "x" * 151, "", "semi;colon"])
def test_a_username_that_cannot_be_one_is_refused(world: World, username: str) -> None:
    before = User.objects.count()
    response = add(world.client_for(world.lead), world.project.slug, username)
    assert response.status_code == 302 and shown(response)
    assert User.objects.count() == before


def test_annotators_and_outsiders_cannot_add_members_or_make_links(world: World) -> None:
    slug = world.project.slug
    link_url = reverse("judging_member_link", args=[slug, world.bob.pk])
    for user, status in ((world.alice, 403), (world.outsider, 404)):
        client = world.client_for(user)
        assert add(client, slug, "mallory").status_code == status
        assert client.post(link_url).status_code == status
    assert not User.objects.filter(username="mallory").exists()


def test_the_welcome_page_needs_no_sign_in_and_ignores_one(world: World) -> None:
    link = link_in(add(world.client_for(world.lead), world.project.slug, "nina"))
    client = world.client_for(world.alice)  # someone else's browser, signed in
    response = client.post(link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert response.status_code == 302
    assert client.get("/").wsgi_request.user.username == "nina"


# --- the command ----------------------------------------------------------------------------


def test_add_member_create_prints_a_working_link(world: World) -> None:
    out = io.StringIO()
    call_command(
        "add_member", world.project.slug, "nina", "--create",
        "--base-url", "https://assay.example/", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "nina is now annotator" in text and "works once, until" in text
    link = text.strip().splitlines()[-1]
    assert link.startswith("https://assay.example/accounts/welcome/")
    assert set_password(link.removeprefix("https://assay.example"))[1].status_code == 302


def test_add_member_create_takes_the_base_url_from_the_settings(world: World, settings) -> None:
    settings.ASSAY_BASE_URL = "https://judge.example"
    out = io.StringIO()
    call_command("add_member", world.project.slug, "nina", "--create", "--role", "lead", stdout=out)
    assert out.getvalue().strip().splitlines()[-1].startswith("https://judge.example/accounts/")
    assert world.project.memberships.get(user__username="nina").role == Role.LEAD


def test_add_member_create_without_an_address_changes_nothing(world: World, settings) -> None:
    settings.ASSAY_BASE_URL = ""
    with pytest.raises(CommandError, match="--base-url"):
        call_command("add_member", world.project.slug, "nina", "--create")
    assert not User.objects.filter(username="nina").exists()


def test_add_member_without_create_refuses_an_unknown_user(world: World) -> None:
    with pytest.raises(CommandError, match="add --create"):
        call_command("add_member", world.project.slug, "nina")
    out = io.StringIO()
    call_command("add_member", world.project.slug, "olaf", "--role", "lead", stdout=out)
    assert world.project.memberships.get(user=world.outsider).role == Role.LEAD


def test_add_member_create_for_an_account_with_a_password_prints_no_link(world: World) -> None:
    out = io.StringIO()
    call_command(
        "add_member", world.project.slug, "olaf", "--create", "--base-url", "http://h", stdout=out
    )
    assert "no link is needed" in out.getvalue() and "http://h/" not in out.getvalue()
