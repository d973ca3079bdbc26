"""The per-query inspector through its URL: its numbers are the measures' per-query values
(on real TREC DL 2019 runs and qrels), the ideal ranking, the headroom, hostile titles
escaped, leads only, and only the query's own rows read."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Project
from evaluation.inspect import INSPECTED, inspect_query
from evaluation.measures import evaluate
from evaluation.models import LabelSource, Release, ReleaseLabel, ReleasePolicy, RunEvaluation
from formats.trec import RunRow, read_qrels, read_run
from pooling.models import Run
from pooling.services import run_create
from tests.conftest import DATA, World, small_project

pytestmark = pytest.mark.django_db

DL19 = DATA / "trec-dl-2019-passage"
needs_data = pytest.mark.skipif(
    not DL19.exists(), reason="real TREC DL 2019 data (../shared/data) not present"
)


def make_release(project: Project, labels: Iterable[tuple[str, str, int]]) -> Release:
    """A release holding ``labels`` (qid, docid, grade), numbered after the project's last."""
    labels = sorted(labels)
    digest = hashlib.sha256(repr(labels).encode()).hexdigest()
    number = project.releases.count() + 1
    release = Release.objects.create(
        project=project,
        number=number,
        policy=ReleasePolicy.HUMANS,
        content_hash=digest,
        pairs=len(labels),
    )
    ReleaseLabel.objects.bulk_create(
        ReleaseLabel(
            release=release, qid=q, docid=d, grade=g, source=LabelSource.SINGLE, by=["lena"]
        )
        for q, d, g in labels
    )
    return release


def url(release: Release, run: Run, qid: str | None = None) -> str:
    path = reverse("inspector", args=[release.project.slug, release.number, run.pk])
    return f"{path}?qid={qid}" if qid is not None else path


def shown_values(html: str) -> dict[str, float]:
    """The exact values the page prints (each output's data-server attribute)."""
    found = re.findall(r'data-measure="([^"]+)" data-server="([^"]+)"', html)
    return {name: float(value) for name, value in found}


def script_data(html: str) -> dict:
    match = re.search(r'<script id="inspector-data" type="application/json">(.*?)</script>', html)
    assert match, "the page carries its data as a JSON script tag"
    return json.loads(match.group(1))


def run_a(world: World) -> Run:
    return world.project.runs.get(name="a")


# --------------------------------------------------------------------------- the numbers


@needs_data
def test_it_shows_the_measures_per_query_values_of_real_runs(world: World) -> None:
    qrels = read_qrels(DL19 / "qrels.dl19-passage.txt")
    qids = sorted(qrels)[:6]
    release = make_release(world.project, ((q, d, g) for q in qids for d, g in qrels[q].items()))
    client = world.client_for(world.lead)
    for name in ("bm25base_p", "idst_bert_p1", "TUW19-p3-re"):
        ranked = read_run(DL19 / "runs" / f"{name}.judged-topics.run.gz")
        ranked = {q: rows for q, rows in ranked.items() if q in qids}
        run = run_create(project=world.project, name=name, ranked=ranked)
        expected = evaluate({q: qrels[q] for q in qids}, ranked, list(INSPECTED)).per_query
        for qid in qids:
            response = client.get(url(release, run, qid))
            assert response.status_code == 200
            values = shown_values(response.content.decode())
            for measure in INSPECTED:
                assert math.isclose(values[measure], expected[qid][measure], abs_tol=1e-12), (
                    name,
                    qid,
                    measure,
                )


def test_it_tabulates_each_rank_and_the_ideal_ranking(world: World) -> None:
    # Run a ranks d1, d2, d3 for q1; the release grades d3 highest, d5 (not retrieved) next.
    release = make_release(
        world.project, [("q1", "d1", 1), ("q1", "d3", 3), ("q1", "d5", 2), ("q2", "d1", 0)]
    )
    response = world.client_for(world.lead).get(url(release, run_a(world), "q1"))
    html = response.content.decode()
    seen = response.context["page"].inspection
    assert [(r.rank, r.docid, r.grade) for r in seen.rows] == [
        (1, "d1", 1),
        (2, "d2", None),
        (3, "d3", 3),
    ]
    assert [(r.docid, r.grade, r.run_rank) for r in seen.ideal] == [
        ("d3", 3, 3),
        ("d5", 2, None),
        ("d1", 1, 1),
    ]
    assert "unjudged" in html and "not retrieved" in html
    ideal = html.split('id="ideal-table"')[1]
    assert ideal.index("d3") < ideal.index("d5") < ideal.index("d1")
    # gain 2^g - 1, discount 1/log2(r + 1), contribution and cumulative DCG, per rank
    ranking = html.split('id="ranking-rows"')[1].split("</tbody>")[0]
    assert '<td class="num gain">7</td>' in ranking
    assert '<td class="num discount">0.5000</td>' in ranking  # rank 3
    assert '<td class="num contribution">3.5000</td>' in ranking
    assert '<td class="num cumulative">4.5000</td>' in ranking
    assert shown_values(html)["dcg@10"] == pytest.approx(1 + 3.5)


def test_it_names_the_reranker_headroom_and_the_kind_of_failure(world: World) -> None:
    release = make_release(world.project, [("q1", "d3", 3), ("q1", "d5", 3)])
    response = world.client_for(world.lead).get(url(release, run_a(world), "q1"))
    seen = response.context["page"].inspection
    html = response.content.decode()
    assert (seen.headroom.docid, seen.headroom.from_rank) == ("d3", 3)
    assert seen.headroom.ndcg_after == pytest.approx(7 / (7 + 7 / math.log2(3)))
    assert f"{seen.headroom.gain:+.4f}" in html
    # d5 is relevant and not retrieved at all: a retrieval failure.
    assert seen.values["recall@100"] == 0.5
    assert seen.diagnosis.failure == "retrieval"
    assert "retrieval failure" in html and seen.diagnosis.sentence in html


def test_it_passes_the_script_what_it_needs_as_json(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1), ("q1", "d3", 3), ("q1", "d5", 2)])
    html = world.client_for(world.lead).get(url(release, run_a(world), "q1")).content.decode()
    data = script_data(html)
    assert data["judged"] == [3, 2, 1]
    assert (data["gain"], data["threshold"], data["retrieved"]) == ("exponential", 1, 3)
    assert data["values"]["ndcg@10"] == shown_values(html)["ndcg@10"]
    assert 'data-grade=""' in html  # d2: unjudged
    assert "<script>" not in html.split("<main>")[1]  # no inline script in the page


def test_it_escapes_a_hostile_title(world: World) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    world.project.documents.filter(docid="d2").update(title=hostile)
    release = make_release(world.project, [("q1", "d2", 2)])
    html = world.client_for(world.lead).get(url(release, run_a(world), "q1")).content.decode()
    assert hostile not in html
    escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert escaped in html


def test_it_shows_the_text_of_a_document_without_a_title(world: World) -> None:
    world.project.documents.filter(docid="d1").update(title="")
    release = make_release(world.project, [("q1", "d1", 2)])
    html = world.client_for(world.lead).get(url(release, run_a(world), "q1")).content.decode()
    assert "Text of document 1" in html


# --------------------------------------------------------------------------- navigation


def test_it_picks_among_the_releases_queries_with_their_stored_ndcg(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1), ("q2", "d1", 3)])
    RunEvaluation.objects.create(
        release=release, run=run_a(world), per_query={"q2": {"ndcg@10": 0.8127}}
    )
    client = world.client_for(world.lead)
    first = client.get(url(release, run_a(world)))  # no qid: the release's first query
    assert first.context["page"].qid == "q1"
    assert client.get(url(release, run_a(world), "")).context["page"].qid == "q1"
    html = first.content.decode()
    assert '<option value="q2">q2 · nDCG@10 0.813</option>' in html
    assert 'id="next-query" href="?qid=q2"' in html and "previous-query" not in html
    second = client.get(url(release, run_a(world), "q2")).content.decode()
    assert 'id="previous-query" href="?qid=q1"' in second and "next-query" not in second


def test_it_takes_the_releases_queries_from_the_stored_scores_when_none_was_skipped(
    world: World,
) -> None:
    release = make_release(world.project, [("q1", "d1", 1), ("q2", "d1", 3)])
    per_query = {"q1": {"ndcg@10": 1.0}, "q2": {"ndcg@10": 0.5}}
    evaluation = RunEvaluation.objects.create(
        release=release, run=run_a(world), per_query=per_query, queries={"scored": 2}
    )
    client = world.client_for(world.lead)

    def picker_reads() -> tuple[list[str], list[str]]:
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url(release, run_a(world), "q2"))
        reads = [q["sql"] for q in queries.captured_queries if "DISTINCT" in q["sql"]]
        return [c.qid for c in response.context["page"].choices], reads

    qids, reads = picker_reads()
    assert qids == ["q1", "q2"] and len(reads) == 1  # skipped ones unknown: the labels say
    evaluation.queries = {"scored": 2, "skipped_no_relevant": 0, "missing_from_run": 0}
    evaluation.save()
    assert picker_reads() == (["q1", "q2"], [])


def test_it_checks_the_page_against_the_runs_stored_scores(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1), ("q1", "d3", 3)])
    values = inspect_query(["d1", "d2", "d3"], {"d1": 1, "d3": 3}).values
    evaluation = RunEvaluation.objects.create(
        release=release, run=run_a(world), per_query={"q1": {**values, "p@10": 0.2}}
    )
    client = world.client_for(world.lead)
    assert "hold the same numbers" in client.get(url(release, run_a(world), "q1")).content.decode()
    evaluation.per_query = {"q1": {**values, "ndcg@10": 0.5}}
    evaluation.save()
    assert (
        "differ from these numbers" in client.get(url(release, run_a(world), "q1")).content.decode()
    )


def test_it_answers_404_for_a_query_the_release_does_not_label(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1)])
    client = world.client_for(world.lead)
    assert client.get(url(release, run_a(world), "q2")).status_code == 404
    assert client.get(url(release, run_a(world), "nope")).status_code == 404


def test_it_shows_a_query_the_run_lacks_as_all_zero(world: World) -> None:
    run = run_create(
        project=world.project, name="c", ranked={"q1": [RunRow("q1", "d1", 1, 1.0, "c")]}
    )
    release = make_release(world.project, [("q1", "d1", 1), ("q2", "d4", 2)])
    response = world.client_for(world.lead).get(url(release, run, "q2"))
    assert response.status_code == 200
    assert set(shown_values(response.content.decode()).values()) == {0.0}
    assert "retrieved nothing" in response.content.decode()


# --------------------------------------------------------------------------- access


def test_it_is_for_leads_only(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1)])
    page = url(release, run_a(world), "q1")
    assert world.client_for(world.lead).get(page).status_code == 200
    assert world.client_for(world.alice).get(page).status_code == 403
    assert world.client_for(world.outsider).get(page).status_code == 404


def test_it_answers_404_for_another_projects_run_or_an_unknown_release(world: World) -> None:
    other = small_project("other")
    release = make_release(world.project, [("q1", "d1", 1)])
    client = world.client_for(world.lead)
    assert client.get(url(release, other.runs.get(name="a"), "q1")).status_code == 404
    missing = reverse("inspector", args=[world.project.slug, 9, run_a(world).pk])
    assert client.get(missing).status_code == 404


# --------------------------------------------------------------------------- reads


def test_it_reads_only_the_querys_rows(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1), ("q2", "d2", 2)])
    client = world.client_for(world.lead)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url(release, run_a(world), "q1")).status_code == 200
    reads = [q["sql"] for q in queries.captured_queries]
    results = [sql for sql in reads if "pooling_runresult" in sql]
    labels = [sql for sql in reads if "evaluation_releaselabel" in sql and "DISTINCT" not in sql]
    assert len(results) == 1 and "'q1'" in results[0]
    assert len(labels) == 1 and "'q1'" in labels[0]
    assert len(reads) <= 12, reads


def test_its_core_is_the_one_behind_the_page(world: World) -> None:
    release = make_release(world.project, [("q1", "d1", 1), ("q1", "d3", 3)])
    response = world.client_for(world.lead).get(url(release, run_a(world), "q1"))
    expected = inspect_query(["d1", "d2", "d3"], {"d1": 1, "d3": 3})
    assert response.context["page"].inspection == expected
