"""The scoreboard of a release, through its URL: the stored scores equal `evaluate` on the
release's qrels and the runs written to files; per stratum, weighted to the log, canary
slices; holes in a run's top 10 lead to the pool preview; access and escaping."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Document, Project, Query, Role
from annotation.services import corpus_import, membership_set, project_create, protocol_publish
from evaluation.measures import Contract
from evaluation.models import Release, RunEvaluation
from evaluation.stats import bootstrap_interval
from formats.trec import RunRow
from judging.services import pool_open
from pooling.models import Pair, Run
from pooling.services import run_create
from tests.board_helpers import STORED_MEASURES, release_stored, write_qrels, write_run
from tests.conftest import make_user

DOCS = [f"d{i:02d}" for i in range(1, 16)]
GAMMA = "<b>gamma</b> & co"
# qid: (text, stratum, inclusion probability)
QUERIES = {
    "q1": ("reset password", "head", 0.5),
    "q2": ("password rules", "head", 1.0),
    "q3": ("sync calendar", "torso", 0.25),
    "q4": ("export calendar", "torso", None),
    "q5": ("dark mode", "tail", 0.1),
    "q6": ("crash on start", "failures", 0.2),
    "q7": ("nothing relevant", "tail", 0.1),
}
# Searches in the log; q6's is unknown (a known failure added by hand, say).
FREQUENCY = {"q1": 100, "q2": 400, "q3": 10, "q4": 50, "q5": 2, "q7": 1}
# The grades of the relevant pairs; every other pooled pair is graded 0. The run "alpha"
# ranks d01..d15 for every query, so its reciprocal rank is 1 / (rank of the first).
RELEVANT = {"q1": {"d01": 3}, "q2": {"d02": 2}, "q3": {"d05": 1}, "q4": {"d03": 1}}
RELEVANT |= {"q5": {"d13": 2}, "q6": {"d07": 1, "d14": 3}}
ALPHA_RR = {"q1": 1.0, "q2": 1 / 2, "q3": 1 / 5, "q4": 1 / 3, "q5": 1 / 13, "q6": 1 / 7}


def _published(i: int) -> dict[str, object]:
    if i == 15:
        return {}  # no date: never in a date slice
    published = f"{2023 if i <= 5 else 2024}-0{1 + i % 9}-15"
    return {"published": published, "rank_hint": i, "open": i % 2 == 0}


def _ranked(name: str, docs: list[str]) -> dict[str, list[RunRow]]:
    return {q: [RunRow(q, d, r, 100.0 - r, name) for r, d in enumerate(docs, 1)] for q in QUERIES}


@pytest.fixture
def board(db: None, tmp_path: Path) -> dict[str, object]:
    project = project_create(slug="board", name="Board search")
    corpus = tmp_path / "corpus.jsonl"
    lines = [
        {"_id": d, "title": f"Title {d}", "text": f"Text of {d}", "metadata": _published(i)}
        for i, d in enumerate(DOCS, 1)
    ]
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    corpus_import(project=project, path=corpus)
    for qid, (text, stratum, pi) in QUERIES.items():
        Query.objects.create(
            project=project,
            qid=qid,
            text=text,
            stratum=stratum,
            inclusion_probability=pi,
            frequency=FREQUENCY.get(qid),
        )
    protocol_publish(project=project, text="Grade 3: answers it. Grade 0: unrelated.")
    runs = [
        run_create(project=project, name="alpha", ranked=_ranked("alpha", DOCS)),
        run_create(project=project, name="beta", ranked=_ranked("beta", DOCS[::-1])),
        run_create(project=project, name=GAMMA, ranked=_ranked("g", ["d05", "d06", "d07"])),
    ]
    pool_open(project=project, runs=runs, depth=3, seed=7)
    # The release labels every pooled pair (none of the runs' top 3 is a hole).
    pooled = Pair.objects.filter(query__project=project).values_list(
        "query__qid", "document__docid"
    )
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid in sorted(pooled):
        qrels.setdefault(qid, {})[docid] = RELEVANT.get(qid, {}).get(docid, 0)
    strata = {qid: stratum for qid, (_, stratum, _) in QUERIES.items()}
    release = release_stored(project=project, qrels=qrels, strata=strata, resamples=2000)
    lead, annotator, outsider = make_user("lena"), make_user("alice"), make_user("olaf")
    membership_set(project=project, user=lead, role=Role.LEAD)
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    return {
        "project": project,
        "release": release,
        "qrels": qrels,
        "runs": runs,
        "lead": lead,
        "annotator": annotator,
        "outsider": outsider,
        "tmp": tmp_path,
    }


def _client(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def _url(release: Release, **query: str) -> str:
    url = reverse("scoreboard", args=[release.project.slug, release.number])
    return url + ("?" + urlencode(query) if query else "")


def _rows(page: str) -> list[str]:
    """The run names of the scoreboard table, in the page's order."""
    table = page.split('<table class="board">', 1)[1].split("</table>", 1)[0]
    return [html.unescape(name) for name in re.findall(r'<tr data-run="([^"]*)"', table)]


def _cell(page: str, run: str, attribute: str, value: str) -> str:
    """The text of one cell of the row of `run`: in the scoreboard table for a measure, in
    the per-stratum one for a slice."""
    if attribute == "data-slice":
        page = page.split('id="strata"', 1)[1]
    row = page.split(f'<tr data-run="{html.escape(run)}"', 1)[1].split("</tr>", 1)[0]
    cell = row.split(f'{attribute}="{value}">', 1)[1].split("</td>", 1)[0]
    return re.sub(r"<[^>]+>", " ", html.unescape(cell))


def test_it_shows_what_evaluate_says_on_the_release_qrels_and_run_files(board: dict) -> None:
    from django.core.management import call_command

    tmp: Path = board["tmp"]
    qrels = write_qrels(tmp / "release.qrels", board["qrels"])
    runs: list[Run] = board["runs"]
    files = [write_run(tmp / f"run{k}.trec", run) for k, run in enumerate(runs)]
    out = io.StringIO()
    args = ["--qrels", str(qrels), "--metrics", ",".join(STORED_MEASURES), "--per-query"]
    args += [a for f in files for a in ("--run", str(f))] + ["--format", "json"]
    call_command("evaluate", *args, stdout=out)
    report = json.loads(out.getvalue())
    assert report["contract"]["gain"] == "exponential"

    response = _client(board["lead"]).get(_url(board["release"]))
    assert response.status_code == 200
    page = response.content.decode()
    shown = {row.name: row for row in response.context["board"].rows}
    for run, path in zip(runs, files, strict=True):
        expected = report["runs"][str(path)]
        assert dict(shown[run.name].means) == expected["mean"]
        for measure in ("ndcg@10", "recall@100", "mrr", "map", "hit@5", "hit@10"):
            per_query = [v[measure] for v in expected["per_query"].values()]
            ci = bootstrap_interval(per_query, resamples=2000, seed=0)
            text = _cell(page, run.name, "data-measure", measure)
            assert f"{expected['mean'][measure]:.3f}" in text
            assert f"[{ci.lo:.3f}, {ci.hi:.3f}]" in text
        judged = _cell(page, run.name, "data-measure", "judged@10")
        assert f"{expected['mean']['judged@10']:.3f}" in judged
    # q7 has no relevant document: skipped, as the contract printed above the table says.
    assert shown["alpha"].queries["scored"] == 6
    assert "queries without a relevant document: skipped (empty = skip)" in page


def test_it_prints_the_metric_contract_above_the_table(board: dict) -> None:
    page = _client(board["lead"]).get(_url(board["release"])).content.decode()
    contract = page.split('id="contract"', 1)[1].split("</div>", 1)[0]
    assert "gain: exponential, 2^grade - 1" in contract
    assert "relevance threshold 1" in contract
    assert "nDCG@10, recall@100, hit@5 and hit@10, judged@10" in contract
    assert page.index('id="contract"') < page.index('<table class="board">')


def test_it_sorts_by_a_column(board: dict) -> None:
    client = _client(board["lead"])
    release = board["release"]
    means = {row.name: row.means for row in client.get(_url(release)).context["board"].rows}
    for measure in ("mrr", "judged@10", "recall@100"):
        page = client.get(_url(release, sort=measure, dir="asc")).content.decode()
        expected = sorted(means, key=lambda name: (means[name][measure], name))
        assert _rows(page) == expected
    page = client.get(_url(release, sort="run", dir="desc")).content.decode()
    assert _rows(page) == sorted(means, reverse=True)
    default = client.get(_url(release)).content.decode()  # nDCG@10, best first
    assert _rows(default) == sorted(means, key=lambda n: (means[n]["ndcg@10"], n), reverse=True)


def test_it_flags_holes_in_the_top_10_and_previews_the_pool_that_fills_them(board: dict) -> None:
    client = _client(board["lead"])
    page = client.get(_url(board["release"])).content.decode()
    alpha = page.split('<tr data-run="alpha"', 1)[1].split("</tr>", 1)[0]
    assert "unjudged pairs in the top 10" in alpha
    gamma = page.split(f'<tr data-run="{html.escape(GAMMA)}"', 1)[1].split("</tr>", 1)[0]
    assert "unjudged" not in gamma  # its 3 documents per query are all judged
    run: Run = board["runs"][0]
    form = alpha.split('<form method="post"', 1)[1]
    assert f'action="{reverse("pool_preview", args=["board"])}"' in form
    assert f'name="runs" value="{run.pk}"' in form and 'name="depth" value="10"' in form
    # Its holes: the top-10 pairs the release has no label for, d04, d08, d09, d10 per query.
    labelled = {(q, d) for q, docs in board["qrels"].items() for d in docs}
    holes = {(q, d) for q in QUERIES for d in DOCS[:10] if (q, d) not in labelled}
    assert len(holes) == 4 * len(QUERIES)
    preview = client.post(
        reverse("pool_preview", args=["board"]), {"runs": run.pk, "depth": 10, "scope": "all"}
    )
    assert preview.status_code == 200
    assert preview.context["plan"].added == len(holes)
    assert f'id="preview-added">{len(holes)}<' in preview.content.decode()


def test_it_draws_the_means_with_their_intervals(board: dict) -> None:
    response = _client(board["lead"]).get(_url(board["release"], sort="mrr"))
    page = response.content.decode()
    svg = page.split('<svg class="kappa-plot board-chart"', 1)[1].split("</svg>", 1)[0]
    assert svg.count('class="point"') == 3 and svg.count('class="ci"') == 3
    alpha = next(r for r in response.context["board"].rows if r.name == "alpha")
    assert f"alpha: mrr {alpha.means['mrr']:.3f}" in svg


def test_it_gives_the_means_per_stratum_and_weighted_to_the_log(board: dict) -> None:
    response = _client(board["lead"]).get(_url(board["release"], metric="mrr"))
    strata = response.context["strata"]
    assert strata.strata == ["head", "torso", "tail", "failures"]
    alpha = next(row for row in strata.rows if row.name == "alpha")
    by_hand = [(1 + 1 / 2) / 2, (1 / 5 + 1 / 3) / 2, 1 / 13, 1 / 7]
    assert [cell.mean for cell in alpha.strata] == pytest.approx(by_hand, abs=1e-12)
    assert [cell.n for cell in alpha.strata] == [2, 2, 1, 1]  # q7 skipped: no relevant
    # Hájek: sum(x / pi) / sum(1 / pi) over the queries with pi; q4 has none, left out.
    by_hand_weighted = (1 * 2 + 0.5 * 1 + 0.2 * 4 + 10 / 13 + 5 / 7) / (2 + 1 + 4 + 10 + 5)
    assert alpha.weighted.mean == pytest.approx(by_hand_weighted, abs=1e-12)
    assert (alpha.weighted.n, alpha.weighted.unweighted) == (5, 1)
    qids = ["q1", "q2", "q3", "q5", "q6"]
    x = np.array([ALPHA_RR[q] for q in qids])
    w = 1 / np.array([QUERIES[q][2] for q in qids], dtype=float)
    assert alpha.weighted.mean == pytest.approx(np.average(x, weights=w), abs=1e-12)
    assert alpha.overall.mean == pytest.approx(np.mean(list(ALPHA_RR.values())), abs=1e-12)
    # Traffic, f / pi: q1 100 / 0.5, q2 400 / 1, q3 10 / 0.25, q5 2 / 0.1 (q4: no pi, q6: no f).
    by_hand_traffic = (1 * 200 + 0.5 * 400 + 0.2 * 40 + 20 / 13) / (200 + 400 + 40 + 20)
    assert alpha.traffic.mean == pytest.approx(by_hand_traffic, abs=1e-12)
    assert (alpha.traffic.n, alpha.traffic.unweighted) == (4, 2)
    page = response.content.decode()
    assert "Hájek" in page and "1 without π left out" in page
    assert f"{by_hand_weighted:.3f}" in _cell(page, "alpha", "data-slice", "weighted")
    traffic = _cell(page, "alpha", "data-slice", "traffic")
    assert f"{by_hand_traffic:.3f}" in traffic and "2 without π or frequency left out" in traffic


@pytest.mark.parametrize(
    ("kind", "value", "qids"),
    [
        ("metadata", "published >= 2024-01-01", ["q5", "q6"]),  # d13; d07 and d14
        ("metadata", "published < 2024-01-01", ["q1", "q2", "q3", "q4"]),
        ("metadata", "rank_hint = 7", ["q6"]),  # a number compares as a number
        ("metadata", "rank_hint > 12", ["q5", "q6"]),  # not as text: "7" > "12"
        ("metadata", "open = true", ["q2", "q6"]),  # d02, d14
        ("text", "CALENDAR", ["q3", "q4"]),
        ("qids", "q1, q6 q99", ["q1", "q6"]),
        ("stratum", "head", ["q1", "q2"]),
    ],
)
def test_it_gives_a_canary_slice_mean_with_n(
    board: dict, kind: str, value: str, qids: list[str]
) -> None:
    response = _client(board["lead"]).get(
        _url(board["release"], metric="mrr", canary_kind=kind, canary=value)
    )
    assert response.status_code == 200
    alpha = next(row for row in response.context["strata"].rows if row.name == "alpha")
    assert alpha.canary.n == len(qids)
    assert alpha.canary.mean == pytest.approx(np.mean([ALPHA_RR[q] for q in qids]), abs=1e-12)
    page = response.content.decode()
    assert f"n={len(qids)}" in _cell(page, "alpha", "data-slice", "canary")
    assert 'id="canary-slice"' in page
    # The section lists the runs in the table's order (nDCG@10, best first).
    strata = page.split('id="strata"', 1)[1]
    assert _rows(page) == [html.unescape(n) for n in re.findall(r'<tr data-run="([^"]*)"', strata)]


def test_it_refuses_a_canary_condition_it_cannot_read(board: dict) -> None:
    response = _client(board["lead"]).get(
        _url(board["release"], metric="mrr", canary_kind="metadata", canary="published")
    )
    assert response.status_code == 400
    assert "key op value" in response.content.decode()


def test_it_keeps_the_corpus_metadata_on_import(board: dict) -> None:
    stored = dict(Document.objects.values_list("docid", "metadata"))
    assert stored["d07"] == {"published": "2024-08-15", "rank_hint": 7, "open": False}
    assert stored["d15"] == {}


def test_it_reads_no_per_query_values_for_the_table(board: dict) -> None:
    client = _client(board["lead"])
    with CaptureQueriesContext(connection) as queries:
        assert client.get(_url(board["release"])).status_code == 200
    assert not [q for q in queries.captured_queries if "per_query" in q["sql"]]


def test_it_is_for_leads_only(board: dict) -> None:
    url = _url(board["release"])
    assert _client(board["annotator"]).get(url).status_code == 403
    assert _client(board["outsider"]).get(url).status_code == 404
    assert Client().get(url).status_code == 302  # to sign in
    lead = _client(board["lead"])
    assert lead.get(reverse("scoreboard", args=["board", 2])).status_code == 404
    other = project_create(slug="other", name="Other")
    Release.objects.create(project=other, number=1, policy="humans", content_hash="0" * 64)
    membership_set(project=other, user=board["lead"], role=Role.ANNOTATOR)
    assert lead.get(reverse("scoreboard", args=["other", 1])).status_code == 403


def test_it_escapes_run_names(board: dict) -> None:
    page = _client(board["lead"]).get(_url(board["release"], metric="mrr")).content.decode()
    assert "<b>gamma" not in page
    assert "&lt;b&gt;gamma&lt;/b&gt; &amp; co" in page
    svg = page.split('<svg class="kappa-plot board-chart"', 1)[1].split("</svg>", 1)[0]
    assert "&lt;b&gt;gamma" in svg


def test_it_says_when_no_run_was_scored(board: dict) -> None:
    project: Project = board["project"]
    Release.objects.create(project=project, number=2, policy="humans", content_hash="1" * 64)
    response = _client(board["lead"]).get(reverse("scoreboard", args=["board", 2]))
    assert response.status_code == 200
    assert "No run has been scored under this release yet" in response.content.decode()


def test_it_takes_the_query_stratum_when_the_release_copied_none(board: dict) -> None:
    project: Project = board["project"]
    release = release_stored(project=project, qrels=board["qrels"], number=2, resamples=200)
    response = _client(board["lead"]).get(_url(release, metric="hit@5"))
    strata = response.context["strata"]
    assert strata.strata == ["head", "torso", "tail", "failures"]
    alpha = next(row for row in strata.rows if row.name == "alpha")
    # hit@5: q1, q2, q3 (d05 at rank 5), q4 have a relevant document in alpha's top 5.
    assert [cell.n for cell in alpha.strata] == [2, 2, 1, 1]
    assert [cell.mean for cell in alpha.strata] == [1.0, 1.0, 0.0, 0.0]


def test_it_shows_an_undefined_mean_and_sorts_it_last(board: dict) -> None:
    """A measure no query defines is stored as None, its interval as [None, None]."""
    project: Project = board["project"]
    empty = Run.objects.create(project=project, name="empty")
    measures = ["ndcg@10", "recall@100", "mrr", "map", "hit@5", "hit@10", "judged@10"]
    RunEvaluation.objects.create(
        release=board["release"],
        run=empty,
        contract=Contract().as_dict(),
        means=dict.fromkeys(measures),
        intervals={m: [None, None] for m in measures},
        per_query={},
        queries={"scored": 0, "skipped_no_relevant": 1, "missing_from_run": 0},
    )
    client = _client(board["lead"])
    for direction in ("asc", "desc"):
        response = client.get(_url(board["release"], sort="mrr", dir=direction, metric="mrr"))
        assert response.status_code == 200
        assert _rows(response.content.decode())[-1] == "empty"
    page = response.content.decode()
    assert "undefined" in _cell(page, "empty", "data-measure", "mrr")
    assert "not scored" in page.split('class="kappa-plot board-chart"', 1)[1]


def test_it_reads_each_run_on_the_human_only_slice_beside_all_queries(
    db: None, tmp_path: Path
) -> None:
    """The slice no judge labels, as the release's manifest recorded it, is a column of the
    per-stratum section: each run's mean over the slice's scored queries, with n."""
    from evaluation.services_release import release_create, release_rescore
    from judging.models import HumanOnlyQuery
    from tests.release_world import release_world

    world = release_world(tmp_path)
    HumanOnlyQuery.objects.create(project=world.project, query=world.project.queries.get(qid="q3"))
    release = release_create(project=world.project, policy="llm", start_rescore=False)
    release_rescore(release=release)
    assert release.manifest["human_only"] == ["q10", "q3"]
    page = world.client_for(world.lead).get(
        reverse("scoreboard", args=[world.project.slug, release.number]) + "?metric=ndcg@10"
    )
    text = page.content.decode()
    assert "human-only slice" in text and 'id="human-only-slice"' in text
    stored = RunEvaluation.objects.get(release=release, run__name="b").per_query
    scored = [stored[q]["ndcg@10"] for q in ("q3", "q10") if q in stored]
    cell = re.search(r'<tr data-run="b">.*?data-slice="human-only">([^<]*)<span class="muted">'
                     r"n=(\d+)", text, re.S)  # fmt: skip
    assert cell is not None and int(cell.group(2)) == len(scored) > 0
    assert float(cell.group(1)) == pytest.approx(sum(scored) / len(scored), abs=5e-4)
