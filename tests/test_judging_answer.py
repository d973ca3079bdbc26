"""An answer on the judging page (submit + next), through the real URLs: the one service path
(`services.judgment_submit`, then `services.screen_for`) on every case, ordinary or not, and the
number of statements an ordinary answer costs."""

from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from judging.models import Claim, ClaimState, Judgment, WorkUnit
from judging.services_claims import claim_release, place_free
from pooling.models import Pair
from tests.conftest import World
from tests.judging_helpers import answer, form_key, judge_page, places_out_of_step, shown_item
from tests.test_protocol import publish_v2

pytestmark = pytest.mark.django_db

ON_POSTGRES = connection.vendor == "postgresql"
HTMX = {"HX-Request": "true"}


def without_keys(html: str) -> str:
    """The panel without what differs on every rendering (keys, CSRF tokens)."""
    html = re.sub(r'value="[0-9a-f-]{36}"', 'value="KEY"', html)
    return re.sub(r'value="[A-Za-z0-9]{64}"', 'value="CSRF"', html)


def panel_of(page: str) -> str:
    start = page.index('<section id="judge-panel"')
    return page[start : page.index("</section>", start) + len("</section>")]


def test_it_stores_an_ordinary_grade_and_shows_the_next_item(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    partial = answer(client, slug, page, 2, seconds=3.25)
    judgment = Judgment.objects.get(user=world.alice)
    assert (judgment.pair, judgment.kind, judgment.grade) == (first, "grade", 2)
    assert judgment.seconds_spent == 3.25
    assert judgment.protocol == world.project.current_protocol()
    # the same panel as the full page renders for the same state
    assert without_keys(panel_of(partial)) == without_keys(panel_of(judge_page(client, slug)))


# An ordinary answer from the judging page: the session (server-side, so that logging out ends
# it) and the signed-in user, the project with the person's
# role in it, the current pool, the current protocol with whether it must be acknowledged
# first, the person's active claim, its items with their answers and the queries they finished
# (one read), the new judgment, and the next item with its query and document.
# Keeping the claim alive adds one write a minute; closing it, the claim of the next query.
STATEMENTS_PER_ANSWER = 9
# The API's answer renders no next item.
STATEMENTS_PER_API_ANSWER = 8


def statements(queries: CaptureQueriesContext) -> list[str]:
    """The statements sent, without the savepoints of the test's own transaction (outside a
    test the service's atomic block is a BEGIN and a COMMIT, which Django does not log)."""
    savepoints = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(savepoints)]


@pytest.mark.parametrize("via", ["page", "api"])
def test_an_ordinary_answer_costs_a_fixed_number_of_statements(world: World, via: str) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = answer(client, slug, judge_page(client, slug), 1)  # the query is claimed by now
    item = shown_item(page)
    assert item is not None
    with CaptureQueriesContext(connection) as queries:
        if via == "page":
            url, form = reverse("judge_submit", args=[slug, item.pk]), {"grade": "2"}
            response = client.post(url, form | {"key": form_key(page)}, headers=HTMX)
        else:
            body = {"item": item.pk, "grade": 2, "idempotency_key": form_key(page)}
            url = reverse("api_judgments", args=[slug])
            response = client.post(url, body, content_type="application/json")
    assert response.status_code == (200 if via == "page" else 201)
    sent = statements(queries)
    expected = STATEMENTS_PER_ANSWER if via == "page" else STATEMENTS_PER_API_ANSWER
    assert len(sent) == expected, "\n".join(sent)
    assert Judgment.objects.filter(user=world.alice).count() == 2


def test_it_stores_a_repeated_key_once_and_shows_the_same_next_item(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    key = form_key(page)
    once = answer(client, slug, page, 3, key=key)
    twice = answer(client, slug, page, 0, key=key)  # a retried request: nothing new
    assert shown_item(once) == shown_item(twice)
    assert list(Judgment.objects.values_list("grade", flat=True)) == [3]


def test_it_refuses_a_key_used_for_another_item(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    key = form_key(page)
    page = answer(client, slug, page, 3, key=key)
    second = shown_item(page)
    assert second is not None
    refused = answer(client, slug, page, 1, key=key, status=409)
    assert "already used for another answer" in refused
    assert not Judgment.objects.filter(pair=second).exists()


def test_it_refuses_a_key_used_by_another_judge(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    page = judge_page(alice, slug)
    key = form_key(page)
    answer(alice, slug, page, 3, key=key)
    answer(bob, slug, judge_page(bob, slug), 1, key=key, status=409)
    assert list(Judgment.objects.values_list("user__username", flat=True)) == ["alice"]


def test_it_hides_the_project_from_a_non_member(world: World) -> None:
    page = judge_page(world.client_for(world.alice), world.project.slug)
    item = shown_item(page)
    assert item is not None
    outsider = world.client_for(world.outsider)
    url = reverse("judge_submit", args=[world.project.slug, item.pk])
    response = outsider.post(
        url, {"grade": "2", "key": form_key(page)}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 404
    assert not Judgment.objects.exists()


@pytest.mark.parametrize("change", ["password", "deactivated"])
def test_it_stores_nothing_once_the_person_is_signed_out_by_a_change(
    world: World, change: str
) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    answer(client, slug, page, 2)  # signed in, the session valid
    alice = world.alice
    if change == "password":
        alice.set_password("a-new-password-for-alice")
    else:
        alice.is_active = False
    alice.save()
    item = shown_item(page)
    assert item is not None
    response = client.post(
        reverse("judge_submit", args=[slug, item.pk]),
        {"grade": "3", "key": str(uuid.uuid4())},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert list(Judgment.objects.values_list("grade", flat=True)) == [2]


def test_it_stops_a_revoked_superuser_at_once(world: World) -> None:
    boss = world.outsider
    boss.is_superuser = True
    boss.save()
    client = world.client_for(boss)
    slug = world.project.slug
    page = judge_page(client, slug)  # a superuser may judge in any project
    answer(client, slug, page, 1)
    boss.is_superuser = False
    boss.save()
    item = shown_item(page)  # answered already: a second answer would be a change of grade
    assert item is not None
    response = client.post(
        reverse("judge_submit", args=[slug, item.pk]),
        {"grade": "3", "key": str(uuid.uuid4())},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 404
    assert Judgment.objects.filter(user=boss).count() == 1


def test_it_refuses_an_item_of_another_judges_query(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    page = judge_page(alice, slug)
    judge_page(bob, slug)
    foreign = Pair.objects.filter(query=Claim.objects.get(user=world.bob).unit.query).first()
    assert foreign is not None
    response = alice.post(
        reverse("judge_submit", args=[slug, foreign.pk]),
        {"grade": "2", "key": form_key(page)},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 409
    assert not Judgment.objects.exists()


def test_it_resumes_an_expired_claim_nobody_took(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    claim = Claim.objects.get(user=world.alice)
    Claim.objects.filter(pk=claim.pk).update(state=ClaimState.EXPIRED)
    place_free(claim.unit_id)
    answer(client, slug, page, 1)
    assert Claim.objects.get(pk=claim.pk).state == ClaimState.ACTIVE
    assert WorkUnit.objects.get(pk=claim.unit_id).claims_taken == 1
    assert Judgment.objects.filter(user=world.alice).count() == 1


def test_it_refuses_an_expired_claim_someone_else_took(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    page = judge_page(alice, slug)
    Claim.objects.filter(user=world.alice).update(touched_at=timezone.now() - timedelta(hours=1))
    judge_page(bob, slug)  # expires alice's claim, then takes the other query
    judge_page(world.client_for(world.lead), slug)  # and the lead takes alice's
    answer(alice, slug, page, 2, status=409)
    assert not Judgment.objects.filter(user=world.alice).exists()


def test_it_waits_for_the_new_protocol_to_be_acknowledged(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = answer(client, slug, judge_page(client, slug), 1)
    publish_v2(world)
    refused = answer(client, slug, page, 3, status=409)
    assert "version 2 has been published" in refused
    assert Judgment.objects.count() == 1
    acked = client.post(
        reverse("judge_acknowledge", args=[slug, 2]), headers={"HX-Request": "true"}
    )
    answer(client, slug, acked.content.decode(), 2)
    stamped = Judgment.objects.order_by("pk").values_list("protocol__number", flat=True)
    assert list(stamped) == [1, 2]


def test_it_closes_the_query_with_its_last_answer_and_claims_the_next(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    while (item := shown_item(page)) is not None and item.query == first.query:
        page = answer(client, slug, page, 1)
    done = Claim.objects.get(user=world.alice, unit__query=first.query)
    assert done.state == ClaimState.DONE and done.finished_at is not None
    nxt = shown_item(page)
    assert nxt is not None and nxt.query != first.query
    assert "1 query finished" in page
    assert Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE).unit.query == nxt.query


def test_it_keeps_the_claim_alive_once_a_minute(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    long_ago, just_now = timezone.now() - timedelta(minutes=5), timezone.now()
    Claim.objects.filter(user=world.alice).update(touched_at=long_ago)
    page = answer(client, slug, page, 1)
    touched = Claim.objects.get(user=world.alice).touched_at
    assert touched > just_now - timedelta(seconds=5)
    recent = timezone.now() - timedelta(seconds=10)
    Claim.objects.filter(user=world.alice).update(touched_at=recent)
    answer(client, slug, page, 2)
    assert Claim.objects.get(user=world.alice).touched_at == recent  # no write within a minute


def test_it_shows_the_second_judge_nothing_of_the_first(world: World) -> None:
    WorkUnit.objects.update(judges_needed=2)  # every query is judged blind by two people
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    page = judge_page(alice, slug)
    first = shown_item(page)
    assert first is not None
    while (item := shown_item(page)) is not None and item.query == first.query:
        page = answer(alice, slug, page, 3, note="")
    bob_page = judge_page(bob, slug)
    while (item := shown_item(bob_page)) is not None and item.query != first.query:
        bob_page = answer(bob, slug, bob_page, 0)
    assert item is not None and item.query == first.query
    before = without_keys(panel_of(bob_page))
    after = answer(bob, slug, bob_page, 1)
    assert "alice" not in after and "judged by" not in after
    # bob's progress counts only his own answers on the query alice finished
    done = re.search(r"(\d+) / (\d+) judged", after)
    assert done is not None and done.group(1) == "1"
    assert "0 / " in before


def someone_waits_for_a_lock(timeout: float = 10.0) -> bool:
    """Whether another connection to this database is waiting for a lock (within `timeout`)."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
    )
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # activity is cached per transaction
            cursor.execute(sql)
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.01)
    return False


def release_once_the_answer_waits(claim: Claim, errors: list[BaseException]) -> threading.Thread:
    """A lead's release, in its own connection, holding the claim's row lock until the answer
    blocks on it, then committing: the answer's statement started before the release."""
    locked = threading.Event()

    def lead() -> None:
        try:
            with transaction.atomic():
                Claim.objects.select_for_update().get(pk=claim.pk)
                locked.set()
                someone_waits_for_a_lock()
                claim_release(claim=claim)
        except BaseException as error:  # reported by the test
            errors.append(error)
        finally:
            locked.set()
            connection.close()

    thread = threading.Thread(target=lead)
    thread.start()
    assert locked.wait(10)
    return thread


@pytest.mark.skipif(not ON_POSTGRES, reason="row locks between connections: PostgreSQL")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("via", ["page", "api"])
def test_it_never_closes_a_query_released_while_its_last_answer_waits(
    world: World, via: str
) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    size = Pair.objects.filter(query=first.query).count()
    for _ in range(size - 1):
        page = answer(client, slug, page, 1)
    last = shown_item(page)
    assert last is not None and last.query == first.query
    claim = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    errors: list[BaseException] = []
    lead = release_once_the_answer_waits(claim, errors)
    status = send_answer(client, slug, page, via, grade=2)
    lead.join(10)
    assert errors == [] and status == (200 if via == "page" else 201)
    assert Judgment.objects.filter(pair=last, user=world.alice, grade=2).exists()
    claim.refresh_from_db()
    assert (claim.state, claim.finished_at) == (ClaimState.RELEASED, None)
    assert places_out_of_step(claim.pool) == {}


def send_answer(client: Client, slug: str, page: str, via: str, grade: int) -> int:
    """Answer the item shown on `page` from the judging page or through the API."""
    item = shown_item(page)
    assert item is not None
    if via == "page":
        url = reverse("judge_submit", args=[slug, item.pk])
        form = {"grade": str(grade), "key": form_key(page)}
        return client.post(url, form, headers={"HX-Request": "true"}).status_code
    url = reverse("api_judgments", args=[slug])
    body = {"item": item.pk, "grade": grade, "idempotency_key": form_key(page)}
    return client.post(url, body, content_type="application/json").status_code
