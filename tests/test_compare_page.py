"""The paired comparison page and the must-never-break list, in the browser's requests: the
page's numbers are `compare`'s on the release's qrels and the runs' files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from evaluation.gate import read_must_never_break
from evaluation.models import MustNeverBreak
from tests.compare_world import Compared, compared_world
from tests.conftest import World

pytestmark = pytest.mark.django_db

PAGE = "/p/acme/releases/1/compare/"
LIST = "/p/acme/must-never-break/"
CHOSEN = {"baseline": "r-base", "candidate": "r-cand", "metric": "ndcg@10"}


@pytest.fixture
def compared(world: World, tmp_path: Path) -> Compared:
    return compared_world(world.project, tmp_path)


def compare(compared: Compared, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    args = [
        "--baseline",
        str(compared.run_paths["base"]),
        "--candidate",
        str(compared.run_paths["cand"]),
        *extra,
    ]
    try:
        call_command("compare", *args, stdout=out)
    except SystemExit as stop:
        return int(str(stop.code)), out.getvalue()
    return 0, out.getvalue()


def test_it_shows_the_numbers_compare_prints_on_the_downloaded_files(
    compared: Compared, world: World
) -> None:
    response = world.client_for(world.lead).get(PAGE, CHOSEN)
    assert response.status_code == 200
    report = response.context["report"]
    code, raw = compare(compared, "--qrels", str(compared.qrels_path), "--format", "json")
    expected = json.loads(raw)
    assert {k: v for k, v in report.as_dict().items()} == {
        k: v for k, v in expected.items() if k not in ("contract", "missing_from_run")
    }
    assert report.exit_code == code
    # The five lines are the command's, word for word (the set named as the release).
    _, text = compare(compared, "--release", "acme@1")
    printed = dict(line.split(None, 1) for line in text.splitlines())
    lines = dict(response.context["lines"])
    assert lines["set"] == printed["eval"]
    assert lines["metric"] == printed["metric"]
    assert printed["result"].startswith(lines["result"])
    assert lines["verdict"] == printed["verdict"]
    page = response.content.decode()
    assert lines["result"] in page
    assert "missing from a run, scored 0: 0 from the baseline, 5 from the candidate" in page


def test_it_draws_the_interval_and_the_differences(compared: Compared, world: World) -> None:
    response = world.client_for(world.lead).get(PAGE, CHOSEN)
    page = response.content.decode()
    assert page.count('<svg class="plot"') == 2
    assert 'id="ci-bar"' in page
    histogram = response.context["histogram"]
    assert sum(bar.count for bar in histogram.bars) == 40
    plot = response.context["plot"]
    assert plot.lo <= plot.mean <= plot.hi
    report = response.context["report"]
    assert (plot.hi < plot.zero) == (report.ci[1] < 0)


def test_it_links_the_worst_and_best_queries_to_the_inspector(
    compared: Compared, world: World
) -> None:
    response = world.client_for(world.lead).get(PAGE, CHOSEN)
    worst, best = response.context["worst"], response.context["best"]
    assert worst and best
    assert worst[0]["qid"] == response.context["report"].worst_query()["qid"]
    cand = compared.runs["cand"].pk
    assert worst[0]["candidate_url"] == f"/p/acme/releases/1/inspect/{cand}/?qid={worst[0]['qid']}"
    assert best[0]["diff"] == max(r["diff"] for r in best)
    assert worst[0]["candidate_url"].replace("&", "&amp;") in response.content.decode()


def test_it_reads_the_stored_scores_only(
    compared: Compared, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("scored at request time")

    monkeypatch.setattr("evaluation.services_compare.evaluate", refuse)
    monkeypatch.setattr("evaluation.measures.evaluate", refuse)
    assert world.client_for(world.lead).get(PAGE, CHOSEN).status_code == 200


def test_it_lists_the_broken_must_never_break_cases(compared: Compared, world: World) -> None:
    ranked = [line.split()[2] for line in compared.run_paths["cand"].read_text().splitlines()]
    MustNeverBreak.objects.create(project=world.project, qid="q00", docid=ranked[9])
    MustNeverBreak.objects.create(project=world.project, qid="q01", docid="nowhere")
    response = world.client_for(world.lead).get(PAGE, CHOSEN)
    violations = response.context["violations"]
    assert [(v.qid, v.rank) for v in violations] == [("q00", 10), ("q01", None)]
    page = response.content.decode()
    assert "gold nowhere not retrieved" in page
    assert 'id="exit-code">1<' in page
    code, raw = compare(compared, "--release", "acme@1", "--format", "json")
    assert code == 1
    assert json.loads(raw)["must_never_break_violations"] == [v.as_dict() for v in violations]


def test_it_offers_the_runs_and_refuses_one_run_twice(compared: Compared, world: World) -> None:
    client = world.client_for(world.lead)
    response = client.get(PAGE)
    assert response.status_code == 200
    assert "report" not in response.context
    assert 'value="r-same"' in response.content.decode()
    response = client.get(PAGE, {**CHOSEN, "candidate": "r-base"})
    assert response.status_code == 400
    assert "Choose two different runs." in response.content.decode()
    response = client.get(PAGE, {**CHOSEN, "metric": "ndcg@3"})
    assert response.status_code == 400


def test_it_is_for_leads(compared: Compared, world: World) -> None:
    assert world.client_for(world.alice).get(PAGE, CHOSEN).status_code == 403
    assert world.client_for(world.outsider).get(PAGE, CHOSEN).status_code == 404
    assert world.client_for(world.lead).get(PAGE.replace("/1/", "/4/")).status_code == 404
    assert world.client_for(world.alice).get(LIST).status_code == 403
    assert world.client_for(world.outsider).get(LIST).status_code == 404


# ---------------------------------------------------------------------------------------------
# The must-never-break list
# ---------------------------------------------------------------------------------------------


def test_it_adds_a_case_of_a_query_of_the_project(compared: Compared, world: World) -> None:
    client = world.client_for(world.lead)
    response = client.post(LIST, {"action": "add", "qid": "q03", "docid": "d0", "note": "refunds"})
    assert response.status_code == 302
    case = MustNeverBreak.objects.get()
    assert (case.qid, case.docid, case.note, case.added_by) == ("q03", "d0", "refunds", world.lead)
    response = client.post(LIST, {"action": "add", "qid": "q99", "docid": "d0"})
    assert response.status_code == 400
    assert "query &#x27;q99&#x27; is not a query of project" in response.content.decode()
    assert MustNeverBreak.objects.count() == 1


def test_it_removes_a_case(compared: Compared, world: World) -> None:
    case = MustNeverBreak.objects.create(project=world.project, qid="q01", docid="d0")
    client = world.client_for(world.lead)
    assert client.get(f"{LIST}{case.pk}/remove/").status_code == 405
    assert client.post(f"{LIST}{case.pk}/remove/").status_code == 302
    assert not MustNeverBreak.objects.exists()


def test_it_imports_and_exports_the_compare_file(
    compared: Compared, world: World, tmp_path: Path
) -> None:
    client = world.client_for(world.lead)
    text = b"# the cases\nq00 d3  # the refund page\nq01 d0\n"
    upload = SimpleUploadedFile("cases.txt", text)
    assert client.post(LIST, {"action": "import", "file": upload}).status_code == 302
    exported = client.get(f"{LIST}download/")
    assert exported["Content-Disposition"] == 'attachment; filename="acme-must-never-break.txt"'
    kept = tmp_path / "kept.txt"
    kept.write_bytes(exported.content)
    assert read_must_never_break(kept) == [("q00", "d3"), ("q01", "d0")]
    assert "q00 d3  # the refund page" in exported.content.decode()
    # The downloaded file gates as the project's list does.
    by_file = compare(
        compared, "--release", "acme@1", "--must-never-break", str(kept), "--format", "json"
    )
    by_list = compare(compared, "--release", "acme@1", "--format", "json")
    assert by_file == by_list


def test_it_imports_all_or_nothing_naming_the_line(compared: Compared, world: World) -> None:
    client = world.client_for(world.lead)
    bad = SimpleUploadedFile("cases.txt", b"q00 d3\nq01 d0 extra\n")
    response = client.post(LIST, {"action": "import", "file": bad})
    assert response.status_code == 400
    assert "cases.txt:2: expected 2 columns" in response.content.decode()
    unknown = SimpleUploadedFile("cases.txt", b"q00 d3\nq77 d0\n")
    response = client.post(LIST, {"action": "import", "file": unknown})
    assert response.status_code == 400
    assert "nothing was imported" in response.content.decode()
    assert not MustNeverBreak.objects.exists()


REAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trec-dl-2019-passage"


@pytest.mark.skipif(not REAL.exists(), reason="real TREC data (../shared/data) not present")
def test_it_matches_compare_on_real_trec_runs(world: World) -> None:
    from formats.trec import read_qrels, read_run
    from pooling.services import run_create
    from tests.compare_world import release_store, scores_store

    qrels_path = REAL / "qrels.dl19-passage.txt"
    paths = {
        "bm25": REAL / "runs" / "bm25base_p.judged-topics.run.gz",
        "bert": REAL / "runs" / "idst_bert_p1.judged-topics.run.gz",
    }
    qrels = read_qrels(qrels_path)
    for qid in qrels:
        world.project.queries.create(qid=qid, text=qid)
    release = release_store(project=world.project, qrels=qrels)
    for name, path in paths.items():
        ranked = read_run(path)
        run = run_create(project=world.project, name=name, ranked=ranked)
        scores_store(release=release, run=run, qrels=qrels, ranked=ranked)
    response = world.client_for(world.lead).get(
        PAGE, {"baseline": "bm25", "candidate": "bert", "metric": "ndcg@10"}
    )
    out = io.StringIO()
    args = ["--qrels", str(qrels_path), "--baseline", str(paths["bm25"])]
    call_command(
        "compare", *args, "--candidate", str(paths["bert"]), "--format", "json", stdout=out
    )
    expected = json.loads(out.getvalue())
    shown = response.context["report"].as_dict()
    assert shown == {k: v for k, v in expected.items() if k not in ("contract", "missing_from_run")}
    assert shown["n"] == 43 and shown["verdict"] == "improvement"
