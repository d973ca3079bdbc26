"""Attacks on the judging workflow that were once answered wrongly: each test is the request
an attacker (an outsider, an annotator, a careless lead) sent and what it must get instead."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import Claim, ClaimState, Judgment
from judging.services import MAX_NOTE, claim_next
from judging.services_claims import policy_of
from tests.conftest import World
from tests.judging_helpers import answer, form_key, judge_page, shown_item

pytestmark = pytest.mark.django_db


def api_client(world: World, username: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(getattr(world, username))
    return client


def test_the_api_tells_an_outsider_nothing_about_which_projects_exist(world: World) -> None:
    client = api_client(world, "outsider")
    for name in ("api_queue", "api_next"):
        hidden = client.get(reverse(name, args=[world.project.slug]))
        missing = client.get(reverse(name, args=["no-such-project"]))
        assert (hidden.status_code, missing.status_code) == (404, 404)
        assert hidden.json() == missing.json(), name
    for name in ("api_judgments", "api_protocol_ack"):
        hidden = client.post(reverse(name, args=[world.project.slug]), {}, format="json")
        missing = client.post(reverse(name, args=["no-such-project"]), {}, format="json")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json() == missing.json(), name


def test_the_schema_is_for_signed_in_users_only(world: World) -> None:
    assert APIClient().get(reverse("api_schema")).status_code in (401, 403)
    assert api_client(world, "alice").get(reverse("api_schema")).status_code == 200


def test_an_item_id_beyond_any_database_id_is_not_found(world: World) -> None:
    client = world.client_for(world.alice)
    html = judge_page(client, world.project.slug)  # signed in and holding a query
    for item_id in (2**63, 10**30):
        url = reverse("judge_submit", args=[world.project.slug, item_id])
        data = {"grade": "1", "kind": "grade", "seconds": "2", "key": form_key(html)}
        response = client.post(url, data, headers={"HX-Request": "true"})
        assert response.status_code == 404
    assert not Judgment.objects.exists()


def test_a_note_with_a_nul_character_is_refused_not_a_server_error(world: World) -> None:
    client = world.client_for(world.alice)
    html = judge_page(client, world.project.slug)
    answer(client, world.project.slug, html, kind="skip", note="broken\x00page", status=400)
    assert not Judgment.objects.exists()


def test_a_note_too_long_is_refused_rather_than_cut(world: World) -> None:
    client = api_client(world, "alice")
    slug = world.project.slug
    nxt = client.post(reverse("api_next", args=[slug])).json()
    data = {"item": nxt["item"]["id"], "kind": "unsure", "note": "x" * (MAX_NOTE + 1)}
    response = client.post(
        reverse("api_judgments", args=[slug]),
        {**data, "idempotency_key": nxt["idempotency_key"]},
        format="json",
    )
    assert response.status_code == 400
    page = world.client_for(world.bob)
    html = judge_page(page, slug)
    answer(page, slug, html, kind="unsure", note="y" * (MAX_NOTE + 1), status=400)
    assert not Judgment.objects.exists()
    html = answer(page, slug, html, kind="unsure", note="y" * MAX_NOTE)
    assert Judgment.objects.get().note == "y" * MAX_NOTE


@pytest.mark.parametrize("minutes", ["2000000000", "99999999999999999999"])
def test_an_idle_limit_beyond_a_year_is_refused_and_claiming_goes_on(
    world: World, minutes: str
) -> None:
    lead = world.client_for(world.lead)
    url = reverse("judging_policy", args=[world.project.slug])
    response = lead.post(url, {"claim_idle_minutes": minutes, "double_share_percent": "20"})
    assert response.status_code == 302
    assert policy_of(world.project).claim_idle_minutes == 30
    assert shown_item(judge_page(world.client_for(world.alice), world.project.slug))


def test_a_username_with_a_nul_character_names_nobody(world: World) -> None:
    lead = world.client_for(world.lead)
    slug = world.project.slug
    claim = claim_next(pool=world.project.pools.get(), user=world.bob)
    assert claim is not None
    add = lead.post(reverse("judging_member_add", args=[slug]), {"username": "olaf\x00"})
    move = lead.post(reverse("judging_claim_reassign", args=[slug, claim.pk]), {"to": "alice\x00"})
    assert (add.status_code, move.status_code) == (302, 302)
    assert not world.project.memberships.filter(user=world.outsider).exists()
    assert Claim.objects.get(pk=claim.pk).state == ClaimState.ACTIVE


def test_a_protocol_draft_with_a_nul_character_is_shown_again_not_stored(world: World) -> None:
    lead = world.client_for(world.lead)
    grades = {
        "grade_value": ["0", "1", "2", "3"],
        "grade_label": ["no", "some", "most", "all"],
        "grade_definition": ["a", "b", "c", "d"],
    }
    data = {"intro": "Judge\x00 carefully.", **grades, "action": "publish"}
    response = lead.post(reverse("protocol_edit", args=[world.project.slug]), data)
    assert response.status_code == 400
    assert "Judge carefully." in response.content.decode()
    assert world.project.protocols.count() == 1


def test_a_qrels_export_for_an_annotator_name_with_a_nul_is_refused(world: World) -> None:
    lead = world.client_for(world.lead)
    url = reverse("qrels_download", args=[world.project.slug])
    response = lead.get(url, {"annotator": "bob\x00"})
    assert response.status_code == 400
    assert lead.get(url, {"annotator": "bob"}).status_code == 200


def test_adding_a_member_with_an_unknown_role_says_so(world: World) -> None:
    lead = world.client_for(world.lead)
    url = reverse("judging_member_add", args=[world.project.slug])
    response = lead.post(url, {"username": world.outsider.username, "role": "owner"}, follow=True)
    assert "No such role &#x27;owner&#x27;" in response.content.decode()
    assert not world.project.memberships.filter(user=world.outsider).exists()
