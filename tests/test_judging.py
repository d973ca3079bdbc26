"""The judging page through its real URLs: claims, answers, undo, resume, release."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from formats.trec import RunRow
from judging.highlight import MAX_TERMS
from judging.models import Claim, ClaimState, Judgment, Kind, WorkItem, WorkUnit
from judging.services import pool_open
from pooling.models import Pair, Pool
from pooling.services import run_create
from tests.conftest import World
from tests.judging_helpers import (
    answer,
    form_key,
    judge_page,
    places_out_of_step,
    shown_item,
    undo,
    undo_key,
)

pytestmark = pytest.mark.django_db


def query_size(item: Pair) -> int:
    return Pair.objects.filter(query=item.query).count()


def test_it_shows_one_item_then_the_next_after_a_grade(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    assert first.query.text in page and first.document.text in page
    size = query_size(first)
    assert f"0 / {size} judged" in page
    partial = answer(client, slug, page, 2)
    assert "<html" not in partial  # htmx gets the panel only
    assert f"1 / {size} judged" in partial
    second = shown_item(partial)
    assert second is not None and second != first and second.query == first.query
    judgment = Judgment.objects.get(user=world.alice)
    assert (judgment.pair, judgment.grade, judgment.seconds_spent) == (first, 2, 4.5)
    assert judgment.kind == Kind.GRADE
    assert judgment.protocol == world.project.current_protocol()


def test_it_shows_the_items_of_one_query_in_the_pool_order(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    expected = [
        w.pair for w in WorkItem.objects.filter(unit__query=first.query).order_by("position")
    ]
    shown = []
    while (item := shown_item(page)) is not None and item.query == first.query:
        shown.append(item)
        page = answer(client, slug, page, 1)
    assert shown == expected


def test_it_never_reveals_systems_ranks_or_scores(world: World) -> None:
    client = world.client_for(world.alice)
    page = judge_page(client, world.project.slug)
    assert shown_item(page) is not None
    assert "provenance" not in page and "best_rank" not in page
    assert not re.search(r"\b(rank|score|bm25|run)\b", page, re.IGNORECASE)
    for name in ("a", "b"):  # the run names
        assert f">{name}<" not in page


def test_it_stores_one_judgment_when_the_same_key_is_sent_twice(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    key = form_key(page)
    answer(client, slug, page, 3, key=key)
    answer(client, slug, page, 1, key=key)  # a late second click must not store anything
    assert list(Judgment.objects.values_list("grade", flat=True)) == [3]


def test_it_rejects_a_malformed_answer(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    for bad in ("4", "-1", "x", ""):
        answer(client, slug, page, bad, status=400)
    answer(client, slug, page, kind="skip", note="   ", status=400)  # a skip needs a reason
    answer(client, slug, page, kind="maybe", status=400)
    item = shown_item(page)
    assert item is not None
    url = reverse("judge_submit", args=[slug, item.pk])
    assert client.post(url, {"grade": "2"}).status_code == 400  # no idempotency key
    assert not Judgment.objects.exists()


@pytest.mark.parametrize("seconds", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_it_refuses_seconds_that_are_not_a_finite_number(world: World, seconds: str) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    refused = answer(client, slug, page, 2, seconds=seconds, status=400)
    assert "seconds must be a finite number" in refused
    assert not Judgment.objects.exists()


def test_it_refuses_a_key_already_used_for_another_item(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    key = form_key(page)
    page = answer(client, slug, page, 2, key=key)
    second = shown_item(page)
    refused = answer(client, slug, page, 1, key=key, status=409)
    assert "already used for another answer" in refused
    assert shown_item(refused) == second  # still to be judged, with a fresh key
    assert form_key(refused) != key
    assert not Judgment.objects.filter(pair=second).exists()
    assert answer(client, slug, refused, 1) and Judgment.objects.filter(pair=second).exists()


def test_it_keeps_the_keys_of_answers_and_of_undos_apart(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    grade_key = form_key(page)
    page = answer(client, slug, page, 2, key=grade_key)
    url = reverse("judge_undo", args=[slug])
    refused = client.post(url, {"key": grade_key}, headers={"HX-Request": "true"})
    assert refused.status_code == 409
    assert "already used for another answer" in refused.content.decode()
    key = undo_key(page)
    for _ in range(2):  # a repeated undo is undone once
        assert client.post(url, {"key": key}, headers={"HX-Request": "true"}).status_code == 200
    answer(client, slug, page, 3, key=key, status=409)  # an undo's key is no grade's either
    kinds = list(Judgment.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == ["grade", "undo"]


def test_it_gives_each_annotator_a_different_query(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    first = shown_item(judge_page(alice, slug))
    other = shown_item(judge_page(bob, slug))
    assert first is not None and other is not None
    assert first.query != other.query  # single-judged queries go to one person each
    assert Claim.objects.filter(state=ClaimState.ACTIVE).count() == 2


def test_it_escapes_and_highlights_the_document(world: World) -> None:
    client = world.client_for(world.alice)
    item = shown_item(judge_page(client, world.project.slug))
    assert item is not None
    item.document.text = '<script>alert("x")</script><b>bold</b> & more question'
    item.document.title = "<img src=x onerror=alert(1)>"
    item.document.save()
    html = judge_page(client, world.project.slug)
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>bold" not in html
    assert (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt; &amp; more"
        in html
    )
    assert "<mark>question</mark>" in html  # a query term, marked after escaping


def test_it_shows_a_huge_document_cut_with_a_notice_and_bounded_marks(world: World) -> None:
    # A 5,000-word query on a 1 MB document: the page shows the first MAX_TEXT_CHARS
    # characters with a notice, and marks at most MAX_TERMS distinct terms.
    client = world.client_for(world.alice)
    item = shown_item(judge_page(client, world.project.slug))
    assert item is not None
    words = [f"w{i:04d}" for i in range(5000)]
    item.query.text = " ".join(words)
    item.query.save()
    item.document.text = " ".join(words * 40)[:1_000_000]
    item.document.save()
    html = judge_page(client, world.project.slug)
    assert "Document truncated: the first 100000 characters are shown of 1000000." in html
    assert len(html) < 300_000
    marked = set(re.findall(r"<mark>(\w+)</mark>", html))
    assert marked == set(words[:MAX_TERMS])


def test_it_moves_to_the_next_query_then_says_all_done(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    seen_queries = []
    while (item := shown_item(page)) is not None:
        if item.query not in seen_queries:
            seen_queries.append(item.query)
        page = answer(client, slug, page, 1)
    assert len(seen_queries) == 2
    assert "All done" in page
    assert "You finished 2 queries" in page
    assert set(Claim.objects.values_list("state", flat=True)) == {ClaimState.DONE}
    assert Judgment.objects.count() == 8


def test_it_resumes_at_the_right_item_after_a_refresh(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = answer(client, slug, answer(client, slug, judge_page(client, slug), 2), 0)
    expected = shown_item(page)
    refreshed = judge_page(client, slug)
    assert shown_item(refreshed) == expected
    assert expected is not None and f"2 / {query_size(expected)} judged" in refreshed


def test_it_records_unsure_with_a_note_and_skip_with_a_reason(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    page = answer(client, slug, page, kind="unsure", note="is a changelog an answer?")
    page = answer(client, slug, page, kind="skip", note="the document is empty")
    rows = list(Judgment.objects.order_by("pk").values_list("kind", "grade", "note"))
    assert rows == [
        ("unsure", None, "is a changelog an answer?"),
        ("skip", None, "the document is empty"),
    ]
    item = shown_item(page)
    assert item is not None and f"2 / {query_size(item)} judged" in page


def test_it_undoes_the_last_answer_and_shows_that_item_again(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    page = answer(client, slug, page, 3)
    second = shown_item(page)
    page = answer(client, slug, page, 0)
    page = undo(client, slug, page)
    assert shown_item(page) == second
    page = undo(client, slug, page)
    assert shown_item(page) == first
    assert first is not None and f"0 / {query_size(first)} judged" in page
    page = answer(client, slug, page, 2)
    assert shown_item(page) == second
    kinds = list(Judgment.objects.order_by("pk").values_list("kind", "grade"))
    assert kinds == [("grade", 3), ("grade", 0), ("undo", None), ("undo", None), ("grade", 2)]


def test_it_undoes_the_last_answer_of_the_query_just_finished(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first_query = shown_item(page).query  # type: ignore[union-attr]
    last = None
    while (item := shown_item(page)) is not None and item.query == first_query:
        last = item
        page = answer(client, slug, page, 1)
    assert shown_item(page).query != first_query  # type: ignore[union-attr]
    page = undo(client, slug, page)
    assert shown_item(page) == last
    assert Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE).unit.query == first_query
    assert Claim.objects.filter(user=world.alice).count() == 1  # the untouched claim is gone
    assert WorkUnit.objects.exclude(query=first_query).get().claims_taken == 0


def three_query_pool(world: World) -> Pool:
    """A newer pool of the world's project (so the one annotators work on): three queries of
    two documents each, every one judged by one person."""
    project = world.project
    project.queries.create(qid="q3", text="third question")
    ranked = {q: [RunRow(q, f"d{i}", i, 10.0 - i, "a") for i in (1, 2)] for q in ("q1", "q2", "q3")}
    run = run_create(project=project, name="c", ranked=ranked)
    pool = pool_open(project=project, runs=[run], depth=2, seed=3)
    WorkUnit.objects.filter(pool=pool).update(judges_needed=1)
    return pool


def judge_query_on_screen(client: Client, slug: str, page: str) -> str:
    """Answer every item of the query on screen; returns the panel that follows."""
    first = shown_item(page)
    assert first is not None
    while (item := shown_item(page)) is not None and item.query == first.query:
        page = answer(client, slug, page, 1)
    return page


def test_it_undoes_nothing_of_an_earlier_query_after_a_release(world: World) -> None:
    pool = three_query_pool(world)
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_query_on_screen(client, slug, judge_page(client, slug))
    finished = Claim.objects.get(user=world.alice, state=ClaimState.DONE)
    page = answer(client, slug, page, 3)  # one answer in the second query, then released
    released = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    response = client.post(reverse("judge_release", args=[slug]), headers={"HX-Request": "true"})
    page = response.content.decode()
    fresh = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    assert fresh.unit_id not in (finished.unit_id, released.unit_id)
    rows = Judgment.objects.count()
    refused = undo(client, slug, page, status=409)
    assert "nothing to undo" in refused
    assert shown_item(refused) == shown_item(page)
    assert Judgment.objects.count() == rows
    states = dict(Claim.objects.filter(user=world.alice).values_list("pk", "state"))
    assert states == {finished.pk: "done", released.pk: "released", fresh.pk: "active"}
    assert places_out_of_step(pool) == {}


def test_it_keeps_the_query_held_once_its_own_answers_are_undone(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_query_on_screen(client, slug, judge_page(client, slug))
    held = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    item = shown_item(page)
    page = undo(client, slug, answer(client, slug, page, 2))
    assert shown_item(page) == item
    refused = undo(client, slug, page, status=409)  # the finished query is out of reach now
    assert "nothing to undo" in refused and shown_item(refused) == item
    assert Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE) == held
    assert Claim.objects.filter(user=world.alice, state=ClaimState.DONE).count() == 1
    assert places_out_of_step(world.project.pools.get()) == {}


def test_it_undoes_the_last_answer_once_everything_is_judged(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    last = None
    while (item := shown_item(page)) is not None:
        last, page = item, answer(client, slug, page, 1)
    assert "All done" in page
    page = undo(client, slug, page)
    assert last is not None and shown_item(page) == last
    active = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    assert active.unit.query == last.query
    assert places_out_of_step(world.project.pools.get()) == {}


def test_it_counts_only_items_still_answered_in_the_annotators_progress(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = answer(client, slug, judge_page(client, slug), 2)
    page = answer(client, slug, page, kind="unsure", note="a changelog?")
    undo(client, slug, page)
    project_page = client.get(reverse("project_detail", args=[slug])).content.decode()
    assert "answered 1 item in this pool" in project_page


def test_it_keeps_every_answer_when_a_grade_changes(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    item = shown_item(page)
    page = undo(client, slug, answer(client, slug, page, 1))
    answer(client, slug, page, 3)
    history = list(item.judgments.order_by("pk").values_list("kind", "grade"))  # type: ignore[union-attr]
    assert history == [("grade", 1), ("undo", None), ("grade", 3)]


def test_it_refuses_an_item_outside_the_active_claim(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    page = judge_page(alice, slug)
    judge_page(bob, slug)  # bob holds the other query
    bobs = Claim.objects.get(user=world.bob).unit
    foreign = Pair.objects.filter(query=bobs.query).first()
    assert foreign is not None
    url = reverse("judge_submit", args=[slug, foreign.pk])
    data = {"grade": "2", "key": form_key(page)}
    response = alice.post(url, data, headers={"HX-Request": "true"})
    assert response.status_code == 409
    assert "not in the query you are working on" in response.content.decode()
    assert not Judgment.objects.exists()


def test_it_releases_a_query_and_hands_over_the_next(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    first = shown_item(judge_page(client, slug))
    response = client.post(reverse("judge_release", args=[slug]), headers={"HX-Request": "true"})
    nxt = shown_item(response.content.decode())
    assert first is not None and nxt is not None and nxt.query != first.query
    states = dict(Claim.objects.values_list("unit__query__qid", "state"))
    assert states == {first.query.qid: "released", nxt.query.qid: "active"}


def test_it_expires_an_idle_claim_and_hands_the_query_to_someone_else(world: World) -> None:
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    slug = world.project.slug
    page = judge_page(alice, slug)
    mine = shown_item(page)
    Claim.objects.filter(user=world.alice).update(touched_at=timezone.now() - timedelta(hours=1))
    judge_page(bob, slug)  # bob's claim expires alice's first, then takes a query
    bob_page = judge_page(world.client_for(world.lead), slug)  # and the lead takes the other
    assert shown_item(bob_page) is not None
    assert Claim.objects.get(user=world.alice).state == ClaimState.EXPIRED
    held = set(Claim.objects.filter(state="active").values_list("unit__query", flat=True))
    assert mine is not None and mine.query_id in held
    answer(alice, slug, page, 2, status=409)  # too late: the query is someone else's now
    assert not Judgment.objects.filter(user=world.alice).exists()


def export(world: World, annotator: str | None = None) -> tuple[list[str], int]:
    import io

    from evaluation.services import qrels_export

    out = io.StringIO()
    report = qrels_export(project=world.project, out=out, annotator=annotator)
    return out.getvalue().splitlines(), report.unresolved


def test_it_exports_each_judges_current_grade_only(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = judge_page(client, slug)
    first = shown_item(page)
    page = undo(client, slug, answer(client, slug, page, 1))  # 1, then undone
    page = answer(client, slug, page, 3)  # the current grade of the first item
    second = shown_item(page)
    page = answer(client, slug, page, kind="unsure", note="?")
    third = shown_item(page)
    page = answer(client, slug, page, kind="skip", note="broken")
    fourth = shown_item(page)
    answer(client, slug, undo(client, slug, answer(client, slug, page, 2)), 0)
    lines, unresolved = export(world)
    assert first and second and third and fourth
    assert lines == sorted(
        [
            f"{first.query.qid} 0 {first.document.docid} 3",
            f"{fourth.query.qid} 0 {fourth.document.docid} 0",
        ]
    )
    assert unresolved == 0


def test_it_exports_the_lower_grade_of_an_unresolved_double_judged_pair(world: World) -> None:
    WorkUnit.objects.filter(pool__project=world.project).update(judges_needed=2)
    slug = world.project.slug
    alice, bob = world.client_for(world.alice), world.client_for(world.bob)
    alice_page = judge_page(alice, slug)
    item = shown_item(alice_page)
    answer(alice, slug, alice_page, 2)  # the first judge's grade no longer wins
    bob_page = judge_page(bob, slug)
    assert shown_item(bob_page) == item  # the second judge of the same query
    answer(bob, slug, bob_page, 1)
    assert item is not None
    lines, unresolved = export(world)
    assert lines == [f"{item.query.qid} 0 {item.document.docid} 1"] and unresolved == 1
    assert export(world, annotator="alice")[0] == [f"{item.query.qid} 0 {item.document.docid} 2"]


def test_opening_the_page_never_claims_and_its_panel_claims_by_post(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    for method in (client.get, client.head):
        assert method(reverse("judge", args=[slug])).status_code == 200
    page = client.get(reverse("judge", args=[slug])).content.decode()
    assert not Claim.objects.exists()
    claim_url = reverse("judge_claim", args=[slug])
    # The panel posts to claim as soon as it loads, and offers a button that does the same.
    assert f'hx-post="{claim_url}" hx-trigger="load, submit"' in page
    assert 'id="claim-button"' in page
    assert client.get(claim_url).status_code == 405
    claimed = client.post(claim_url, headers={"HX-Request": "true"})
    assert shown_item(claimed.content.decode()) is not None
    assert Claim.objects.filter(user=world.alice, state=ClaimState.ACTIVE).count() == 1
    # Without JavaScript the form posts, claims and comes back to the page, which shows it.
    bob = world.client_for(world.bob)
    response = bob.post(claim_url)
    assert response.status_code == 302 and response["Location"] == reverse("judge", args=[slug])
    assert shown_item(bob.get(response["Location"]).content.decode()) is not None
    assert Claim.objects.count() == 2


def test_without_javascript_a_claim_with_nothing_left_says_all_done(world: World) -> None:
    WorkUnit.objects.filter(pool__project=world.project).delete()  # nothing to judge
    client = world.client_for(world.alice)
    response = client.post(reverse("judge_claim", args=[world.project.slug]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "All done" in page and 'id="claim-button"' not in page
