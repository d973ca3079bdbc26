"""Adjudication through the lead's pages, and the final labels export_qrels and the download
write: provenance, the --unresolved policy, the queue's order, promotion into the protocol."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from agreement.models import Adjudication
from annotation.models import ProtocolDraft
from judging.models import GoldItem, GoldSource, Judgment, Kind
from pooling.models import Pair
from tests.conftest import World
from tests.test_protocol import draft_form

pytestmark = pytest.mark.django_db


def pair(world: World, qid: str, docid: str) -> Pair:
    return Pair.objects.get(query__project=world.project, query__qid=qid, document__docid=docid)


def judge(world: World, who: str, p: Pair, grade: int | None, kind: str = Kind.GRADE) -> None:
    Judgment.objects.create(
        pair=p, user=getattr(world, who), kind=kind, grade=grade, seconds_spent=7.5, note=""
    )


def adjudicate(world: World, p: Pair, grade: int, ruling: str = "", status: int = 302) -> str:
    response = world.client_for(world.lead).post(
        reverse("adjudicate_pair", args=[world.project.slug, p.pk]),
        {"grade": str(grade), "ruling": ruling},
    )
    assert response.status_code == status, response.content.decode()[:1000]
    return response.get("Location", "")


def export(world: World, *options: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    call_command("export_qrels", world.project.slug, *options)
    captured = capsys.readouterr()
    return captured.out, captured.err


def every_provenance(world: World) -> None:
    """q1/d1 single, q1/d2 agreed, q1/d3 unresolved 1 vs 3, q2/d1 adjudicated (twice)."""
    judge(world, "alice", pair(world, "q1", "d1"), 2)
    judge(world, "bob", pair(world, "q1", "d1"), None, Kind.UNSURE)  # unsure labels nothing
    judge(world, "alice", pair(world, "q1", "d2"), 1)
    judge(world, "bob", pair(world, "q1", "d2"), 1)
    judge(world, "alice", pair(world, "q1", "d3"), 3)
    judge(world, "bob", pair(world, "q1", "d3"), 1)
    judge(world, "alice", pair(world, "q2", "d1"), 0)
    judge(world, "bob", pair(world, "q2", "d1"), 3)
    judge(world, "bob", pair(world, "q2", "d2"), 2)
    judge(world, "bob", pair(world, "q2", "d2"), None, Kind.UNDO)  # undone: unlabelled
    adjudicate(world, pair(world, "q2", "d1"), 3, "an outdated page still answers it")
    adjudicate(world, pair(world, "q2", "d1"), 2)  # the lead's latest word stands


def test_it_writes_the_final_labels_with_their_counts(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    every_provenance(world)
    out, err = export(world, capsys=capsys)
    assert out.splitlines() == ["q1 0 d1 2", "q1 0 d2 1", "q1 0 d3 1", "q2 0 d1 2"]
    assert err.strip() == (
        "4 pairs: 1 adjudicated, 1 agreed, 1 single judge, 1 unresolved "
        "(written with the lowest grade given: --unresolved lower); 4 written"
    )


@pytest.mark.parametrize(("policy", "line"), [("higher", "q1 0 d3 3"), ("exclude", None)])
def test_it_writes_unresolved_pairs_as_the_policy_says(
    world: World, capsys: pytest.CaptureFixture[str], policy: str, line: str | None
) -> None:
    every_provenance(world)
    out, err = export(world, "--unresolved", policy, capsys=capsys)
    expected = ["q1 0 d1 2", "q1 0 d2 1", *([line] if line else []), "q2 0 d1 2"]
    assert out.splitlines() == expected
    assert f"--unresolved {policy}); {len(expected)} written" in err
    url = reverse("qrels_download", args=[world.project.slug])
    download = world.client_for(world.lead).get(url, {"unresolved": policy})
    assert download.status_code == 200 and download.content.decode() == out


def test_the_download_refuses_an_unknown_policy_and_defaults_to_lower(world: World) -> None:
    every_provenance(world)
    client = world.client_for(world.lead)
    url = reverse("qrels_download", args=[world.project.slug])
    refused = client.get(url, {"unresolved": "first"})
    assert refused.status_code == 400
    assert "exclude, lower, higher" in refused.content.decode()
    assert "q1 0 d3 1\n" in client.get(url).content.decode()
    with pytest.raises(CommandError, match="invalid choice: 'first'"):
        call_command("export_qrels", world.project.slug, "--unresolved", "first")


def test_an_annotator_export_is_still_that_persons_own_grades(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    every_provenance(world)
    out, err = export(world, "--annotator", "bob", capsys=capsys)
    assert out.splitlines() == ["q1 0 d2 1", "q1 0 d3 1", "q2 0 d1 3"]  # no adjudication
    assert err.strip() == "3 pairs written: bob's own current grades"


def queue_order(world: World) -> list[str]:
    page = world.client_for(world.lead).get(reverse("adjudicate_queue", args=[world.project.slug]))
    assert page.status_code == 200
    names = {p.pk: f"{p.query.qid}/{p.document.docid}" for p in Pair.objects.all()}
    return [names[int(pk)] for pk in re.findall(r'<tr data-pair="(\d+)"', page.content.decode())]


def test_it_queues_wide_disagreements_first_then_the_best_ranked(world: World) -> None:
    # best ranks in the pooled runs: q1/d1 1, q1/d2 2, q1/d5 3, q2/d2 2 (tests/conftest.py)
    for qid, docid, a, b in [
        ("q1", "d2", 1, 2),
        ("q1", "d1", 2, 1),
        ("q1", "d5", 0, 3),
        ("q2", "d2", 0, 2),
        ("q2", "d1", 3, 3),  # agreed: no work
        ("q2", "d3", 0, 3),  # adjudicated below: settled
    ]:
        judge(world, "alice", pair(world, qid, docid), a)
        judge(world, "bob", pair(world, qid, docid), b)
    following = adjudicate(world, pair(world, "q2", "d3"), 1)
    assert following == reverse(
        "adjudicate_pair", args=[world.project.slug, pair(world, "q1", "d5").pk]
    )
    assert queue_order(world) == ["q1/d5", "q2/d2", "q1/d1", "q1/d2"]
    # saving goes on to the next pair of the queue, until none is left
    assert adjudicate(world, pair(world, "q1", "d5"), 3).endswith(f"/{pair(world, 'q2', 'd2').pk}/")
    for qid, docid in (("q2", "d2"), ("q1", "d1")):
        adjudicate(world, pair(world, qid, docid), 2)
    assert adjudicate(world, pair(world, "q1", "d2"), 2) == reverse(
        "adjudicate_queue", args=[world.project.slug]
    )
    assert queue_order(world) == []


def test_the_queue_page_counts_and_lists_what_was_adjudicated(world: World) -> None:
    every_provenance(world)
    client = world.client_for(world.lead)
    url = reverse("adjudicate_queue", args=[world.project.slug])
    page = client.get(url).content.decode()
    for name, value in [("pairs", 4), ("adjudicated", 1), ("agreed", 1), ("single", 1)]:
        assert f'id="count-{name}">{value}<' in page
    assert 'id="count-unresolved">1<' in page and "To adjudicate (1)" in page
    settled = client.get(url, {"show": "adjudicated"}).content.decode()
    rows = re.findall(r'<tr data-pair="(\d+)">(.*?)</tr>', settled, re.DOTALL)
    assert [int(pk) for pk, _ in rows] == [pair(world, "q2", "d1").pk]  # the standing one only
    assert "lena" in rows[0][1] and 'class="num">2<' in rows[0][1]


def test_the_pair_page_shows_every_judge_side_by_side_escaped(world: World) -> None:
    p = pair(world, "q1", "d3")
    p.document.text = "<script>alert(1)</script> first answer"
    p.document.save()
    p.query.description = "wants the setup steps"
    p.query.save()
    judge(world, "alice", p, 3)
    Judgment.objects.create(pair=p, user=world.bob, grade=1, seconds_spent=12, note="old page?")
    page = world.client_for(world.lead).get(
        reverse("adjudicate_pair", args=[world.project.slug, p.pk])
    )
    html = page.content.decode()
    answers = re.search(r'<table id="answers">.*?</table>', html, re.DOTALL)
    assert answers is not None
    cells = re.sub(r"<[^>]+>", " ", answers.group(0))
    assert re.search(r"alice\s+3\s+—\s+7\.5", cells)
    assert re.search(r"bob\s+1\s+old page\?\s+12\.0", cells)
    assert "wants the setup steps" in html and "first question" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert 'data-key="0"' in html and "js/adjudicate.js" in html
    assert "Not adjudicated yet." in html


def test_it_refuses_a_grade_out_of_range_and_keeps_the_ruling_typed(world: World) -> None:
    p = pair(world, "q1", "d1")
    for grade in ("4", "", "-1", "01x"):
        response = world.client_for(world.lead).post(
            reverse("adjudicate_pair", args=[world.project.slug, p.pk]),
            {"grade": grade, "ruling": "keep me"},
        )
        assert response.status_code == 400
        assert "keep me</textarea>" in response.content.decode()
    assert not Adjudication.objects.exists()


def test_re_adjudication_adds_a_row_and_the_latest_stands(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    p = pair(world, "q1", "d1")
    judge(world, "alice", p, 0)
    judge(world, "bob", p, 3)
    adjudicate(world, p, 3, "first thought")
    adjudicate(world, p, 1, "second thought")
    assert list(Adjudication.objects.order_by("pk").values_list("grade", "ruling")) == [
        (3, "first thought"),
        (1, "second thought"),
    ]
    out, _ = export(world, capsys=capsys)
    assert out.splitlines() == ["q1 0 d1 1"]
    html = (
        world.client_for(world.lead)
        .get(reverse("adjudicate_pair", args=[world.project.slug, p.pk]))
        .content.decode()
    )
    past = re.search(r'<ul class="versions" id="past">.*?</ul>', html, re.DOTALL)
    assert past is not None
    assert past.group(0).index("second thought") < past.group(0).index("first thought")
    assert past.group(0).count("promote-form") == 1  # only the standing one


def promote(world: World, adjudication: Adjudication, question: str = "") -> str:
    client = world.client_for(world.lead)
    url = reverse("adjudication_promote", args=[world.project.slug, adjudication.pk])
    response = client.post(url, {"question": question}, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def test_promoting_adds_an_edge_case_and_an_anchor_to_a_new_draft(world: World) -> None:
    world.client_for(world.lead).post(
        reverse("protocol_edit", args=[world.project.slug]), draft_form()
    )  # v2, structured; no draft left
    assert not ProtocolDraft.objects.exists()
    p = pair(world, "q1", "d2")
    p.document.text = "Step one:\n  open the   settings. " + "More words. " * 60
    p.document.save()
    adjudicate(world, p, 1, "A page on the topic that does not answer is **1**.")
    page = promote(world, Adjudication.objects.get())
    assert "Added to the protocol draft as an edge case" in page
    draft = ProtocolDraft.objects.get()
    assert draft.updated_by == world.lead
    assert draft.text.startswith("# Acme protocol")  # made from version 2, as the editor would
    assert draft.content["rulings"] == [
        {"question": "Outdated pages?", "ruling": "1 at most."},
        {
            "question": "How is “Title 2” graded for “first question”?",
            "ruling": "A page on the topic that does not answer is **1**.",
        },
    ]
    anchor = draft.content["anchors"][-1]
    assert anchor["query"] == "first question" and anchor["docid"] == "d2"
    assert anchor["grade"] == 1 and anchor["why"].startswith("A page on the topic")
    assert anchor["title"] == "Title 2"
    assert anchor["excerpt"].startswith("Step one: open the settings. More words.")
    assert anchor["excerpt"].endswith("…") and len(anchor["excerpt"]) <= 301
    assert Adjudication.objects.get().promoted_at is not None
    # the editor shows it and carries the excerpt through a save
    editor = world.client_for(world.lead).get(reverse("protocol_edit", args=[world.project.slug]))
    assert "“Step one: open the settings." in editor.content.decode()


def test_promoting_adds_to_an_existing_draft_with_the_leads_question(world: World) -> None:
    world.client_for(world.lead).post(
        reverse("protocol_edit", args=[world.project.slug]), draft_form(action="save")
    )
    p = pair(world, "q2", "d1")
    adjudicate(world, p, 0, "Another product's page is 0.")
    promote(world, Adjudication.objects.get(), question="A competitor's page?")
    content = ProtocolDraft.objects.get().content
    assert content["rulings"][-1] == {
        "question": "A competitor's page?",
        "ruling": "Another product's page is 0.",
    }
    assert len(content["anchors"]) == 2 and content["anchors"][0]["docid"] == "d1"


def test_promoting_twice_is_refused_and_changes_nothing(world: World) -> None:
    adjudicate(world, pair(world, "q1", "d1"), 2, "Half an answer is 2.")
    adjudication = Adjudication.objects.get()
    promote(world, adjudication)
    before = ProtocolDraft.objects.get().content
    promoted_at = Adjudication.objects.get().promoted_at
    page = promote(world, adjudication)
    assert "already added to the protocol draft" in page and "not added twice" in page
    assert ProtocolDraft.objects.get().content == before
    assert Adjudication.objects.get().promoted_at == promoted_at


def test_promoting_needs_a_ruling_and_the_standing_adjudication(world: World) -> None:
    p = pair(world, "q1", "d1")
    adjudicate(world, p, 2)
    page = promote(world, Adjudication.objects.get())
    assert "has no ruling to add" in page
    adjudicate(world, p, 3, "Now with a reason.")
    older = Adjudication.objects.order_by("pk").first()
    assert older is not None
    Adjudication.objects.filter(pk=older.pk).update(ruling="an old reason")
    assert "only the standing one can be promoted" in promote(world, older)
    assert not ProtocolDraft.objects.exists()  # refused before any draft was made
    assert not Adjudication.objects.filter(promoted_at__isnull=False).exists()


def test_promoting_a_gold_pair_retires_it_and_says_so(world: World) -> None:
    p = pair(world, "q1", "d3")
    gold = GoldItem.objects.create(pair=p, grade=2, source=GoldSource.LEAD, marked_by=world.lead)
    adjudicate(world, p, 2, "Two steps away is 2.")
    html = (
        world.client_for(world.lead)
        .get(reverse("adjudicate_pair", args=[world.project.slug, p.pk]))
        .content.decode()
    )
    assert 'id="gold-note"' in html
    assert "The pair is a gold item: it will be retired" in html  # in the confirmation
    page = promote(world, Adjudication.objects.get())
    assert "The pair was a gold item: it is retired" in page
    gold.refresh_from_db()
    assert gold.retired_at is not None


def test_the_project_page_links_the_queue_for_leads_only(world: World) -> None:
    url = reverse("project_detail", args=[world.project.slug])
    queue = reverse("adjudicate_queue", args=[world.project.slug])
    assert queue in world.client_for(world.lead).get(url).content.decode()
    assert queue not in world.client_for(world.alice).get(url).content.decode()


def test_a_pair_of_another_project_is_not_found(world: World, tmp_path: Path) -> None:
    from tests.conftest import small_project

    other = small_project("other")
    stranger = Pair.objects.filter(query__project=other).first()
    assert stranger is not None
    url = reverse("adjudicate_pair", args=[world.project.slug, stranger.pk])
    assert world.client_for(world.lead).get(url).status_code == 404


def test_gold_checks_label_nothing_and_one_pairs_answers_are_its_own(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from judging.answers import current_answers
    from judging.models import WorkItem, WorkUnit

    p, other = pair(world, "q1", "d1"), pair(world, "q1", "d2")
    judge(world, "bob", p, 3)
    judge(world, "alice", other, 1)
    gold = WorkUnit.objects.create(
        pool=world.project.pools.get(), query=p.query, position=999, gold_for=world.alice
    )
    WorkItem.objects.create(unit=gold, pair=p, position=0)
    judge(world, "alice", p, 0)  # her gold check: measures her, labels nothing
    out, err = export(world, capsys=capsys)
    assert out.splitlines() == ["q1 0 d1 3", "q1 0 d2 1"] and "0 unresolved" in err
    everyone = current_answers(project_id=world.project.pk)
    assert current_answers(project_id=world.project.pk, pair_id=p.pk) == [
        a for a in everyone if a.pair_id == p.pk
    ]
