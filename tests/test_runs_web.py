"""Queries out, runs in: the pool page's downloads, run uploads and baselines, through the real
URLs, and the commands that do the same (export_queries, import_runs, run_baselines)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from annotation.models import Document, Project, Query, Role
from annotation.services import membership_set, project_create
from formats.beir import QUERY_FORMATS
from jobs.models import Job, JobState
from jobs.run import job_run_inline
from pooling.models import Pool, PoolItem, Run, RunResult
from pooling.services_runs import RUN_IMPORT
from pooling.views_runs import QUERY_DOWNLOADS
from tests.conftest import World

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def snapshot() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Document, Query, Run, RunResult, Pool, PoolItem))


def run_file(name: str, lines: list[str], compressed: bool = False) -> SimpleUploadedFile:
    content = "".join(line + "\n" for line in lines).encode()
    return SimpleUploadedFile(name, gzip.compress(content) if compressed else content)


def upload(client: Client, slug: str, *files: SimpleUploadedFile, name: str = "") -> Job | None:
    response = client.post(
        reverse("runs_upload", args=[slug]), {"run_files": list(files), "name": name}
    )
    assert response.status_code == 302, response.content
    return Job.objects.filter(kind=RUN_IMPORT).order_by("-pk").first()


def pool_page(world: World) -> str:
    return world.client_for(world.lead).get(reverse("pool_detail", args=["acme"])).content.decode()


def download(client: Client, slug: str, **params: str) -> tuple[int, str, str]:
    response = client.get(reverse("queries_download", args=[slug]), params)
    if response.status_code != 200:
        return response.status_code, "", response.content.decode()
    body = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    return response.status_code, response["Content-Disposition"], body


# --------------------------------------------------------------------------- queries out


def add_queries(project: Project) -> None:
    project.queries.create(
        qid="q3", text='new "R&D" <question>', description="What it asks.", stratum="tail"
    )
    project.queries.create(qid="q4", text="tab\there", stratum="head")


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "xml"])
def test_it_downloads_the_queries_and_import_queries_reads_them_back(
    world: World, fmt: str, tmp_path: Path
) -> None:
    add_queries(world.project)
    status, disposition, body = download(world.client_for(world.lead), "acme", format=fmt)
    assert status == 200 and f'filename="acme-queries.{fmt}"' in disposition
    path = tmp_path / f"queries.{fmt}"
    path.write_text(body, encoding="utf-8", newline="")
    copy = project_create(slug="copy", name="Copy")
    call_command("import_queries", "copy", str(path), stdout=io.StringIO())
    fields = ["qid", "text", "description", "stratum"]
    original = list(world.project.queries.order_by("pk").values_list(*fields))
    back = list(copy.queries.order_by("pk").values_list(*fields))
    if fmt == "jsonl":
        assert back == original  # everything
    elif fmt == "xml":
        assert back == [(q, t, d, "") for q, t, d, _ in original]  # no strata in topics
    else:
        assert back == [(q, t.replace("\t", " "), "", "") for q, t, _, _ in original]


def test_it_downloads_only_the_queries_without_runs(world: World) -> None:
    add_queries(world.project)
    lead = world.client_for(world.lead)
    _, disposition, body = download(lead, "acme", format="tsv", without_runs="1")
    assert "acme-queries-without-runs.tsv" in disposition
    assert body == 'q3\tnew "R&D" <question>\nq4\ttab here\n'  # q1 and q2 have runs
    assert "2 without runs yet" in pool_page(world)


def test_it_refuses_an_unknown_format_and_keeps_the_queries_from_others(world: World) -> None:
    assert QUERY_DOWNLOADS.keys() == QUERY_FORMATS.keys()  # the page offers every writer
    assert download(world.client_for(world.lead), "acme", format="csv")[0] == 400
    assert download(world.client_for(world.alice), "acme")[0] == 403
    assert download(world.client_for(world.outsider), "acme")[0] == 404


def test_it_refuses_a_tsv_the_readers_would_misread_before_sending_anything(
    world: World,
) -> None:
    world.project.queries.all().delete()
    world.project.queries.create(qid="{1", text="braces")
    status, _, message = download(world.client_for(world.lead), "acme", format="tsv")
    assert status == 400 and "download JSONL instead" in message


def test_export_queries_writes_each_format_to_stdout_or_a_file(
    world: World, tmp_path: Path, capsys
) -> None:
    add_queries(world.project)
    out = io.StringIO()
    call_command("export_queries", "acme", "--without-runs", stdout=out)
    assert out.getvalue() == 'q3\tnew "R&D" <question>\nq4\ttab here\n'
    assert "2 queries written (without runs)" in capsys.readouterr().err
    target = tmp_path / "q.jsonl"
    call_command("export_queries", "acme", "--format", "jsonl", "-o", str(target))
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["qid"] for r in records] == ["q1", "q2", "q3", "q4"]
    assert records[2] == {
        "qid": "q3", "text": 'new "R&D" <question>', "description": "What it asks.",
        "stratum": "tail",
    }  # fmt: skip
    call_command("export_queries", "acme", "--format", "xml", "-o", str(tmp_path / "q.xml"))
    assert '<topic number="q3"><query>new "R&amp;D" &lt;question&gt;</query>' in (
        (tmp_path / "q.xml").read_text().replace("&quot;", '"')
    )


def test_export_queries_leaves_an_existing_file_when_it_fails(world: World, tmp_path: Path) -> None:
    world.project.queries.all().delete()
    world.project.queries.create(qid="<1", text="angle")
    target = tmp_path / "q.tsv"
    target.write_text("kept\n")
    with pytest.raises(CommandError, match="Nothing was written"):
        call_command("export_queries", "acme", "-o", str(target))
    assert target.read_text() == "kept\n" and list(tmp_path.iterdir()) == [target]


# --------------------------------------------------------------------------- runs in


def test_it_uploads_runs_and_reports_what_the_project_lacks(world: World, media: Path) -> None:
    lead = world.client_for(world.lead)
    plain = run_file("sys1.run", ["q1 Q0 d1 1 3.0 sys1", "q1 Q0 zz 2 2.0 sys1",
                                  "q9 Q0 d2 1 1.0 sys1", "q9 Q0 yy 2 0.5 sys1"])  # fmt: skip
    packed = run_file("sys2.run.gz", ["q2 Q0 d4 1 2.0 sys2", "q2 Q0 d5 2 1.0 sys2"], True)
    job = upload(lead, "acme", plain, packed)
    assert job is not None and job.state == JobState.DONE, job and job.error
    assert job.result is not None
    runs = {run.name: run for run in Run.objects.filter(project=world.project)}
    assert runs["sys1"].source == "sys1.run" and runs["sys1"].results.count() == 4
    assert runs["sys2"].source == "sys2.run.gz" and runs["sys2"].results.count() == 2
    reports = {r["name"]: r for r in job.result["runs"]}
    assert (reports["sys1"]["missing_documents"], reports["sys1"]["missing_examples"]) == (
        2, ["yy", "zz"]
    )  # fmt: skip
    assert (reports["sys1"]["unknown_queries"], reports["sys1"]["unknown_examples"]) == (1, ["q9"])
    assert reports["sys2"]["missing_documents"] == reports["sys2"]["unknown_queries"] == 0
    assert not any(media.rglob("*.run*"))  # the uploaded files are gone once imported
    page = pool_page(world)
    assert "2 documents not in the corpus" in page  # beside the run
    assert "2 documents named by run &#x27;sys1&#x27; are not in the corpus (e.g. yy, zz)" in page
    assert "build_pool acme --skip-missing" in page and "1 query not in the project" in page


def test_a_bad_file_stores_no_run_of_the_upload_and_names_file_and_line(
    world: World, media: Path
) -> None:
    before = snapshot()
    lead = world.client_for(world.lead)
    good = run_file("good.run", ["q1 Q0 d1 1 2.5 sysA"])
    bad = run_file("bad.run.gz", ["q1 Q0 d1 1 2.5 sysB", "q1 Q0 d2 2 high sysB"], True)
    job = upload(lead, "acme", good, bad)
    assert job is not None and job.state == JobState.FAILED and not job.retryable
    assert job.error == "bad.run.gz:2: score 'high' is not a number"  # the reader's message
    assert snapshot() == before and not any(media.rglob("*.run*"))
    page = pool_page(world)
    assert "bad.run.gz:2: score &#x27;high&#x27; is not a number" in page
    assert "Retrying cannot help" in page and "Nothing of it was stored" in page


@pytest.mark.parametrize(
    ("files", "name", "message"),
    [
        ([("a.run", "q1 Q0 d1 1 1 same"), ("b.run", "q1 Q0 d2 1 1 same")], "",
         "b.run: run &#x27;same&#x27; is also the run of a.run"),
        ([("a.run", "q1 Q0 d1 1 1 a")], "", "already has a run named &#x27;a&#x27;"),
        ([("a.run", "q1 Q0 d1 1 1 x y")], "", "a.run:1: expected 6 columns"),
        ([("empty.run", "")], "", "empty.run: the run file is empty"),
        ([("a.run", "q1 Q0 d1 1 1 t1\nq1 Q0 d2 2 1 t2")], "",
         "a.run: the file holds several run tags (t1, t2); give a name"),
    ],
)  # fmt: skip
def test_it_refuses_an_upload_that_cannot_be_stored_whole(
    world: World, files: list[tuple[str, str]], name: str, message: str
) -> None:
    before = snapshot()
    lead = world.client_for(world.lead)
    job = upload(lead, "acme", *[run_file(n, [c] if c else []) for n, c in files], name=name)
    assert job is not None and job.state == JobState.FAILED
    assert snapshot() == before
    assert message in pool_page(world)


def test_a_run_name_needs_a_single_file_and_names_it(world: World) -> None:
    lead = world.client_for(world.lead)
    files = [run_file("a.run", ["q1 Q0 d1 1 1 t"]), run_file("b.run", ["q1 Q0 d1 1 1 u"])]
    response = lead.post(
        reverse("runs_upload", args=["acme"]), {"run_files": files, "name": "mine"}, follow=True
    )
    assert "A run name needs exactly one file" in response.content.decode()
    assert not Job.objects.filter(kind=RUN_IMPORT).exists()
    job = upload(lead, "acme", run_file("a.run", ["q1 Q0 d1 1 1 t1", "q1 Q0 d2 2 1 t2"]),
                 name="mine")  # fmt: skip
    assert job is not None and job.state == JobState.DONE
    assert Run.objects.get(name="mine").results.count() == 2


def test_it_refuses_an_upload_over_the_limit_and_states_the_limit(
    world: World, settings, media: Path
) -> None:
    settings.RUN_UPLOAD_MAX_BYTES = 50
    lead = world.client_for(world.lead)
    assert "Up to 50\xa0bytes per upload" in pool_page(world)
    lines = [f"q1 Q0 d{i} {i} {10 - i} big" for i in range(1, 5)]
    response = lead.post(
        reverse("runs_upload", args=["acme"]),
        {"run_files": [run_file("big.run", lines)]},
        follow=True,
    )
    page = response.content.decode()
    assert "over this server&#x27;s limit of 50" in page and "import_runs" in page
    assert not Job.objects.filter(kind=RUN_IMPORT).exists() and not any(media.rglob("*"))


def test_it_asks_for_files_and_keeps_uploads_from_annotators_and_outsiders(world: World) -> None:
    url = reverse("runs_upload", args=["acme"])
    response = world.client_for(world.lead).post(url, {}, follow=True)
    assert "Choose one or more run files" in response.content.decode()
    files = {"run_files": [run_file("a.run", ["q1 Q0 d1 1 1 t"])]}
    assert world.client_for(world.alice).post(url, files).status_code == 403
    assert world.client_for(world.outsider).post(url, files).status_code == 404
    assert world.client_for(world.lead).get(url).status_code == 405
    assert not Job.objects.filter(kind=RUN_IMPORT).exists()


def test_the_page_polls_an_upload_until_it_ends(world: World) -> None:
    lead = world.client_for(world.lead)
    url = reverse("runs_status", args=["acme"])
    assert lead.get(url, headers={"HX-Request": "true"})["HX-Refresh"] == "true"  # nothing runs
    job = Job.objects.create(project=world.project, kind=RUN_IMPORT, handler="x", progress=0.4,
                             state=JobState.RUNNING, message="checking a.run (1 of 2)")  # fmt: skip
    page = pool_page(world)
    assert f'hx-get="{url}"' in page and "checking a.run (1 of 2)" in page
    partial = lead.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'id="runs-jobs"' in partial and "<html" not in partial and "40%" in partial
    Job.objects.filter(pk=job.pk).update(state=JobState.DONE, result={"runs": [], "summary": "x"})
    assert lead.get(url, headers={"HX-Request": "true"})["HX-Refresh"] == "true"


def test_a_restarted_import_returns_what_an_earlier_attempt_stored(world: World) -> None:
    lead = world.client_for(world.lead)
    job = upload(lead, "acme", run_file("c.run", ["q1 Q0 d1 1 1 c"]))
    assert job is not None and job.state == JobState.DONE
    # The attempt committed its runs and its result, then died before writing "done".
    Job.objects.filter(pk=job.pk).update(state=JobState.QUEUED, attempts=1)
    job_run_inline(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.DONE and Run.objects.filter(name="c").count() == 1


def test_import_runs_reports_what_the_project_lacks(world: World, tmp_path: Path) -> None:
    path = tmp_path / "r.run"
    path.write_text("q1 Q0 d1 1 2 cmd\nq1 Q0 zz 2 1 cmd\nq7 Q0 d1 1 1 cmd\n")
    out = io.StringIO()
    call_command("import_runs", "acme", str(path), stdout=out)
    assert out.getvalue().splitlines() == [
        "run 'cmd': 3 lines from r.run",
        "  1 documents named by run 'cmd' are not in the corpus (e.g. zz): import the documents "
        "first (import_corpus), or leave them out when pooling (build_pool --skip-missing)",
        "  1 queries of run 'cmd' are not queries of the project (e.g. q7): pooling ignores them",
    ]
    assert "1 document not in the corpus" in pool_page(world)  # the command's runs too
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 x bad\n")
    before = (snapshot(), Job.objects.count())
    with pytest.raises(CommandError, match=r"bad.run:1: score 'x' is not a number\. Nothing"):
        call_command("import_runs", "acme", str(bad))
    assert (snapshot(), Job.objects.count()) == before  # not even a failed job is left


# --------------------------------------------------------------------------- baselines


def corpus_project() -> Project:
    project = project_create(slug="help", name="Help")
    texts = {
        "p1": ("Reset your password", "Open settings and choose reset password."),
        "p2": ("Export notes", "Export notes as PDF or Markdown from the menu."),
        "p3": ("Sync errors", "Error QM-2043 means the sync quota is exceeded."),
    }
    for docid, (title, text) in texts.items():
        project.documents.create(docid=docid, title=title, text=text)
    project.queries.create(qid="1", text="reset password")
    project.queries.create(qid="2", text="QM-2043 sync")
    return project


def test_run_baselines_stores_numbered_runs_and_never_changes_one(world: World) -> None:
    project = corpus_project()
    out = io.StringIO()
    call_command("run_baselines", "help", stdout=out, stderr=io.StringIO())
    names = sorted(project.runs.values_list("name", flat=True))
    assert names == ["bm25", "bm25-title", "tfidf"]
    bm25 = project.runs.get(name="bm25")
    assert list(bm25.results.filter(qid="1").values_list("docid", "rank")) == [("p1", 1)]
    assert "run 'bm25': " in out.getvalue()
    project.queries.create(qid="3", text="export pdf")  # a new query: new runs cover it
    call_command("run_baselines", "help", "--only", "bm25", "--k", "1", stdout=io.StringIO(),
                 stderr=io.StringIO())  # fmt: skip
    second = project.runs.get(name="bm25-2")
    assert sorted(second.results.values_list("qid", flat=True)) == ["1", "2", "3"]
    assert bm25.results.count() == 2 and "top 1 of 3 queries" in second.source
    with pytest.raises(CommandError, match="unknown baseline dense; known: bm25, tfidf"):
        call_command("run_baselines", "help", "--only", "dense")
    empty = project_create(slug="empty", name="Empty")
    with pytest.raises(CommandError, match="no documents; import a corpus first"):
        call_command("run_baselines", empty.slug)


def test_the_baselines_button_runs_them_in_the_background(world: World) -> None:
    project = corpus_project()
    membership_set(project=project, user=world.lead, role=Role.LEAD)
    lead = world.client_for(world.lead)
    page = lead.get(reverse("pool_detail", args=["help"])).content.decode()
    assert 'id="run-baselines"' in page and "data-confirm=" in page
    url = reverse("runs_baselines", args=["help"])
    response = lead.post(url, {"only": ["bm25", "tfidf"], "k": "10"}, follow=True)
    assert "Running bm25, tfidf" in response.content.decode()
    assert sorted(project.runs.values_list("name", flat=True)) == ["bm25", "tfidf"]
    job = Job.objects.get(kind="run_baselines")
    assert job.state == JobState.DONE and job.result is not None
    assert "2 runs stored" in job.result["summary"]
    page = lead.get(reverse("pool_detail", args=["help"])).content.decode()
    assert "2 runs stored: bm25" in page
    response = lead.post(url, {"k": "0", "only": ["bm25"]}, follow=True)
    assert "k must be from 1 to 10,000" in response.content.decode()
    response = lead.post(url, {"k": "10"}, follow=True)
    assert "no baseline chosen" in response.content.decode()
    assert world.client_for(world.alice).post(url).status_code in (403, 404)
