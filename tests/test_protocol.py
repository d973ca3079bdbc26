"""The protocol as a versioned object: draft, publish, immutable versions, acknowledgements."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from annotation.models import ProtocolAck, ProtocolDraft, ProtocolVersion
from annotation.services_protocol import ProtocolError, protocol_draft_publish
from judging.models import Judgment
from tests.conftest import World
from tests.judging_helpers import answer, judge_page, shown_item

pytestmark = pytest.mark.django_db


def draft_form(**overrides: object) -> dict[str, object]:
    form: dict[str, object] = {
        "intro": "# Acme protocol\n\nJudge what the *user* needed.",
        "grade_value": ["3", "2", "1", "0", ""],
        "grade_label": ["Perfect", "High", "Related", "Irrelevant", ""],
        "grade_definition": ["answers it", "answers most", "on topic", "nothing useful", ""],
        "anchor_query": ["first question", ""],
        "anchor_docid": ["d1", ""],
        "anchor_grade": ["3", ""],
        "anchor_why": ["the whole answer", ""],
        "ruling_question": ["Outdated pages?", ""],
        "ruling_text": ["1 at most.", ""],
        "action": "publish",
    }
    form.update(overrides)
    return form


def publish_v2(world: World) -> ProtocolVersion:
    client = world.client_for(world.lead)
    response = client.post(reverse("protocol_edit", args=[world.project.slug]), draft_form())
    assert response.status_code == 302, response.content.decode()[:2000]
    return world.project.protocols.get(number=2)


def test_it_publishes_a_draft_as_the_next_version(world: World) -> None:
    v2 = publish_v2(world)
    assert v2.published_by == world.lead
    assert [g["label"] for g in v2.content["grades"]] == [
        "Perfect",
        "High",
        "Related",
        "Irrelevant",
    ]
    assert v2.content["anchors"] == [
        {"query": "first question", "docid": "d1", "grade": 3, "why": "the whole answer",
         "title": "Title 1", "excerpt": ""},
    ]  # fmt: skip
    assert "## Edge cases" in v2.text and "**Outdated pages?** 1 at most." in v2.text
    assert not ProtocolDraft.objects.exists()  # the next edit starts from v2


def test_it_saves_a_draft_without_publishing(world: World) -> None:
    client = world.client_for(world.lead)
    url = reverse("protocol_edit", args=[world.project.slug])
    assert client.post(url, draft_form(action="save")).status_code == 302
    assert world.project.protocols.count() == 1
    page = client.get(url).content.decode()
    assert "Outdated pages?" in page and "Title 1" in page


def test_it_refuses_to_publish_an_incomplete_protocol(world: World) -> None:
    client = world.client_for(world.lead)
    url = reverse("protocol_edit", args=[world.project.slug])
    response = client.post(
        url,
        draft_form(
            anchor_docid=["nope"],
            grade_value=["3", "2"],
            grade_label=["Perfect", "High"],
            grade_definition=["answers it", "answers most"],
        ),
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "Define each grade 0, 1, 2 and 3 exactly once." in html
    assert "document &#x27;nope&#x27; is not in the project&#x27;s corpus" in html
    assert world.project.protocols.count() == 1


def test_it_never_changes_a_published_version(world: World) -> None:
    v1 = world.project.protocols.get(number=1)
    text, content = v1.text, v1.content
    publish_v2(world)
    client = world.client_for(world.lead)
    client.post(reverse("protocol_edit", args=[world.project.slug]), draft_form(intro="changed"))
    v1.refresh_from_db()
    assert (v1.text, v1.content) == (text, content)
    # no edit path: the admin shows versions read-only, even to a superuser
    admin = User.objects.create_superuser("root", password="x" * 12)
    admin_client = world.client_for(admin)
    change = reverse("admin:annotation_protocolversion_change", args=[v1.pk])
    assert admin_client.post(change, {"text": "rewritten", "number": 1}).status_code == 403
    v1.refresh_from_db()
    assert v1.text == text
    with pytest.raises(ProtocolError):
        protocol_draft_publish(project=world.project, user=world.lead)  # no draft left


def test_it_stamps_a_judgment_with_the_version_it_was_made_under(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = answer(client, slug, judge_page(client, slug), 1)
    publish_v2(world)
    page = judge_page(client, slug)
    assert "The protocol has changed: version 2" in page and shown_item(page) is None
    response = client.post(
        reverse("judge_acknowledge", args=[slug, 2]), headers={"HX-Request": "true"}
    )
    page = response.content.decode()
    answer(client, slug, page, 2)
    numbers = list(Judgment.objects.order_by("pk").values_list("protocol__number", flat=True))
    assert numbers == [1, 2]


def test_it_shows_what_changed_and_waits_for_an_acknowledgement(world: World) -> None:
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = answer(client, slug, judge_page(client, slug), 1)
    publish_v2(world)
    # a submission prepared before the change is refused and the change is shown instead
    stale = answer(client, slug, page, 3, status=409)
    assert "version 2 has been published" in stale
    assert 'class="diff-removed"' in stale and 'class="diff-added"' in stale
    assert "Outdated pages?" in stale
    assert Judgment.objects.count() == 1
    api = client.get(reverse("api_next", args=[slug])).json()
    assert api["state"] == "acknowledge" and api["protocol_change"]["seen"] == 1
    client.post(reverse("judge_acknowledge", args=[slug, 2]))
    assert ProtocolAck.objects.filter(user=world.alice, version__number=2).exists()
    assert shown_item(judge_page(client, slug)) is not None


def test_it_asks_nothing_of_a_newcomer(world: World) -> None:
    publish_v2(world)
    page = judge_page(world.client_for(world.bob), world.project.slug)
    assert shown_item(page) is not None and "has changed" not in page


def test_it_shows_the_protocol_panel_with_searchable_rulings(world: World) -> None:
    publish_v2(world)
    page = judge_page(world.client_for(world.bob), world.project.slug)
    assert 'id="protocol-search"' in page and 'id="rulings"' in page
    assert "Perfect</strong>: answers it" in page
    assert "“first question” → <em>Title 1</em>" in page
    assert "<kbd>3</kbd> Perfect" in page  # the grade buttons use the protocol's labels


def test_it_renders_the_inline_marks_of_definitions_anchors_and_rulings_escaped(
    world: World,
) -> None:
    form = draft_form(
        grade_definition=["answers *all* of it", "answers `most`", "on topic", "nothing", ""],
        anchor_why=["the **whole** answer <img src=x onerror=alert(1)>", ""],
        ruling_text=["*Team plan pricing* gets 1 <script>alert(1)</script>", ""],
    )
    client = world.client_for(world.lead)
    assert client.post(reverse("protocol_edit", args=[world.project.slug]), form).status_code == 302
    page = judge_page(world.client_for(world.bob), world.project.slug)
    assert "Perfect</strong>: answers <em>all</em> of it" in page
    assert "answers <code>most</code>" in page
    assert "the <strong>whole</strong> answer &lt;img src=x onerror=alert(1)&gt;" in page
    assert "<em>Team plan pricing</em> gets 1 &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page and "<img src=x" not in page


def test_it_lists_versions_and_their_diffs_to_members(world: World) -> None:
    publish_v2(world)
    client = world.client_for(world.alice)
    slug = world.project.slug
    page = client.get(reverse("protocol_detail", args=[slug])).content.decode()
    assert "version 2" in page and "?v=1" in page
    old = client.get(reverse("protocol_detail", args=[slug]) + "?v=1").content.decode()
    assert "Grade 3: answers it." in old
    diff = client.get(reverse("protocol_diff", args=[slug]) + "?from=1&to=2").content.decode()
    assert 'class="diff-removed"' in diff and "Grade 3: answers it." in diff
