"""The dashboard's and the API's agreement on real re-annotations equals the reference
implementations: scikit-learn's cohen_kappa_score and the `krippendorff` package.

Data (../shared/data): two IR researchers' re-annotations of TREC DL 2019 passage pairs
(Parry et al., main round: andrew-parry and eugene-yang judged the same pairs) and NIST's own
qrels of those pairs. The first 10 pairs of each query the three share (12 queries, 120
pairs) are imported as a project and judged THROUGH the annotator API by three people, each
answering with their source's grades: "nist" first, leaving each query's last item to the
others (giving the query back); then "parry" and "yang" judge every query. So every pair has
two graders and nine in ten have three.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from annotation.models import Project, Role
from annotation.services import membership_set, project_create, protocol_publish
from formats.trec import RunRow, read_qrels
from judging.models import Claim, Judgment
from judging.pools import pool_open
from judging.services import judging_policy_set
from pooling.services import run_create
from tests.agreement_judging import (  # noqa: F401 (empty_cache: a fixture)
    empty_cache,
    judge_through_api,
    release_as_lead,
)
from tests.conftest import DATA, make_user

pytestmark = pytest.mark.django_db


MAIN = DATA / "dl19-human-reannotation" / "main" / "qrels"
DL19 = DATA / "trec-dl-2019-passage"
SOURCES = {
    "nist": DL19 / "qrels.dl19-passage.txt",
    "parry": MAIN / "andrew-parry-qrels.txt",
    "yang": MAIN / "eugene-yang-qrels.txt",
}
PER_QUERY = 10
STRATA = ("head", "torso", "tail")
LABELS = [0, 1, 2, 3]

if not all(path.exists() for path in SOURCES.values()):
    pytest.skip(
        "the re-annotation data (../shared/data/dl19-human-reannotation and "
        "trec-dl-2019-passage) is not present",
        allow_module_level=True,
    )

Key = tuple[str, str]


def _shared_pairs() -> tuple[dict[str, dict[Key, int]], list[Key]]:
    grades = {name: read_qrels(path) for name, path in SOURCES.items()}
    qids = sorted(set.intersection(*(set(g) for g in grades.values())))
    chosen: list[Key] = []
    for qid in qids:
        docids = sorted(set.intersection(*(set(g[qid]) for g in grades.values())))
        chosen += [(qid, docid) for docid in docids[:PER_QUERY]]
    flat = {name: {(q, d): g[q][d] for q, d in chosen} for name, g in grades.items()}
    return flat, chosen


def _texts(wanted: set[str], path: Path, key: str, value: str) -> dict[str, str]:
    found = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row[key] in wanted:
                found[row[key]] = row[value]
    return found


def _project(chosen: list[Key]) -> Project:
    """The pairs as a project: queries, documents, one run holding them, a pool of it."""
    project = project_create(slug="dl19", name="DL19 re-annotation")
    qids = sorted({q for q, _ in chosen})
    topics = dict(
        line.rstrip("\n").split("\t", 1)
        for line in (DL19 / "msmarco-test2019-queries.tsv").read_text(encoding="utf-8").splitlines()
    )
    for n, qid in enumerate(qids):
        project.queries.create(qid=qid, text=topics.get(qid, qid), stratum=STRATA[n % 3])
    passages = _texts({d for _, d in chosen}, DL19 / "dl2019_passages.jsonl", "docid", "doc")
    for docid in sorted({d for _, d in chosen}):
        project.documents.create(docid=docid, text=passages.get(docid, docid))
    protocol_publish(project=project, text="Grade 0-3 as TREC DL: 3 perfectly relevant.")
    ranked: dict[str, list[RunRow]] = {}
    for qid, docid in chosen:
        rows = ranked.setdefault(qid, [])
        rows.append(RunRow(qid, docid, len(rows) + 1, 100.0 - len(rows), "r"))
    run = run_create(project=project, name="pool-run", ranked=ranked)
    judging_policy_set(project=project, claim_idle_minutes=30, double_share=1.0)
    pool_open(project=project, runs=[run], depth=PER_QUERY, seed=3)
    return project


def _grades_of(source: dict[Key, int]) -> Callable[[str, str], int]:
    return lambda qid, docid: source[(qid, docid)]


@pytest.fixture
def judged() -> tuple[Project, dict[str, dict[Key, int]], Client]:
    grades, chosen = _shared_pairs()
    project = _project(chosen)
    lead = make_user("lena")
    membership_set(project=project, user=lead, role=Role.LEAD)
    lead_client = Client()
    lead_client.force_login(lead)
    for name in ("nist", "parry", "yang"):
        user = make_user(name)
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
        client = Client()
        client.force_login(user)
        judge_through_api(client, project.slug, _grades_of(grades[name]), leave_last=name == "nist")
        for claim in Claim.objects.filter(user=user, state="active"):
            release_as_lead(lead_client, project.slug, claim.pk)
    return project, grades, lead_client


def _order(
    grades: dict[str, dict[Key, int]],
) -> tuple[list[Key], list[int], list[int], set[Key]]:
    """First and second grader of every pair, by time: nist then parry where nist graded,
    else parry then yang (the judging order of the fixture)."""
    by_nist = set(
        Judgment.objects.filter(user__username="nist").values_list(
            "pair__query__qid", "pair__document__docid"
        )
    )
    keys = sorted(grades["parry"])
    first = [grades["nist"][k] if k in by_nist else grades["parry"][k] for k in keys]
    second = [grades["parry"][k] if k in by_nist else grades["yang"][k] for k in keys]
    return keys, first, second, by_nist


def _api(client: Client, slug: str, **params: str) -> dict:
    response = client.get(reverse("api_agreement", args=[slug]), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_equals_scikit_learn_and_krippendorff_on_real_reannotations(judged, tmp_path):
    project, grades, lead = judged
    keys, first, second, by_nist = _order(grades)
    queries = len({qid for qid, _ in keys})
    assert len(keys) == queries * PER_QUERY and queries >= 10
    body = _api(lead, project.slug)

    assert body["n"] == len(keys)
    assert body["kappa"] == pytest.approx(cohen_kappa_score(first, second, labels=LABELS))
    for weights in ("linear", "quadratic"):
        expected = cohen_kappa_score(first, second, labels=LABELS, weights=weights)
        assert body[f"kappa_{weights}"] == pytest.approx(expected)
    shares = [np.bincount(g, minlength=4) / len(g) for g in (first, second)]
    assert body["prevalence"]["a"] == pytest.approx(shares[0].tolist())
    assert body["prevalence"]["both"] == pytest.approx(((shares[0] + shares[1]) / 2).tolist())
    relevant = (np.array(first) >= 1, np.array(second) >= 1)
    assert body["kappa_binary"] == pytest.approx(cohen_kappa_score(*relevant))
    two = np.array([first, second], dtype=float)
    assert body["alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(reliability_data=two, level_of_measurement="ordinal")
    )
    # Every grader of every pair: nist's grade is missing on each query's last item.
    nist_row = [grades["nist"][k] if k in by_nist else np.nan for k in keys]
    parry, yang = [grades["parry"][k] for k in keys], [grades["yang"][k] for k in keys]
    three = np.array([nist_row, parry, yang], dtype=float)
    assert np.isnan(three[0]).sum() == queries
    assert body["alpha_ordinal_all_raters"] == pytest.approx(
        krippendorff.alpha(reliability_data=three, level_of_measurement="ordinal")
    )

    # Every two people, and each stratum.
    pairs = {(p["a"], p["b"]): p for p in body["pairs"]}
    assert set(pairs) == {("nist", "parry"), ("nist", "yang"), ("parry", "yang")}
    for (a, b), cell in pairs.items():
        shared = [k for k in keys if a != "nist" or k in by_nist]
        expected = cohen_kappa_score(
            [grades[a][k] for k in shared], [grades[b][k] for k in shared], labels=LABELS
        )
        assert (cell["n"], cell["kappa"]) == (len(shared), pytest.approx(expected))
        assert cell["ci"][0] <= cell["kappa"] <= cell["ci"][1]
    strata = dict(project.queries.values_list("qid", "stratum"))
    for stratum, row in body["strata"].items():
        picked = [i for i, k in enumerate(keys) if strata[k[0]] == stratum]
        expected = cohen_kappa_score(
            [first[i] for i in picked], [second[i] for i in picked], labels=LABELS
        )
        assert (row["n"], row["kappa"]) == (len(picked), pytest.approx(expected))

    # Exactly what the `agreement` command prints for the same pairs, intervals included.
    files = []
    for name, labels in (("a", first), ("b", second)):
        path = tmp_path / f"{name}.qrels"
        path.write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in zip(keys, labels, strict=True)))
        files += [f"--{name}", str(path)]
    out = StringIO()
    call_command("agreement", *files, "--labels", "0,1,2,3", "--format", "json", stdout=out)
    command = json.loads(out.getvalue())
    assert {key: body[key] for key in command} == command

    # A against B on every pair both graded.
    both = _api(lead, project.slug, a="parry", b="yang")
    assert both["n"] == len(keys)
    assert both["kappa"] == pytest.approx(cohen_kappa_score(parry, yang, labels=LABELS))
    assert both["alpha_ordinal_all_raters"] is None  # two raters: the headline's alpha

    # The page shows the same numbers.
    page = lead.get(reverse("agreement_dashboard", args=[project.slug])).content.decode()
    assert f'id="kappa">{body["kappa"]:.3f}<' in page
    assert f'id="alpha-all">{body["alpha_ordinal_all_raters"]:.3f}<' in page
    filtered = lead.get(
        reverse("agreement_dashboard", args=[project.slug]), {"a": "parry", "b": "yang"}
    ).content.decode()
    assert f'id="kappa">{both["kappa"]:.3f}<' in filtered
