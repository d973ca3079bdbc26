"""The release pages, downloads and the `release_qrels` command, end to end through the real
URLs: the downloads equal `export_qrels` and each other, every score the pages show equals
`evaluate` on the downloaded qrels and the runs' files, and only leads see any of it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evaluation.models import Release, RunEvaluation
from formats.trec import RunRow
from jobs.models import Job
from pooling.models import Pair, Run
from pooling.services import run_create
from tests.conftest import DATA
from tests.release_world import ReleaseWorld, release_world, run_file

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(tmp_path: Path) -> ReleaseWorld:
    return release_world(tmp_path)


def body(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


def cut(client: Client, slug: str, commit: Any, **form: str) -> Release:
    data = {"policy": "adjudicated", "unresolved": "lower", "note": ""} | form
    with commit(execute=True):  # the re-scoring job is published at commit (eager Celery)
        response = client.post(reverse("releases", args=[slug]), data)
    assert response.status_code == 302, response.content.decode()[:300]
    return Release.objects.filter(project__slug=slug).latest("number")


def export_qrels(slug: str, *args: str) -> str:
    out = io.StringIO()
    call_command("export_qrels", slug, *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_it_cuts_a_release_from_the_page_and_serves_the_downloads(
    world: ReleaseWorld, django_capture_on_commit_callbacks: Any
) -> None:
    lead, slug = world.client_for(world.lead), world.project.slug
    release = cut(lead, slug, django_capture_on_commit_callbacks, note="first cut")
    assert release.number == 1 and release.note == "first cut"
    page = lead.get(reverse("release_detail", args=[slug, 1])).content.decode()
    assert release.content_hash in page and 'id="rescore-done"' in page
    downloads = {
        kind: lead.get(reverse("release_download", args=[slug, 1, kind]))
        for kind in ("qrels", "beir", "jsonl", "manifest")
    }
    names = {k: r["Content-Disposition"] for k, r in downloads.items()}
    assert names["qrels"] == 'attachment; filename="rel-release-1.qrels"'
    assert all(f"{slug}-release-1" in name for name in names.values())
    qrels = body(downloads["qrels"])
    assert qrels == export_qrels(slug)
    assert hashlib.sha256(qrels.encode()).hexdigest() == release.content_hash
    trec = [line.split() for line in qrels.splitlines()]
    beir = body(downloads["beir"]).splitlines()
    assert beir[0] == "query-id\tcorpus-id\tscore"
    assert [line.split("\t") for line in beir[1:]] == [[q, d, g] for q, _, d, g in trec]
    rows = [json.loads(line) for line in body(downloads["jsonl"]).splitlines()]
    assert [[r["qid"], "0", r["docid"], str(r["grade"])] for r in rows] == trec
    q1d1 = next(r for r in rows if (r["qid"], r["docid"]) == ("q1", "d1"))
    assert q1d1 | {"grade": None} == {
        "qid": "q1", "docid": "d1", "grade": None, "stratum": "head", "source": "adjudicated",
        "by": ["lead"], "judge_version": None, "adjudicated": True,
    }  # fmt: skip
    assert json.loads(body(downloads["manifest"])) == release.manifest


def test_the_llm_release_names_the_judge_version_in_the_jsonl(
    world: ReleaseWorld, django_capture_on_commit_callbacks: Any
) -> None:
    lead, slug = world.client_for(world.lead), world.project.slug
    cut(lead, slug, django_capture_on_commit_callbacks, policy="llm")
    rows = [
        json.loads(x) for x in body(lead.get(f"/p/{slug}/releases/1/download/jsonl/")).splitlines()
    ]
    llm = [r for r in rows if r["source"] == "llm"]
    assert len(llm) == 4 and {r["judge_version"] for r in llm} == {world.version.digest}
    assert all(r["by"] == [] and not r["adjudicated"] for r in llm)


def test_every_score_of_the_history_equals_evaluate_on_the_downloaded_files(
    world: ReleaseWorld, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    lead, slug = world.client_for(world.lead), world.project.slug
    cut(lead, slug, django_capture_on_commit_callbacks)
    qrels = tmp_path / "release.qrels"
    qrels.write_text(body(lead.get(reverse("release_download", args=[slug, 1, "qrels"]))))
    runs = [run_file(run, tmp_path / f"{run.name}.run") for run in world.project.runs.all()]
    out = io.StringIO()
    args = ["--qrels", str(qrels), *[a for run in runs for a in ("--run", str(run))]]
    call_command("evaluate", *args, "--metrics", "ndcg@10,map", "--format", "json", stdout=out)
    expected = json.loads(out.getvalue())["runs"]
    for metric in ("ndcg@10", "map"):
        page = lead.get(reverse("release_history", args=[slug]), {"metric": metric})
        html = page.content.decode()
        for run in runs:
            shown = re.search(
                rf'data-run="{run.stem}">\s*<td>{run.stem}</td>\s*<td class="num[^"]*">([0-9.]+)',
                html,
            )
            assert shown is not None
            assert shown.group(1) == f"{expected[str(run)]['mean'][metric]:.3f}"
        stored = RunEvaluation.objects.get(run__name="b").means[metric]
        assert stored == pytest.approx(expected[str(tmp_path / "b.run")]["mean"][metric], abs=1e-12)


def test_the_history_marks_a_change_made_by_the_judgments(
    world: ReleaseWorld, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    lead, slug = world.client_for(world.lead), world.project.slug
    cut(lead, slug, django_capture_on_commit_callbacks, policy="humans")
    cut(lead, slug, django_capture_on_commit_callbacks, policy="llm")
    html = lead.get(reverse("release_history", args=[slug])).content.decode()
    assert "v1" in html and "v2" in html and "mean change (the judgments)" in html
    assert RunEvaluation.objects.count() == 6
    diff = lead.get(reverse("release_diff", args=[slug, 2]), {"from": 1}).content.decode()
    assert "LLM label" not in diff  # q9 is added (no person labelled it), not regraded
    assert 'id="diff-added">4<' in diff and "adjudication" in diff


def test_a_run_added_later_is_scored_by_the_rescore_button(
    world: ReleaseWorld, django_capture_on_commit_callbacks: Any
) -> None:
    lead, slug = world.client_for(world.lead), world.project.slug
    release = cut(lead, slug, django_capture_on_commit_callbacks)
    ranked = {"q1": [RunRow("q1", "d1", 1, 1.0, "late")]}
    run_create(project=world.project, name="late", ranked=ranked)
    page = lead.get(reverse("release_detail", args=[slug, 1])).content.decode()
    assert "1 run not scored yet" in page
    partial = lead.get(reverse("release_detail", args=[slug, 1]), headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<section class="card" id="rescore"')
    assert "1 run not scored yet" in partial.content.decode()
    response = lead.post(reverse("release_rescore", args=[slug, 1]))
    assert response.status_code == 302
    assert RunEvaluation.objects.filter(release=release).count() == 4
    assert Job.objects.filter(kind="release_rescore").count() == 2


def test_annotators_get_403_and_outsiders_404(
    world: ReleaseWorld, django_capture_on_commit_callbacks: Any
) -> None:
    cut(world.client_for(world.lead), world.project.slug, django_capture_on_commit_callbacks)
    slug = world.project.slug
    urls = [
        reverse("releases", args=[slug]),
        reverse("release_detail", args=[slug, 1]),
        reverse("release_download", args=[slug, 1, "qrels"]),
        reverse("release_diff", args=[slug, 1]) + "?from=1",
        reverse("release_history", args=[slug]),
    ]
    for user, status in ((world.annotator, 403), (world.outsider, 404)):
        client = world.client_for(user)
        for url in urls:
            assert client.get(url).status_code == status, url
        assert (
            client.post(reverse("releases", args=[slug]), {"policy": "humans"}).status_code
            == status
        )
        assert client.post(reverse("release_rescore", args=[slug, 1])).status_code == status
    assert Release.objects.count() == 1


def test_an_unknown_release_or_download_is_404(world: ReleaseWorld) -> None:
    lead, slug = world.client_for(world.lead), world.project.slug
    assert lead.get(reverse("release_detail", args=[slug, 7])).status_code == 404
    Release.objects.create(project=world.project, number=1, policy="humans", content_hash="")
    assert lead.get(reverse("release_download", args=[slug, 1, "xml"])).status_code == 404


def test_the_preview_counts_without_cutting(world: ReleaseWorld) -> None:
    lead = world.client_for(world.lead)
    page = lead.get(reverse("releases", args=["rel"]), {"preview": "1", "policy": "llm"})
    assert "would hold <strong>36</strong> labels" in page.content.decode()
    assert not Release.objects.exists()


# --------------------------------------------------------------------------- the command


def test_the_command_cuts_a_release_and_scores_every_run(world: ReleaseWorld) -> None:
    out = io.StringIO()
    call_command(
        "release_qrels", "rel", "--policy", "llm", "--note", "v1", "--format", "json", stdout=out
    )
    shown = json.loads(out.getvalue())
    release = Release.objects.get()
    assert shown["release"] == 1 and shown["pairs"] == 36 == release.pairs
    assert shown["content_hash"] == release.content_hash and release.note == "v1"
    assert shown["counts"]["source"]["llm"] == 4
    assert shown["rescore"] == {"state": "done", "written": 3, "scored": 3}
    text = io.StringIO()
    call_command("release_qrels", "rel", "--no-rescore", stdout=text)
    assert text.getvalue().startswith("release 2 of rel: 32 labels (adjudicated, unresolved lower)")
    assert RunEvaluation.objects.filter(release__number=2).count() == 0


# --------------------------------------------------------------------------- real data

DL19 = DATA / "trec-dl-2019-passage"
RUNS = ("ICT-BERT2", "ICT-CKNRM_B")


@pytest.mark.data
@pytest.mark.skipif(not DL19.exists(), reason="real TREC DL 2019 data (../shared/data) not present")
def test_real_runs_score_as_evaluate_scores_their_files(tmp_path: Path) -> None:
    """TREC DL 2019 passages: two submitted runs pooled at depth 10, NIST's grades on the
    pooled pairs imported as one assessor's; the release's scores equal `evaluate` on the
    downloaded qrels and the original run files."""
    from annotation.services import project_create

    project_create(slug="dl19", name="DL 2019")
    call_command("import_corpus", "dl19", str(DL19 / "dl2019_passages.jsonl"), stdout=io.StringIO())
    call_command(
        "import_queries", "dl19", str(DL19 / "topics.dl19-passage.txt"), stdout=io.StringIO()
    )
    runs = [DL19 / "runs" / f"{name}.judged-topics.run.gz" for name in RUNS]
    for run in runs:
        call_command("import_runs", "dl19", str(run), stdout=io.StringIO(), stderr=io.StringIO())
    call_command("build_pool", "dl19", "--depth", "10", "--skip-missing", stdout=io.StringIO())
    pooled = set(Pair.objects.values_list("query__qid", "document__docid"))
    nist = [line for line in (DL19 / "qrels.dl19-passage.txt").read_text().splitlines()
            if tuple(line.split()[0:3:2]) in pooled]  # fmt: skip
    (tmp_path / "nist.qrels").write_text("\n".join(nist) + "\n")
    call_command(
        "import_judgments",
        "dl19",
        str(tmp_path / "nist.qrels"),
        "--as",
        "nist",
        stdout=io.StringIO(),
    )
    call_command("release_qrels", "dl19", stdout=io.StringIO())
    release = Release.objects.get()
    assert release.pairs == len(nist)
    qrels = tmp_path / "release.qrels"
    from evaluation.services_release import qrels_text, release_qrels

    qrels.write_text("".join(qrels_text(release_qrels(release=release))))
    plain = []
    for run in runs:
        plain.append(tmp_path / run.stem)
        plain[-1].write_bytes(gzip.decompress(run.read_bytes()))
    out = io.StringIO()
    args = ["--qrels", str(qrels), *[a for run in plain for a in ("--run", str(run))]]
    call_command(
        "evaluate",
        *args,
        "--metrics",
        "ndcg@10,recall@100,mrr,map,p@10,hit@5,hit@10,judged@10",
        "--format",
        "json",
        stdout=out,
    )
    expected = json.loads(out.getvalue())["runs"]
    for path, name in zip(plain, RUNS, strict=True):
        stored = RunEvaluation.objects.get(run=Run.objects.get(name=name))
        assert stored.means == pytest.approx(expected[str(path)]["mean"], abs=1e-12)
        assert stored.queries == expected[str(path)]["queries"]
