"""The agreement page, its noise-floor partial, its thresholds form and the API, driven through
the real URLs: two annotators judge through the annotator API, the lead reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from agreement.dashboard import trap_words
from agreement.models import AgreementSettings
from agreement.report import TRAP_SENTENCE, agreement_report
from annotation.models import Project, Role
from annotation.services import membership_set, project_create, protocol_publish
from formats.trec import RunRow
from judging.models import GoldItem, Judgment, WorkItem, WorkUnit
from judging.pools import pool_open
from judging.services import judging_policy_set
from pooling.models import Pair, Pool
from pooling.services import run_create
from tests.agreement_judging import Answer, empty_cache, judge_through_api  # noqa: F401
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@dataclass
class Team:
    project: Project
    lead: Client
    alice: Client
    bob: Client
    outsider: Client

    @property
    def slug(self) -> str:
        return self.project.slug

    def page(self, **params: str) -> tuple[int, str]:
        response = self.lead.get(reverse("agreement_dashboard", args=[self.slug]), params)
        return response.status_code, response.content.decode()

    def api(self, **params: str) -> tuple[int, dict]:
        response = self.lead.get(reverse("api_agreement", args=[self.slug]), params)
        return response.status_code, response.json()


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def double_judged_project(
    docs: int = 5, strata: tuple[str, ...] = ("head", "tail"), runs: int = 2
) -> Project:
    """Queries q0, q1, ... (one per stratum) of ``docs`` documents each, every query judged by
    two people (the double-judged share set to 100 % before the pool is built)."""
    project = project_create(slug="agree", name="Agree")
    for d in range(docs):
        project.documents.create(docid=f"d{d}", title=f"Doc {d}", text=f"text {d}")
    qids = [f"q{n}" for n in range(len(strata))]
    for qid, stratum in zip(qids, strata, strict=True):
        project.queries.create(qid=qid, text=f"query {qid}", stratum=stratum)
    protocol_publish(project=project, text="Grade 3: answers it. Grade 0: unrelated.")
    made = []
    for r in range(runs):
        ranked = {
            q: [RunRow(q, f"d{(d + r) % docs}", d + 1, 10.0 - d, f"r{r}") for d in range(docs)]
            for q in qids
        }
        made.append(run_create(project=project, name=f"run{r}", ranked=ranked))
    judging_policy_set(project=project, claim_idle_minutes=30, double_share=1.0)
    pool_open(project=project, runs=made, depth=docs, seed=1)
    return project


def team_of(project: Project) -> Team:
    users = {name: make_user(name) for name in ("lena", "alice", "bob", "olaf")}
    membership_set(project=project, user=users["lena"], role=Role.LEAD)
    for name in ("alice", "bob"):
        membership_set(project=project, user=users[name], role=Role.ANNOTATOR)
    return Team(project, *(_client(users[n]) for n in ("lena", "alice", "bob", "olaf")))


def grades_by_doc(values: Mapping[str, Answer]) -> object:
    return lambda qid, docid: values[docid]


@pytest.fixture
def team() -> Team:
    return team_of(double_judged_project())


ALICE = {"d0": 0, "d1": 1, "d2": 2, "d3": 3, "d4": 0}
BOB = {"d0": 0, "d1": 2, "d2": 2, "d3": 3, "d4": 1}


def judge(team: Team, alice: Mapping[str, Answer] = ALICE, bob: Mapping[str, Answer] = BOB) -> None:
    judge_through_api(team.alice, team.slug, grades_by_doc(alice))  # type: ignore[arg-type]
    judge_through_api(team.bob, team.slug, grades_by_doc(bob))  # type: ignore[arg-type]


def test_it_shows_a_lead_kappa_the_matrix_and_the_charts(team: Team) -> None:
    judge(team)
    status, page = team.page()
    assert status == 200
    # Two queries x five documents, the same grades on each query: alice first, bob second.
    first, second = list(ALICE.values()) * 2, list(BOB.values()) * 2
    kappa = cohen_kappa_score(first, second, labels=[0, 1, 2, 3])
    assert f'id="kappa">{kappa:.3f}<' in page
    assert 'href="?a=alice&amp;b=bob"' in page and 'href="?a=bob&amp;b=alice"' in page
    assert '<svg class="heatmap"' in page and '<svg class="kappa-plot"' in page
    assert re.search(r"<title>A 1, B 2: 2 \(20\.0% of all\)</title>", page)
    assert "10 double-judged pairs over 2 queries" in page
    assert 'hx-get="/p/agree/agreement/noise/"' in page
    status, body = team.api()
    assert status == 200 and body["kappa"] == pytest.approx(kappa)
    assert body["pairs"] == [
        {
            "a": "alice",
            "b": "bob",
            "n": 10,
            "kappa": pytest.approx(kappa),
            "ci": body["pairs"][0]["ci"],
        }
    ]
    assert set(body["strata"]) == {"head", "tail"}
    assert body["unsure_or_skipped"] == 0 and body["alpha_ordinal_all_raters"] is None


def test_it_keeps_annotators_and_outsiders_out(team: Team) -> None:
    judge(team)
    pages = [
        reverse(name, args=[team.slug])
        for name in ("agreement_dashboard", "agreement_noise", "api_agreement")
    ]
    settings = reverse("agreement_settings", args=[team.slug])
    for client, refused in ((team.alice, 403), (team.outsider, 404)):
        for url in pages:
            assert client.get(url).status_code == refused, url
        assert (
            client.post(settings, {"min_kappa": "0", "min_gold_percent": "0"}).status_code
            == refused
        )
    assert not AgreementSettings.objects.exists()
    anonymous = Client()
    assert anonymous.get(pages[0]).status_code == 302  # to the sign-in page
    assert anonymous.get(pages[2]).status_code in (401, 403)


def test_it_shows_annotators_nothing_of_agreement(team: Team) -> None:
    judge(team)
    project_page = reverse("project_detail", args=[team.slug])
    dashboard = reverse("agreement_dashboard", args=[team.slug])
    assert dashboard in team.lead.get(project_page).content.decode()
    seen = team.alice.get(project_page).content.decode()
    assert dashboard not in seen and "bob" not in seen and "kappa" not in seen.lower()


def test_it_explains_the_kappa_trap_next_to_the_number() -> None:
    team = team_of(double_judged_project(docs=10, strata=("head",)))
    alice = {f"d{d}": 0 for d in range(10)} | {"d9": 1}
    bob = {f"d{d}": 0 for d in range(10)} | {"d8": 1}
    judge(team, alice, bob)
    status, body = team.api()
    assert status == 200, body
    assert body["observed"] == pytest.approx(0.8), (body["n"], body["confusion"])
    assert body["kappa"] < 0
    assert TRAP_SENTENCE in body["notes"]
    _, page = team.page()
    trap = re.search(r'<p class="notice" id="trap">(.*?)</p>', page, re.DOTALL)
    assert trap is not None
    assert "Raw agreement is 80%, yet kappa is only -0.11" in trap.group(1)
    assert "grade 0, which 90% of all grades are" in trap.group(1)


def test_it_says_how_to_get_double_judged_pairs_when_there_are_none(team: Team) -> None:
    judge_through_api(team.alice, team.slug, grades_by_doc(ALICE))  # type: ignore[arg-type]
    status, page = team.page()
    assert status == 200 and "No double-judged pairs yet" in page
    assert (
        "<strong>100%</strong> now" in page
        and reverse("judging_overview", args=[team.slug]) in page
    )
    status, body = team.api()
    assert status == 400 and body["detail"].startswith("no double-judged pairs in this view")


def test_it_counts_unsure_and_skipped_answers_apart(team: Team) -> None:
    judge(team, bob=BOB | {"d4": "unsure", "d0": "skip"})
    status, body = team.api()
    # bob's unsure and skipped pairs have one grade: they are not double-judged
    assert status == 200 and body["unsure_or_skipped"] == 4 and body["n"] == 6
    _, page = team.page()
    assert 'Unsure or skipped: <strong id="unsure-or-skipped">4</strong> answers' in page


def test_it_filters_by_two_people_and_by_stratum(team: Team) -> None:
    judge(team)
    status, body = team.api(a="bob", b="alice")
    assert status == 200 and body["n"] == 10
    assert body["confusion"][2][1] == 2  # bob's 2 against alice's 1, on both queries
    status, body = team.api(stratum="tail")
    assert status == 200 and body["n"] == 5 and list(body["strata"]) == ["tail"]
    status, page = team.page(stratum="tail", a="alice", b="bob")
    assert status == 200 and "alice (A) against bob (B)" in page
    assert '<option value="tail" selected>' in page


def test_it_refuses_filters_that_name_nothing_and_says_what_to_choose(team: Team) -> None:
    judge(team)
    cases = [
        (
            {"a": "zed", "b": "alice"},
            "nobody named 'zed' has graded a pair of this project; choose one of: alice, bob",
        ),
        ({"a": "alice"}, "name both people, a and b, or neither"),
        ({"a": "alice", "b": "alice"}, "choose two different people"),
        ({"protocol": "two"}, "protocol must be a protocol version number such as 2"),
    ]
    for params, message in cases:
        status, body = team.api(**params)
        assert status == 400 and message in body["detail"], params
        status, page = team.page(**params)
        assert status == 400 and message.replace("'", "&#x27;") in page, params
    status, body = team.api(protocol="7")
    assert status == 400 and "no double-judged pairs" in body["detail"]
    status, page = team.page(protocol="7")
    assert status == 200 and "No pair was graded by two people under protocol v7" in page


def test_it_is_never_stale_after_a_new_answer(team: Team) -> None:
    judge_through_api(team.alice, team.slug, grades_by_doc(ALICE))  # type: ignore[arg-type]
    status, _ = team.api()
    assert status == 400
    judge_through_api(team.bob, team.slug, grades_by_doc(BOB))  # type: ignore[arg-type]
    status, body = team.api()
    assert status == 200 and body["n"] == 10


def test_it_saves_the_thresholds_and_flags_by_them(team: Team) -> None:
    judge(team)
    url = reverse("agreement_settings", args=[team.slug])
    response = team.lead.post(url, {"min_kappa": "0.99", "min_gold_percent": "80"}, follow=True)
    assert "Agreement thresholds saved." in response.content.decode()
    saved = AgreementSettings.objects.get(project=team.project)
    assert (saved.min_kappa, saved.min_gold_accuracy) == (0.99, 0.8)
    _, page = team.page()
    assert page.count('<span class="flag">kappa below 0.99</span>') == 2
    for data, message in (
        (
            {"min_kappa": "2", "min_gold_percent": "80"},
            "the minimum kappa must be between -1 and 1",
        ),
        ({"min_kappa": "0.4", "min_gold_percent": "180"}, "a percentage between 0 and 100"),
        ({"min_kappa": "much", "min_gold_percent": "80"}, "Enter the minimum kappa as a number"),
    ):
        response = team.lead.post(url, data, follow=True)
        assert "Not saved: " in response.content.decode() and message in response.content.decode()
    assert AgreementSettings.objects.get(project=team.project).min_kappa == 0.99


def test_it_shows_and_flags_accuracy_on_gold_checks(team: Team) -> None:
    judge(team)
    # Alice gets two gold checks on a query of their own, one answered right, one wrong.
    lead = User.objects.get(username="lena")
    alice = User.objects.get(username="alice")
    query = team.project.queries.create(qid="gold-q", text="a gold query")
    pool = Pool.objects.filter(project=team.project).latest("pk")
    unit = WorkUnit.objects.create(
        pool=pool, query=query, position=10_000, gold_for=alice, claims_taken=1
    )
    for position, (grade, answered) in enumerate(((2, 2), (3, 0))):
        document = team.project.documents.create(docid=f"gold-d{position}", text="gold text")
        pair = Pair.objects.create(query=query, document=document)
        GoldItem.objects.create(pair=pair, grade=grade, source="lead", marked_by=lead)
        WorkItem.objects.create(unit=unit, pair=pair, position=position)
        Judgment.objects.create(pair=pair, user=alice, grade=answered, seconds_spent=2.0)

    _, page = team.page()

    row = re.search(r"<tr[^>]*>\s*<td>alice</td>.*?</tr>", page, re.DOTALL)
    assert row is not None
    assert '<td class="num gold">50%</td>' in row.group(0)
    assert '<span class="flag">gold accuracy below 70%</span>' in row.group(0)
    bob_row = re.search(r"<tr[^>]*>\s*<td>bob</td>.*?</tr>", page, re.DOTALL)
    assert bob_row is not None and '<td class="num gold">—</td>' in bob_row.group(0)


def test_it_escapes_what_people_typed(team: Team) -> None:
    team.project.queries.filter(qid="q0").update(stratum='<script>alert("s")</script>')
    judge(team)
    _, page = team.page()
    assert '<script>alert("s")' not in page
    assert "&lt;script&gt;alert(&quot;s&quot;)&lt;/script&gt;" in page


def test_it_gives_the_noise_floor_of_the_projects_runs(team: Team) -> None:
    judge(team)
    response = team.lead.get(reverse("agreement_noise", args=[team.slug]))
    html = response.content.decode()
    assert response.status_code == 200
    assert re.search(
        r"Gaps smaller than <strong>\d\.\d{3}</strong> nDCG@10 between two systems "
        r"can flip with who judged",
        html,
    )
    assert "run0" in html and "run1" in html and "<!doctype html>" in html  # a page of its own
    partial = team.lead.get(
        reverse("agreement_noise", args=[team.slug]), headers={"HX-Request": "true"}
    ).content.decode()
    assert "<!doctype" not in partial and partial.startswith("<h2>What this agreement means")


def test_it_says_to_upload_runs_before_a_noise_floor() -> None:
    team = team_of(double_judged_project(runs=1))
    judge(team)
    html = team.lead.get(reverse("agreement_noise", args=[team.slug])).content.decode()
    assert "The project has 1 run." in html and "Upload at least two runs" in html


def test_it_explains_the_trap_of_the_binary_kappa_beside_it() -> None:
    # 70 pairs both 0, 10 graded 1 and 2 (relevant to both), 10 + 10 where one says relevant:
    # raw agreement 70 % (no trap), binary 80 % with binary kappa 0.375 (the trap).
    grades = [(0, 0)] * 70 + [(1, 2)] * 10 + [(0, 1)] * 10 + [(1, 0)] * 10
    a = {"q": {f"d{n}": x for n, (x, _) in enumerate(grades)}}
    b = {"q": {f"d{n}": y for n, (_, y) in enumerate(grades)}}
    report = agreement_report(a, b, bootstrap=0, labels=(0, 1, 2, 3))
    words = trap_words(report)
    assert set(words) == {"kappa_binary"}
    assert words["kappa_binary"].startswith(
        'Raw agreement is 80%, yet kappa is only 0.38: most of the agreement is on "not '
        'relevant", which 80% of all grades are, so two judges guessing at these rates would '
        "already agree 68% of the time."
    )


def test_it_shows_the_empty_state_before_anyone_answered(team: Team) -> None:
    status, page = team.page()
    assert status == 200 and "No double-judged pairs yet" in page
    assert team.api()[0] == 400
    noise = team.lead.get(reverse("agreement_noise", args=[team.slug])).content.decode()
    assert "No double-judged pairs in view" in noise
