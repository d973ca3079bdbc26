"""`compare`: the five-line report, the verdicts and the gate's exit status, on files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "trec-dl-2019-passage"


def write_case(tmp_path: Path, candidate_rank: list[int]) -> dict[str, Path]:
    """40 queries with one relevant document each (grade 2) among ten retrieved.

    The baseline ranks it 2nd everywhere; the candidate at `candidate_rank[i]` (0: absent).
    """
    qrels, base, cand = [], [], []
    for i, rank in enumerate(candidate_rank):
        qid = f"q{i:02d}"
        qrels.append(f"{qid} 0 gold 2")
        qrels.append(f"{qid} 0 d1 0")
        base += [
            f"{qid} Q0 {doc} {r} {20 - r} base"
            for r, doc in enumerate(
                ["d1", "gold", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9"], start=1
            )
        ]
        docs = [f"d{j}" for j in range(1, 11)]
        if rank:
            docs[rank - 1] = "gold"
        cand += [f"{qid} Q0 {doc} {r} {20 - r} cand" for r, doc in enumerate(docs, start=1)]
    paths = {
        "qrels": tmp_path / "q.qrels",
        "base": tmp_path / "base.run",
        "cand": tmp_path / "cand.run",
    }
    for key, lines in (("qrels", qrels), ("base", base), ("cand", cand)):
        paths[key].write_text("\n".join(lines) + "\n")
    return paths


def run_compare(paths: dict[str, Path], *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="assay.settings.test")
    args = [
        "--qrels",
        str(paths["qrels"]),
        "--baseline",
        str(paths["base"]),
        "--candidate",
        str(paths["cand"]),
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "manage.py", "compare", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )


def test_it_fails_the_gate_on_a_significant_regression(tmp_path: Path) -> None:
    result = run_compare(write_case(tmp_path, [5] * 30 + [2] * 10), "--format", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "regression"
    # nDCG@10 with one grade-2 document: 1/log2(3) at rank 2, 1/log2(6) at rank 5.
    expected = (1 / np.log2(6) - 1 / np.log2(3)) * 30 / 40
    assert report["mean_diff"] == pytest.approx(expected, abs=1e-12)
    assert (report["wins"], report["losses"], report["ties"]) == (0, 30, 10)
    assert report["ci"][1] < 0
    assert report["worst_query"]["qid"] == "q00"
    assert set(report) >= {
        "metric",
        "mean_diff",
        "ci",
        "wins",
        "losses",
        "ties",
        "verdict",
        "worst_query",
        "must_never_break_violations",
    }


def test_it_calls_identical_runs_inconclusive_and_passes(tmp_path: Path) -> None:
    paths = write_case(tmp_path, [2] * 40)
    result = run_compare(paths)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:5]] == [
        "candidate",
        "eval",
        "metric",
        "result",
        "secondary",
    ]
    assert "inconclusive" in result.stdout
    assert "wins 0 / losses 0 / ties 40" in lines[3]


def test_it_passes_an_improvement(tmp_path: Path) -> None:
    result = run_compare(write_case(tmp_path, [1] * 25 + [2] * 15), "--format", "json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["verdict"] == "improvement"


def test_it_fails_when_a_must_never_break_query_drops_below_rank_3(tmp_path: Path) -> None:
    paths = write_case(tmp_path, [1] * 39 + [4])
    mnb = tmp_path / "mnb.txt"
    mnb.write_text("# top support articles\nq00 gold\nq39 gold\n")
    result = run_compare(paths, "--must-never-break", str(mnb), "--format", "json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["verdict"] == "improvement"  # the average improved, the business broke
    assert report["must_never_break_violations"] == [{"qid": "q39", "docid": "gold", "rank": 4}]
    text = run_compare(paths, "--must-never-break", str(mnb))
    assert text.returncode == 1 and "q39" in text.stdout


def test_it_names_file_and_line_of_a_bad_run(tmp_path: Path) -> None:
    paths = write_case(tmp_path, [2] * 5)
    paths["cand"].write_text("q00 Q0 gold 1 not-a-number cand\n")
    result = run_compare(paths)
    assert result.returncode == 1
    assert f"{paths['cand']}:1:" in result.stderr


@pytest.mark.skipif(not DATA.exists(), reason="real TREC data (../shared/data) not present")
def test_it_agrees_with_pytrec_eval_on_real_runs(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from formats.trec import read_qrels, read_run

    qrels_path = DATA / "qrels.dl19-passage.txt"
    base_path = DATA / "runs" / "bm25base_p.judged-topics.run.gz"
    cand_path = DATA / "runs" / "idst_bert_p1.judged-topics.run.gz"
    paths = {"qrels": qrels_path, "base": base_path, "cand": cand_path}
    result = run_compare(paths, "--gain", "linear", "--empty", "zero", "--format", "json")
    report = json.loads(result.stdout)
    qrels = read_qrels(qrels_path)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"})

    def per_query(path: Path) -> dict[str, float]:
        run = {q: {r.docid: r.score for r in rows} for q, rows in read_run(path).items()}
        return {q: v["ndcg_cut_10"] for q, v in evaluator.evaluate(run).items()}

    base, cand = per_query(base_path), per_query(cand_path)
    diffs = [cand.get(q, 0.0) - base.get(q, 0.0) for q in qrels]
    assert report["n"] == len(qrels) == 43
    assert report["mean_diff"] == pytest.approx(sum(diffs) / len(diffs), abs=1e-9)
    assert report["verdict"] == "improvement" and result.returncode == 0


def test_it_gives_every_metric_the_normal_interval_without_a_bootstrap(tmp_path: Path) -> None:
    from scipy.stats import norm

    # recall@100 and hit@5 drop on q03 only (gold absent); nDCG@10 drops on q00-q03.
    result = run_compare(
        write_case(tmp_path, [5] * 3 + [0] + [2] * 36), "--format", "json", "--bootstrap", "0"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    d = np.array([0.0] * 3 + [-1.0] + [0.0] * 36)
    half = norm.ppf(0.975) * d.std(ddof=1) / np.sqrt(d.size)
    for name in ("recall@100", "hit@5"):
        secondary = report["secondary"][name]
        assert secondary["mean_diff"] == pytest.approx(d.mean(), abs=1e-12)
        assert secondary["ci"] == pytest.approx([d.mean() - half, d.mean() + half], abs=1e-12)
    assert report["ci_method"] == "normal"
    assert report["statistics"]["bootstrap"] is None  # no one-resample "interval"
