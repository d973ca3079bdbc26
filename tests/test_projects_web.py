"""A project from nothing, in the browser: create it, upload its corpus and queries (background
imports, all or nothing, with progress), through the real URLs."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

import assay.db
from annotation.models import Document, Project, ProtocolDraft, Query, Role
from annotation.services_protocol import protocol_draft_of
from jobs.models import Job, JobState
from pooling.services_data import CORPUS, data_import_run, data_upload_create
from tests.conftest import World, make_user
from tests.test_jobs import broker_down  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def files_in(media: Path) -> list[Path]:
    return [path for path in media.rglob("*") if path.is_file()] if media.exists() else []


def corpus_lines(n: int, bad_line: int | None = None) -> bytes:
    rows = []
    for i in range(1, n + 1):
        if i == bad_line:
            rows.append('{"_id": "broken", "text": ')  # cut short: invalid JSON
        else:
            rows.append(json.dumps({"_id": f"n{i}", "title": f"T{i}", "text": f"text {i}"}))
    return ("\n".join(rows) + "\n").encode()


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shown(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def data_url(slug: str) -> str:
    return reverse("project_data", args=[slug])


def post_file(client, slug: str, field: str, name: str, content: bytes, **extra):
    return client.post(data_url(slug), {field: SimpleUploadedFile(name, content)}, **extra)


# --- creating a project ---------------------------------------------------------------------


def test_a_lead_creates_a_project_becomes_its_lead_and_is_shown_what_to_do_next(
    world: World,
) -> None:
    client = world.client_for(world.lead)
    assert 'id="new-project"' in client.get(reverse("home")).content.decode()
    data = {"slug": "support", "name": "Support search", "description": "The help centre"}
    response = client.post(reverse("project_new"), data)
    assert response.status_code == 302
    assert response["Location"] == data_url("support")
    project = Project.objects.get(slug="support")
    assert (project.name, project.description) == ("Support search", "The help centre")
    assert project.memberships.get(user=world.lead).role == Role.LEAD
    page = client.get(response["Location"]).content.decode()
    assert "Project Support search created; you are its lead." in page
    for step in ("Upload the corpus", "Upload the queries", "Write and publish the protocol",
                 "Bring in runs", "Build a pool", "Add annotators"):  # fmt: skip
        assert step in page
    assert page.count(">to do<") == 6
    # Nothing is published in the lead's name; the editor opens on a starter draft.
    assert not project.protocols.exists()
    draft = protocol_draft_of(project)
    assert [g.value for g in draft.grades] == [3, 2, 1, 0] and "starter draft" in draft.intro
    editor = client.get(reverse("protocol_edit", args=["support"])).content.decode()
    assert "Perfectly relevant" in editor


def test_a_superuser_creates_a_project_and_the_name_defaults_to_the_slug(db: None) -> None:
    admin = User.objects.create_superuser("root", password="x" * 12)
    client = signed_in(admin)
    response = client.post(reverse("project_new"), {"slug": "kb", "name": ""})
    assert response.status_code == 302
    project = Project.objects.get(slug="kb")
    assert project.name == "kb" and project.memberships.get(user=admin).role == Role.LEAD


def test_an_annotator_cannot_create_projects(world: World) -> None:
    client = world.client_for(world.alice)
    assert 'id="new-project"' not in client.get(reverse("home")).content.decode()
    assert client.get(reverse("project_new")).status_code == 403
    assert client.post(reverse("project_new"), {"slug": "mine"}).status_code == 403
    assert not Project.objects.filter(slug="mine").exists()
    assert signed_in(world.outsider).get(reverse("project_new")).status_code == 403


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("acme", "A project with the slug &#x27;acme&#x27; exists already: choose another."),
        ("my project", "The slug may hold only letters, digits, hyphens and underscores, not"),
        ("é-search", "not &#x27;é&#x27;"),
        ("", "Give the project a slug"),
        ("x" * 65, "The slug is 65 characters long; at most 64."),
    ],
)
def test_a_taken_or_bad_slug_is_refused_with_the_form_kept(
    world: World, slug: str, message: str
) -> None:
    before = Project.objects.count()
    client = world.client_for(world.lead)
    response = client.post(reverse("project_new"), {"slug": slug, "name": "Kept name"})
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page and 'value="Kept name"' in page
    assert Project.objects.count() == before


def test_a_nul_in_the_description_is_refused(world: World) -> None:
    client = world.client_for(world.lead)
    response = client.post(reverse("project_new"), {"slug": "n", "description": "a\x00b"})
    assert response.status_code == 400 and not Project.objects.filter(slug="n").exists()


def test_the_create_project_command_starts_a_draft_and_refuses_a_taken_slug(db: None) -> None:
    call_command("create_project", "cli", "--name", "From the shell", stdout=io.StringIO())
    assert ProtocolDraft.objects.filter(project__slug="cli").exists()
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_project", "cli", stdout=io.StringIO())
    with pytest.raises(CommandError, match="letters, digits"):
        call_command("create_project", "a/b", stdout=io.StringIO())


# --- uploading the corpus and the queries ---------------------------------------------------


def test_a_lead_uploads_a_gzipped_corpus_and_a_query_file_and_sees_the_counts(
    world: World, media: Path
) -> None:
    client = world.client_for(world.lead)
    slug = world.project.slug
    page = client.get(data_url(slug)).content.decode()
    assert "Files up to 10.0\xa0GB (IMPORT_UPLOAD_MAX_BYTES)" in page
    response = post_file(client, slug, "corpus", "corpus.jsonl.gz", gzip.compress(corpus_lines(50)))
    assert response.status_code == 302 and response["Location"] == data_url(slug)
    response = post_file(client, slug, "queries", "topics.tsv", b"n1\tfirst\nn2\tsecond\n")
    assert response.status_code == 302
    jobs = Job.objects.filter(project=world.project).order_by("pk")
    assert [(j.kind, j.state) for j in jobs] == [
        ("corpus_import", JobState.DONE),
        ("queries_import", JobState.DONE),
    ]
    assert jobs[0].result == {
        "created": 50,
        "unchanged": 0,
        "summary": "documents: 50 created, 0 already present (left unchanged)",
    }
    assert world.project.documents.count() == 55 and world.project.queries.count() == 4
    assert Document.objects.get(project=world.project, docid="n7").text == "text 7"
    page = client.get(data_url(slug)).content.decode()
    assert "<dt>documents</dt><dd>55</dd>" in page and "<dt>queries</dt><dd>4</dd>" in page
    assert "corpus.jsonl.gz" in page and "documents: 50 created" in page
    assert files_in(media) == []  # the uploads are deleted once imported


def test_a_corpus_whose_line_3000_is_malformed_stores_nothing_and_says_where(
    world: World, media: Path, monkeypatch
) -> None:
    # Small batches, so that rows before line 3000 have been written when the line fails.
    monkeypatch.setattr(assay.db, "BATCH_SIZE", 500)
    client = world.client_for(world.lead)
    slug = world.project.slug
    response = post_file(client, slug, "corpus", "corpus.jsonl", corpus_lines(3500, bad_line=3000))
    assert response.status_code == 302
    job = Job.objects.get(project=world.project, kind="corpus_import")
    assert job.state == JobState.FAILED and not job.retryable
    assert job.error.startswith("corpus.jsonl:3000: invalid JSON")
    assert world.project.documents.count() == 5  # as before the upload
    page = client.get(data_url(slug)).content.decode()
    assert "corpus.jsonl:3000: invalid JSON" in page and "Nothing of this file was kept." in page
    assert "Retrying cannot help" in page
    assert files_in(media) == []


def test_a_query_file_with_a_duplicate_id_stores_nothing(world: World) -> None:
    client = world.client_for(world.lead)
    content = b"n1\tone\nn2\ttwo\nn1\tagain\n"
    post_file(client, world.project.slug, "queries", "q.tsv", content)
    job = Job.objects.get(project=world.project)
    assert job.error == "q.tsv:3: query n1 appears twice (first at line 1)"
    assert world.project.queries.count() == 2


def test_an_empty_file_is_refused(world: World) -> None:
    post_file(world.client_for(world.lead), world.project.slug, "corpus", "c.jsonl", b"\n")
    assert Job.objects.get(project=world.project).error == "c.jsonl: the file holds no documents"


def test_a_file_over_the_limit_is_refused_before_anything_is_kept(
    world: World, media: Path, settings
) -> None:
    settings.IMPORT_UPLOAD_MAX_BYTES = 100
    client = world.client_for(world.lead)
    response = post_file(client, world.project.slug, "corpus", "c.jsonl", corpus_lines(20))
    assert response.status_code == 302
    message = shown(response)
    assert "over this server's limit of 100\xa0bytes (IMPORT_UPLOAD_MAX_BYTES)" in message
    assert "manage.py import_corpus" in message
    assert not Job.objects.exists() and files_in(media) == []


def test_a_post_without_a_file_says_what_to_choose(world: World) -> None:
    response = world.client_for(world.lead).post(data_url(world.project.slug), {})
    assert "Choose a corpus or a query file" in shown(response)


def test_an_upload_is_refused_when_the_task_queue_is_down_and_nothing_is_kept(
    world: World,
    media: Path,
    broker_down: None,  # noqa: F811
) -> None:
    client = world.client_for(world.lead)
    response = post_file(client, world.project.slug, "corpus", "c.jsonl", corpus_lines(3))
    assert "task queue is unreachable" in shown(response)
    assert not Job.objects.exists() and files_in(media) == []
    assert world.project.documents.count() == 5


def test_the_pages_script_gets_a_redirect_it_can_follow_and_polls_the_imports(
    world: World,
) -> None:
    client = world.client_for(world.lead)
    slug = world.project.slug
    response = post_file(client, slug, "queries", "q.tsv", b"n1\tone\n", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == data_url(slug)
    # Nothing runs: the poll asks the browser to load the whole page again.
    poll = client.get(data_url(slug), HTTP_HX_REQUEST="true")
    assert poll["HX-Refresh"] == "true"
    Job.objects.filter(project=world.project).update(state=JobState.RUNNING, progress=0.4)
    poll = client.get(data_url(slug), HTTP_HX_REQUEST="true")
    body = poll.content.decode()
    assert 'id="imports"' in body and 'hx-trigger="every 1s"' in body and "40%" in body
    assert "<html" not in body


def test_the_import_reports_its_progress_naming_the_file_as_uploaded(world: World) -> None:
    upload = SimpleUploadedFile("big.jsonl.gz", gzip.compress(corpus_lines(5000)))
    job = data_upload_create(project=world.project, kind=CORPUS, upload=upload, user=None)
    seen: list[tuple[float, str]] = []
    report = data_import_run(job=job, progress=lambda f, m: seen.append((f, m)))
    assert report.created == 5000
    fractions = [fraction for fraction, _ in seen]
    assert len(seen) == 6 and fractions == sorted(fractions)  # every 1000 lines, and the end
    assert fractions[-1] == pytest.approx(0.95)
    assert seen[2][1].startswith("big.jsonl.gz: ") and seen[2][1].endswith("read, line 3,000")
    Path(job.params["path"]).unlink()


# --- who may -------------------------------------------------------------------------------


def test_annotators_get_403_and_outsiders_404_on_the_data_page(world: World) -> None:
    slug = world.project.slug
    for user, status in ((world.alice, 403), (world.outsider, 404)):
        client = world.client_for(user)
        assert client.get(data_url(slug)).status_code == status
        response = post_file(client, slug, "queries", "q.tsv", b"z1\tsneaky\n")
        assert response.status_code == status
    assert not Job.objects.exists() and not Query.objects.filter(qid="z1").exists()
    assert world.client_for(world.alice).get(data_url("nope")).status_code == 404


def test_the_project_page_links_leads_to_the_data_page(world: World) -> None:
    url = reverse("project_detail", args=[world.project.slug])
    assert data_url(world.project.slug) in world.client_for(world.lead).get(url).content.decode()
    assert (
        data_url(world.project.slug) not in world.client_for(world.alice).get(url).content.decode()
    )


def test_a_lead_of_one_project_may_create_another_but_not_upload_into_a_foreign_one(
    world: World,
) -> None:
    other_lead = make_user("oscar")
    client = world.client_for(other_lead)
    assert client.get(reverse("project_new")).status_code == 403  # leads nothing yet
    client.post(reverse("project_new"), {"slug": "x"})
    world.client_for(world.lead).post(reverse("project_new"), {"slug": "second"})
    second = Project.objects.get(slug="second")
    assert second.memberships.get().user == world.lead
    assert client.get(data_url("second")).status_code == 404
