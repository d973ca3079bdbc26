"""Getting data into and out of a project: what bad input does, and what a failure leaves."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Document, Project, Query
from annotation.services import project_create
from formats.trec import FormatError, read_run, read_run_table
from jobs.models import Job, JobState
from jobs.run import job_run_inline
from jobs.services import job_retry
from judging.models import WorkItem, WorkUnit
from judging.services import pool_build_create
from pooling.models import Pair, Pool, PoolItem, Run, RunResult
from tests.conftest import World

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(db: None) -> Project:
    return project_create(slug="docs", name="Docs")


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def doc(docid: str, text: str = "some text", **more: str) -> str:
    return json.dumps({"_id": docid, "text": text, **more})


def snapshot() -> tuple[int, ...]:
    models = (Document, Query, Run, RunResult, Pool, PoolItem, WorkUnit, Pair, WorkItem)
    return tuple(model.objects.count() for model in models)


def build_pool(project_id: int, run_ids: list[int], depth: int, seed: int) -> Job:
    """Run a pool-build job here, as a worker would; returns it ended."""
    project = Project.objects.get(pk=project_id)
    job = pool_build_create(project=project, run_ids=run_ids, depth=depth, seed=seed)
    job_run_inline(job.pk)
    job.refresh_from_db()
    return job


def refused(*args: str) -> str:
    """Run a command that must fail, check it changed nothing, return its message."""
    before = snapshot()
    with pytest.raises(CommandError) as error:
        call_command(*args)
    assert snapshot() == before
    return str(error.value)


# --- NUL characters and ids longer than a column holds (PostgreSQL refused them with a
# --- server error; SQLite stored them, and the qrels written from them broke TREC tools)


def test_it_refuses_a_nul_in_a_document_text_naming_the_line(project, tmp_path: Path) -> None:
    call_command("import_corpus", "docs", str(write(tmp_path / "a.jsonl", [doc("a")])))
    lines = [doc(f"d{i}") for i in range(50)] + [doc("bad", "before\u0000after")]
    message = refused("import_corpus", "docs", str(write(tmp_path / "c.jsonl", lines)))
    assert "c.jsonl:51: the text holds a NUL character" in message


def test_it_refuses_a_nul_in_a_tsv_title_or_a_query_description(project, tmp_path: Path) -> None:
    tsv = write(tmp_path / "c.tsv", ["a\tTitle\tText", "b\tTi\x00tle\tText"])
    assert "c.tsv:2: the title holds a NUL" in refused("import_corpus", "docs", str(tsv))
    topics = [json.dumps({"_id": "q1", "text": "x", "narrative": "n\u0000"})]
    path = write(tmp_path / "q.jsonl", topics)
    assert "q.jsonl:1: the description holds a NUL" in refused("import_queries", "docs", str(path))


def test_it_refuses_a_nul_in_a_run_line(project, tmp_path: Path) -> None:
    run = write(tmp_path / "r.run", ["q1 Q0 a 1 2.0 s", "q1 Q0 b\x00 2 1.0 s"])
    assert "r.run:2: the line holds a NUL character" in refused("import_runs", "docs", str(run))


def test_every_run_reader_refuses_a_nul(tmp_path: Path) -> None:
    run = write(tmp_path / "r.run", ["q1 Q0 a 1 2.0 s", "q1 Q0 a\x00 1 2.0 s"])
    for read in (read_run, read_run_table):
        with pytest.raises(FormatError, match=r"r\.run:2: the line holds a NUL"):
            read(run)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("evaluate", ("--qrels", "QRELS", "--run", "NUL_RUN")),
        ("evaluate", ("--qrels", "NUL_QRELS", "--run", "RUN")),
        ("pool", ("--run", "RUN", "--run", "NUL_RUN", "--depth", "3")),
        ("compare", ("--qrels", "QRELS", "--baseline", "RUN", "--candidate", "NUL_RUN")),
        ("agreement", ("--a", "QRELS", "--b", "NUL_QRELS")),
    ],
)
def test_the_file_commands_refuse_a_nul_as_import_runs_does(
    tmp_path: Path, command: str, args: tuple[str, ...]
) -> None:
    # One rule for every reader: trec_eval would cut the id at the NUL and score differently.
    files = {
        "RUN": write(tmp_path / "RUN", ["q1 Q0 a 1 2.0 s", "q1 Q0 b 2 1.0 s"]),
        "NUL_RUN": write(tmp_path / "NUL_RUN", ["q1 Q0 a 1 2.0 s", "q1 Q0 b\x00 2 1.0 s"]),
        "QRELS": write(tmp_path / "QRELS", ["q1 0 a 1", "q1 0 b 0"]),
        "NUL_QRELS": write(tmp_path / "NUL_QRELS", ["q1 0 a 1", "q1 0 \x00b 0"]),
    }
    with pytest.raises(CommandError, match=r"NUL_(RUN|QRELS):2: the line holds a NUL character"):
        call_command(command, *(str(files.get(arg, arg)) for arg in args), stdout=io.StringIO())


def test_it_refuses_ids_longer_than_the_database_holds(project, tmp_path: Path) -> None:
    long_id = "x" * 201
    corpus = write(tmp_path / "c.tsv", ["a\ttext", f"{long_id}\ttext"])
    assert "c.tsv:2: document id 'xxx" in refused("import_corpus", "docs", str(corpus))
    queries = write(tmp_path / "q.tsv", [f"{long_id}\tquestion"])
    assert "(at most 200)" in refused("import_queries", "docs", str(queries))
    run = write(tmp_path / "r.run", ["q1 Q0 a 1 2.0 s", f"q1 Q0 {long_id} 2 1.0 s"])
    assert "r.run:2: document id" in refused("import_runs", "docs", str(run))
    tagged = write(tmp_path / "t.run", [f"q1 Q0 a 1 2.0 {long_id}"])
    assert "run name is 201 characters" in refused("import_runs", "docs", str(tagged))
    # exactly at the limit is fine
    call_command("import_corpus", "docs", str(write(tmp_path / "ok.tsv", ["y" * 200 + "\tt"])))
    assert Document.objects.filter(docid="y" * 200).exists()


# --- empty files: "0 created" (or an empty run under --name) hid a wrong path


@pytest.mark.parametrize("content", [b"", b"\n\n", b"\xef\xbb\xbf\r\n  \r\n"])
def test_it_refuses_an_empty_file(project, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    assert "empty.txt: the file holds no documents" in refused("import_corpus", "docs", str(path))
    assert "empty.txt: the file holds no queries" in refused("import_queries", "docs", str(path))
    assert "the run file is empty" in refused("import_runs", "docs", str(path))
    assert "the run file is empty" in refused("import_runs", "docs", str(path), "--name", "x")


# --- a pool with nothing in it became the current pool and took the judges' work away


def test_it_refuses_a_pool_with_no_pair_to_judge(project, tmp_path: Path) -> None:
    call_command("import_corpus", "docs", str(write(tmp_path / "c.tsv", ["a\ttext", "b\ttext"])))
    run = write(tmp_path / "r.run", ["Q1 Q0 a 1 1.0 s", "q2 Q0 zz 1 1.0 s"])
    call_command("import_runs", "docs", str(run))
    assert "has no queries to pool" in refused("build_pool", "docs")
    call_command("import_queries", "docs", str(write(tmp_path / "q.tsv", ["q1\tone", "q3\t3"])))
    message = refused("build_pool", "docs", "--skip-missing")
    assert "none of the runs' queries is a query of 'docs' (project queries: q1, q3)" in message
    call_command("import_queries", "docs", str(write(tmp_path / "q2.tsv", ["q2\ttwo"])))
    message = refused("build_pool", "docs", "--skip-missing")
    assert "every pooled document is missing from the corpus" in message


def test_the_pool_task_builds_nothing_when_nothing_is_to_judge(project, tmp_path: Path) -> None:
    call_command("import_corpus", "docs", str(write(tmp_path / "c.tsv", ["a\ttext"])))
    call_command("import_queries", "docs", str(write(tmp_path / "q.tsv", ["q1\tone"])))
    call_command("import_runs", "docs", str(write(tmp_path / "r.run", ["Q1 Q0 a 1 1.0 s"])))
    before = snapshot()
    job = build_pool(project.pk, [Run.objects.get().pk], 10, 1)
    assert job.state == JobState.FAILED and not job.retryable and job.error
    assert snapshot() == before


# --- exports


def judge(item: PoolItem, user, kind: str = "grade", grade: int | None = None) -> None:
    from judging.models import Judgment

    Judgment.objects.create(pair=item.pair, user=user, kind=kind, grade=grade, seconds_spent=1)


def test_it_refuses_an_unknown_annotator_and_leaves_the_file_alone(
    world: World, tmp_path: Path
) -> None:
    from django.urls import reverse

    out = tmp_path / "bob.qrels"
    out.write_text("kept\n")
    with pytest.raises(CommandError, match=r"no user named 'bbo'\. Nothing was written"):
        call_command("export_qrels", world.project.slug, "--annotator", "bbo", "-o", str(out))
    assert out.read_text() == "kept\n"
    lead = world.client_for(world.lead)
    url = reverse("qrels_download", args=[world.project.slug])
    response = lead.get(url, {"annotator": "bbo"})
    assert response.status_code == 400
    assert "no user named 'bbo'" in response.content.decode()
    # a member with no grade yet is no mistake: an empty file
    call_command("export_qrels", world.project.slug, "--annotator", "bob", "-o", str(out))
    assert out.read_text() == ""


def test_it_says_when_the_output_cannot_be_written(world: World, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="No such file or directory"):
        call_command("export_qrels", world.project.slug, "-o", str(tmp_path / "no" / "q.qrels"))


def test_the_exported_qrels_reimport_and_score_as_the_grades_say(
    world: World, tmp_path: Path
) -> None:
    from formats.trec import RunRow, read_qrels, write_run

    pool = Pool.objects.get(project=world.project)
    items = {
        (i.pair.query.qid, i.pair.document.docid): i
        for i in pool.items.select_related("pair__query", "pair__document")
    }
    alice, bob = world.alice, world.bob
    judge(items["q1", "d1"], alice, grade=3)
    judge(items["q1", "d1"], alice, grade=2)  # her current grade
    judge(items["q1", "d1"], bob, grade=3)  # the judges differ: the lower grade is written
    judge(items["q1", "d2"], alice, "unsure")
    judge(items["q1", "d3"], bob, grade=1)
    judge(items["q1", "d3"], bob, "undo")
    judge(items["q2", "d1"], bob, grade=1)
    judge(items["q2", "d2"], alice, grade=3)
    out = tmp_path / "golden.qrels"
    call_command("export_qrels", world.project.slug, "-o", str(out))
    expected = {"q1": {"d1": 2}, "q2": {"d1": 1, "d2": 3}}
    assert read_qrels(out) == expected
    assert out.read_text().splitlines() == ["q1 0 d1 2", "q2 0 d1 1", "q2 0 d2 3"]

    run = tmp_path / "a.run"
    with run.open("w") as fh:
        stored = Run.objects.get(project=world.project, name="a").results.order_by("qid", "rank")
        write_run((RunRow(r.qid, r.docid, r.rank, r.score, "a") for r in stored), fh)
    hand = write(tmp_path / "hand.qrels", ["q1 0 d1 2", "q2 0 d1 1", "q2 0 d2 3"])
    scores = []
    for qrels in (out, hand):
        buffer = io.StringIO()
        call_command(
            "evaluate", "--qrels", str(qrels), "--run", str(run), "--format", "json", stdout=buffer
        )
        scores.append(json.loads(buffer.getvalue())["runs"][str(run)])
    assert scores[0] == scores[1]
    assert scores[0]["queries"]["scored"] == 2


# --- a retried pool task, and a failure after part of the work


def test_a_pool_task_failing_midway_keeps_nothing_and_its_retry_builds_one_pool(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    import judging.pools

    runs = [run.pk for run in world.project.runs.all()]
    before = snapshot()

    def crash(*args: object) -> int:
        raise ConnectionError("the database went away after the pool items")

    monkeypatch.setattr(judging.pools, "_units_write", crash)
    job = build_pool(world.project.pk, runs, 2, 11)  # transient: retried, then failed
    assert (job.state, job.retryable, job.attempts) == (JobState.FAILED, True, job.max_attempts)
    assert snapshot() == before
    monkeypatch.undo()
    job_retry(job=job)  # eager: runs here
    job.refresh_from_db()
    assert job.result is not None
    first = job.result["pool_id"]
    again = build_pool(world.project.pk, runs[::-1], 2, 11).result
    assert again == job.result and again["pool_id"] == first
    after = snapshot()
    assert after[4] == before[4] + 1  # one pool more, with its items and work units once
    assert after[5] - before[5] == PoolItem.objects.filter(pool_id=first).count()
    assert after[6] - before[6] == WorkUnit.objects.filter(pool_id=first).count() == 2


# --- real data


DL19 = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl-2019-passage"


@pytest.mark.data
@pytest.mark.skipif(not DL19.exists(), reason="real TREC DL 2019 data (../shared/data) not present")
def test_it_imports_trec_dl_2019_and_refuses_a_second_import_of_the_run(
    project, tmp_path: Path
) -> None:
    call_command("import_corpus", "docs", str(DL19 / "dl2019_passages.jsonl"))
    call_command("import_queries", "docs", str(DL19 / "topics.dl19-passage.txt"))
    run = DL19 / "runs" / "ICT-BERT2.judged-topics.run.gz"
    call_command("import_runs", "docs", str(run))
    assert (Document.objects.count(), Query.objects.count()) == (10818, 43)
    assert RunResult.objects.count() == 860
    # re-running: documents and queries are left as they were, the run is refused
    out = io.StringIO()
    call_command("import_corpus", "docs", str(DL19 / "dl2019_passages.jsonl"), stdout=out)
    assert "0 created, 10818 already present" in out.getvalue()
    assert "already has a run named 'ICT-BERT2'" in refused("import_runs", "docs", str(run))
    call_command("build_pool", "docs", "--depth", "10", "--skip-missing")
    assert PoolItem.objects.count() > 0


def test_the_pool_task_refuses_runs_of_another_project(world: World) -> None:
    from annotation.services import project_create
    from formats.trec import RunRow
    from pooling.services import run_create

    other = project_create(slug="other", name="Other")
    foreign = run_create(project=other, name="x", ranked={"q": [RunRow("q", "d", 1, 1.0, "x")]})
    runs = [run.pk for run in world.project.runs.all()]
    before = snapshot()
    job = build_pool(world.project.pk, [*runs, foreign.pk], 2, 11)
    assert job.state == JobState.FAILED and "not this project's" in job.error
    assert snapshot() == before
