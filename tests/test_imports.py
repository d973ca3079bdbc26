"""Imports through the management commands: bad lines name file and line, and change nothing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction

from annotation.models import Document, Project, Query
from annotation.services import project_create
from pooling.models import Pool, Run, RunResult

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(db: None):
    return project_create(slug="docs", name="Docs")


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def corpus_line(docid: str, text: str = "some text") -> str:
    return json.dumps({"_id": docid, "title": f"T {docid}", "text": text})


def snapshot() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Document, Query, Run, RunResult, Pool))


def test_it_imports_a_beir_corpus_and_a_tsv_corpus(project, tmp_path: Path) -> None:
    jsonl = write(tmp_path / "corpus.jsonl", [corpus_line("a"), corpus_line("b", "<b>x</b>")])
    tsv = write(tmp_path / "more.tsv", ["c\tTitle C\tText C", "a\tignored\tignored"])
    call_command("import_corpus", "docs", str(jsonl))
    call_command("import_corpus", "docs", str(tsv))
    docs = {d.docid: (d.title, d.text) for d in project.documents.all()}
    assert docs == {
        "a": ("T a", "some text"),
        "b": ("T b", "<b>x</b>"),
        "c": ("Title C", "Text C"),
    }


def test_it_rejects_a_malformed_corpus_line_and_keeps_the_database(project, tmp_path: Path) -> None:
    call_command("import_corpus", "docs", str(write(tmp_path / "ok.jsonl", [corpus_line("a")])))
    before = snapshot()
    lines = [corpus_line(f"n{i}") for i in range(2500)]  # more than one insert batch
    lines.insert(2400, '{"_id": "broken", "text": ')
    bad = write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(CommandError) as error:
        call_command("import_corpus", "docs", str(bad))
    assert "bad.jsonl:2401" in str(error.value)
    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_corpus_for_a_project_deleted_meanwhile(project, tmp_path: Path) -> None:
    # The documents' key to their project is checked by the database when the import commits.
    from annotation.services import corpus_import

    Project.objects.filter(pk=project.pk).delete()
    with pytest.raises(IntegrityError):
        corpus_import(project=project, path=write(tmp_path / "c.jsonl", [corpus_line("a")]))
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_a_pool_item_of_a_missing_pool(db: None) -> None:
    # Inserted the way pool_build inserts (COPY on PostgreSQL), past every check in Python.
    from assay.db import bulk_insert
    from pooling.models import PoolItem
    from tests.conftest import small_project

    item = small_project().pools.get().items.first()
    assert item is not None
    missing = Pool.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1
    row = (missing, item.pair_id, "{}", 1, 0)
    columns = ["pool_id", "pair_id", "provenance", "best_rank", "position"]
    before = PoolItem.objects.count()
    with pytest.raises(IntegrityError), transaction.atomic():
        bulk_insert(PoolItem, columns, [row])
    assert PoolItem.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_a_corpus_failing_on_its_last_line_leaves_no_rows(project, tmp_path: Path) -> None:
    # Committed for real (no test transaction around it): the corpus is streamed, so the
    # documents before the bad line were already sent to the database, and are rolled back.
    from annotation.services import corpus_import
    from formats.text import FormatError

    lines = [f"d{i}\tTitle {i}\tText of document {i}" for i in range(25_000)]
    corpus = write(tmp_path / "c.tsv", [*lines, "broken line without a text"])
    with pytest.raises(FormatError, match=r"c.tsv:25001"):
        corpus_import(project=project, path=corpus)
    assert snapshot() == (0, 0, 0, 0, 0)


def test_it_reads_gzip_queries(project, tmp_path: Path) -> None:
    path = tmp_path / "queries.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"_id": "q1", "text": "how do I reset"}) + "\n")
    call_command("import_queries", "docs", str(path))
    assert list(project.queries.values_list("qid", "text")) == [("q1", "how do I reset")]


def test_it_keeps_a_topic_description_and_narrative_for_judges(project, tmp_path: Path) -> None:
    topic = {
        "_id": "q1",
        "text": "reset password",
        "description": "How does one reset a forgotten password?",
        "narrative": " Steps for the web app are relevant; the mobile app is not. ",
    }
    path = write(
        tmp_path / "topics.jsonl", [json.dumps(topic), json.dumps({"_id": "q2", "text": "x"})]
    )
    call_command("import_queries", "docs", str(path))
    descriptions = dict(project.queries.values_list("qid", "description"))
    assert descriptions == {
        "q1": "How does one reset a forgotten password?\n\n"
        "Steps for the web app are relevant; the mobile app is not.",
        "q2": "",
    }


def test_it_rejects_a_malformed_run_line_and_keeps_the_database(project, tmp_path: Path) -> None:
    good = write(tmp_path / "good.run", ["q1 Q0 a 1 2.5 sysA", "q1 Q0 b 2 1.5 sysA"])
    bad = write(tmp_path / "bad.run", ["q1 Q0 a 1 2.5 sysB", "q1 Q0 b 2 high sysB"])
    before = snapshot()
    with pytest.raises(CommandError) as error:
        call_command("import_runs", "docs", str(good), str(bad))
    assert "bad.run:2" in str(error.value)
    assert snapshot() == before  # the good file of the same call was not kept either


def test_it_stores_runs_in_trec_eval_order(project, tmp_path: Path) -> None:
    # The rank column lies and two scores tie: trec_eval orders by score, then docid descending.
    run = write(tmp_path / "r.run", ["q1 Q0 a 1 1.0 s", "q1 Q0 c 2 3.0 s", "q1 Q0 b 3 1.0 s"])
    call_command("import_runs", "docs", str(run))
    stored = Run.objects.get(name="s").results.order_by("rank").values_list("docid", "rank")
    assert list(stored) == [("c", 1), ("b", 2), ("a", 3)]


def test_it_refuses_a_second_run_with_the_same_name(project, tmp_path: Path) -> None:
    run = write(tmp_path / "r.run", ["q1 Q0 a 1 1.0 s"])
    call_command("import_runs", "docs", str(run))
    with pytest.raises(CommandError, match="already has a run named 's'"):
        call_command("import_runs", "docs", str(run))


def test_it_names_the_missing_project(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="create_project nope"):
        call_command("import_corpus", "nope", str(tmp_path / "x.jsonl"))


def test_it_refuses_to_pool_documents_missing_from_the_corpus(project, tmp_path: Path) -> None:
    call_command("import_corpus", "docs", str(write(tmp_path / "c.jsonl", [corpus_line("a")])))
    call_command("import_queries", "docs", str(write(tmp_path / "q.tsv", ["q1\tquestion"])))
    run = write(tmp_path / "r.run", ["q1 Q0 a 1 2.0 s", "q1 Q0 zz 2 1.0 s", "q9 Q0 a 1 1 s"])
    call_command("import_runs", "docs", str(run))
    with pytest.raises(CommandError, match=r"1 pooled documents are not in the corpus .*zz"):
        call_command("build_pool", "docs", "--depth", "10")
    assert not Pool.objects.exists()
    call_command("build_pool", "docs", "--depth", "10", "--skip-missing")
    pool = Pool.objects.get()
    assert list(pool.items.values_list("pair__document__docid", "provenance")) == [("a", {"s": 1})]


def test_deleting_a_project_removes_its_bulk_loaded_rows_and_only_those(db: None) -> None:
    # The cascade is Django's (the database checks the keys): it must leave nothing behind
    # and touch no other project.
    from pooling.models import PoolItem
    from tests.conftest import small_project

    doomed, kept = small_project("doomed"), small_project("kept")
    before = (Document.objects.count(), RunResult.objects.count(), PoolItem.objects.count())
    doomed.delete()
    after = (Document.objects.count(), RunResult.objects.count(), PoolItem.objects.count())
    assert after == tuple(n // 2 for n in before)
    assert not Document.objects.exclude(project=kept).exists()
    assert not RunResult.objects.exclude(run__project=kept).exists()
    assert not PoolItem.objects.exclude(pool__project=kept).exists()
