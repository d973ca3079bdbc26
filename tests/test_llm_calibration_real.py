"""Replaying published labels: TREC DL 2020's NIST qrels as the humans and the published
UMBRELA GPT-4o labels (Arabzadeh & Clarke) as an external judge, through the commands a lead
runs. The calibration reproduces the published kappas (0.341 on four grades, 0.450 binary at
grade 2, 0.555 quadratic) and the system-ranking tau over the official DL 2020 runs equals a
reference computed with pytrec_eval (nDCG@10, exponential gain) and scipy. With one human the gate
refuses the judge for `ceiling` (the humans' own agreement is unknown); a second human on part
of the pairs makes the ceiling measurable.

The project holds every NIST-judged pair. Each official run is stored by its top ten per query
(nDCG@10 reads no further), which keeps the test fast; the reference reads the full files.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from django.core.management import call_command
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score

from annotation.models import Document, Project
from annotation.services import project_create, protocol_publish
from formats.trec import RunRow, key_strings, read_qrels, read_run_table, trec_order
from judging.models import Calibration
from pooling.services import pairs_for, run_create
from tests.conftest import DATA

pytestmark = pytest.mark.django_db

DL20 = DATA / "trec-dl-2020-passage"
NIST = DL20 / "qrels.dl20-passage.txt"
UMBRELA = DATA / "llm-qrels" / "umbrela-gpt4o-arabzad" / "umbrela_gpt-4o_graded_dl20.txt"
RUNS = sorted((DL20 / "runs").glob("*.run.gz"))
DEPTH = 10

if not (NIST.exists() and UMBRELA.exists() and RUNS):
    pytest.skip(
        "the DL 2020 qrels, runs and UMBRELA labels (../shared/data) are not present",
        allow_module_level=True,
    )


def _top(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Each query's first ten documents in trec_eval order (score in single precision
    descending, then docid descending), read in bulk."""
    table = read_run_table(path)
    order = trec_order(table.qid_codes, table.scores, table.doc_keys, table.doc_lengths)
    codes = table.qid_codes[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    within = np.arange(len(codes)) - np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    kept = order[within < DEPTH]
    docids = key_strings(table.doc_keys[kept], table.doc_lengths[kept])
    found: dict[str, list[tuple[str, float]]] = {}
    for code, docid, score in zip(
        table.qid_codes[kept].tolist(), docids, table.scores[kept].tolist(), strict=True
    ):
        found.setdefault(table.qids[code], []).append((docid, score))
    return found


@pytest.fixture(scope="module")
def tops() -> dict[str, dict[str, list[tuple[str, float]]]]:
    return {path.name.split(".")[0]: _top(path) for path in RUNS}


def _project(tops: dict[str, dict[str, list[tuple[str, float]]]]) -> Project:
    project = project_create(slug="dl20", name="TREC DL 2020")
    protocol_publish(project=project, text="Grade 0-3 as TREC DL: 3 perfectly relevant.")
    nist = read_qrels(NIST)
    queries = {q: project.queries.create(qid=q, text=q).pk for q in sorted(nist)}
    docids = sorted({d for docs in nist.values() for d in docs})
    Document.objects.bulk_create(Document(project=project, docid=d, text=d) for d in docids)
    documents = dict(project.documents.values_list("docid", "pk"))
    pairs_for([(queries[q], documents[d]) for q in nist for d in nist[q]])
    for name, top in tops.items():
        ranked = {
            q: [RunRow(q, d, i + 1, s, name) for i, (d, s) in enumerate(rows)]
            for q, rows in top.items()
        }
        run_create(project=project, name=name, ranked=ranked)
    return project


def _command(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit:
        code = int(exit.code or 0)
    return code, out.getvalue(), err.getvalue()


def _reference_tau(tops: dict[str, dict[str, list[tuple[str, float]]]]) -> float:
    """trec_eval's nDCG@10 (through pytrec_eval) of every run under NIST's and UMBRELA's
    labels of the pairs both labelled, then scipy's Kendall tau-b. trec_eval's gain is the
    grade itself, so the grades are given as 2^g - 1: the exponential gain of the default
    contract (ranx's ndcg_burges). Queries without a relevant document are left out, as the
    default contract skips them."""
    nist, llm = read_qrels(NIST), read_qrels(UMBRELA)
    both = {q: {d: g for d, g in docs.items() if d in llm.get(q, {})} for q, docs in nist.items()}
    labels = {
        "human": both,
        "llm": {q: {d: llm[q][d] for d in docs} for q, docs in both.items()},
    }
    scores: dict[str, list[float]] = {}
    for side, qrels in labels.items():
        kept = {
            q: {d: 2**g - 1 for d, g in docs.items()}
            for q, docs in qrels.items()
            if max(docs.values(), default=0) >= 1
        }
        evaluator = pytrec_eval.RelevanceEvaluator(kept, {"ndcg_cut.10"})
        scores[side] = []
        for top in tops.values():
            # Scores by position: trec_eval then ranks exactly as the order read above.
            run = {
                q: {d: float(DEPTH - i) for i, (d, _) in enumerate(top.get(q, []))} for q in kept
            }
            per_query = evaluator.evaluate(run)
            values = [per_query.get(q, {}).get("ndcg_cut_10", 0.0) for q in kept]
            scores[side].append(float(np.mean(values)))
    return float(kendalltau(scores["human"], scores["llm"], variant="b").statistic)


def test_it_replays_umbrela_on_dl20_and_refuses_it_for_the_unknown_ceiling(tops) -> None:
    project = _project(tops)
    code, out, _ = _command("import_judgments", project.slug, str(NIST), "--as", "nist")
    assert code == 0 and "11386 judgments read" in out
    code, out, _ = _command(
        "import_judgments", project.slug, str(UMBRELA), "--as", "umbrela", "--kind", "llm"
    )
    assert code == 0
    code, out, _ = _command("llm_judge", "calibrate", project.slug, "umbrela", "--format", "json")
    report = json.loads(out)
    assert code == 3
    assert report["n"] == 11386
    assert round(report["kappa"], 4) == 0.3413
    assert round(report["kappa_binary"], 4) == 0.4497
    assert round(report["kappa_quadratic"], 4) == 0.5547
    assert report["human_kappa"] is None and report["retest"] is None
    assert report["ranking"]["runs"] == len(RUNS)
    assert report["tau"] == pytest.approx(_reference_tau(tops), abs=1e-12)
    assert round(report["tau"], 4) == 0.9451
    # No second human: the ceiling is unknown; and GPT-4o finds 56 % of NIST's relevant rows.
    assert report["reasons"] == ["ceiling", "recall"] and report["passed"] is False
    assert round(report["recall"], 4) == 0.5612
    assert Calibration.objects.get().reasons == report["reasons"]


def test_it_measures_the_ceiling_when_a_second_human_graded_part_of_the_pairs(
    tops, tmp_path: Path
) -> None:
    project = _project(tops)
    nist = read_qrels(NIST)
    keys = [(q, d) for q in sorted(nist) for d in sorted(nist[q])][::10]
    second = {
        k: nist[k[0]][k[1]] if i % 4 else max(0, nist[k[0]][k[1]] - 1) for i, k in enumerate(keys)
    }
    path = tmp_path / "second.txt"
    path.write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in second.items()))
    for args in (
        (str(NIST), "--as", "nist"),
        (str(path), "--as", "second"),
        (str(UMBRELA), "--as", "umbrela", "--kind", "llm"),
    ):
        assert _command("import_judgments", project.slug, *args)[0] == 0
    code, out, _ = _command("llm_judge", "calibrate", project.slug, "umbrela", "--format", "json")
    report = json.loads(out)
    assert report["n"] == len(keys)  # the double-judged pairs only
    first = [nist[q][d] for q, d in keys]
    assert report["human_kappa"] == pytest.approx(
        cohen_kappa_score(first, list(second.values())), abs=1e-12
    )
    ceiling = next(c for c in report["conditions"] if c["code"] == "ceiling")
    assert ceiling["measured"]
    assert ceiling["passed"] == (report["kappa"] >= report["human_kappa"] - 0.05)
    assert ("ceiling" in report["reasons"]) != ceiling["passed"]
    assert code == (0 if report["passed"] else 3)
