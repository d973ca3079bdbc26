"""Parity of the measurement core with the reference implementations on real data the other
tests leave alone: TREC DL 2020 runs at every cutoff and level, the qrels of DL 2021/2023,
TREC RAG 2024/2025 and BEIR under tie-heavy runs, exponential nDCG, the paired statistics on
DL 2020 run pairs, agreement on a 0-4 scale (RAG 2025) and pools of DL 2020 runs."""

from __future__ import annotations

import gzip
import random
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from agreement.report import agreement_report
from evaluation.measures import Contract, evaluate_files
from evaluation.stats import bootstrap_interval, paired_t_test, sign_test
from formats.trec import read_qrels
from pooling.pooling import pool_files

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DL20 = DATA / "trec-dl-2020-passage"
needs_data = pytest.mark.skipif(
    not DL20.exists(), reason="real TREC data (../shared/data) not present"
)
pytestmark = [pytest.mark.data, needs_data]

Qrels = Mapping[str, Mapping[str, int]]


def dl20_runs(count: int) -> list[Path]:
    """A spread of the official DL 2020 runs (first-stage, rerankers, fusions)."""
    runs = sorted((DL20 / "runs").glob("*.run.gz"))
    return runs[:: max(1, len(runs) // count)][:count]


def trec_eval_means(theirs: Mapping[str, Mapping[str, float]], qrels: Qrels, name: str) -> float:
    """trec_eval -c: the mean over every qrels query, 0 for those the run lacks."""
    return sum(theirs[q][name] for q in theirs if q in qrels) / len(qrels)


def assert_trec_eval_parity(
    qrels_path: Path, runs: list[Path], names: dict[str, str], level: int, gain: str = "linear"
) -> int:
    """Ours (``--empty zero``) against pytrec_eval per query and mean; returns the count of
    values compared. With ``gain="exponential"`` pytrec_eval scores qrels whose grades are
    replaced by 2^g - 1, which is our exponential nDCG under trec_eval's linear one."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = read_qrels(qrels_path)
    graded = qrels
    if gain == "exponential":
        graded = {q: {d: 2**g - 1 if g > 0 else 0 for d, g in j.items()} for q, j in qrels.items()}
    # "ndcg_cut_10" is measure "ndcg_cut" at cutoff 10: pytrec_eval asks for "ndcg_cut.10".
    wanted = {".".join(n.rsplit("_", 1)) if n[-1].isdigit() else n for n in names.values()}
    evaluator = pytrec_eval.RelevanceEvaluator(graded, wanted, relevance_level=level)
    contract = Contract(gain=gain, rel_threshold=level, empty="zero")  # type: ignore[arg-type]
    ours = evaluate_files(qrels_path, runs, list(names), contract)
    compared = 0
    for path in runs:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            theirs = evaluator.evaluate(pytrec_eval.parse_run(fh))
        result = ours[str(path)]
        assert result.scored == len(qrels)
        for qid, values in result.per_query.items():
            for our_name, their_name in names.items():
                expected = theirs[qid][their_name] if qid in theirs else 0.0
                assert values[our_name] == pytest.approx(expected, abs=1e-12), (path, qid)
                compared += 1
        for our_name, their_name in names.items():
            mean = trec_eval_means(theirs, qrels, their_name)
            assert result.mean[our_name] == pytest.approx(mean, abs=1e-12), (path, our_name)
    return compared


def test_it_matches_trec_eval_at_every_cutoff_and_level_on_dl20_runs() -> None:
    names = {"mrr": "recip_rank", "map": "map"}
    for k in (1, 3, 5, 20, 100, 1000):
        names |= {f"ndcg@{k}": f"ndcg_cut_{k}", f"p@{k}": f"P_{k}", f"recall@{k}": f"recall_{k}"}
    names |= {f"hit@{k}": f"success_{k}" for k in (1, 5, 10)}
    runs = dl20_runs(3)
    qrels_path = DL20 / "qrels.dl20-passage.txt"
    compared = sum(assert_trec_eval_parity(qrels_path, runs, names, level) for level in (1, 2, 3))
    assert compared == 3 * 3 * 54 * len(names)


def test_it_matches_trec_eval_on_exponential_ndcg_of_dl20_runs() -> None:
    names = {f"ndcg@{k}": f"ndcg_cut_{k}" for k in (1, 5, 10, 100)}
    runs = dl20_runs(4)
    assert_trec_eval_parity(DL20 / "qrels.dl20-passage.txt", runs, names, 1, "exponential")


QRELS = {
    "dl21": "trec-dl-2021-passage/qrels.dl21-passage.txt",
    "dl23": "trec-dl-2023-passage/qrels.dl23-passage.txt",
    "rag24": "trec-rag-2024/qrels.rag24.test.txt",
    "rag25": "trec-rag-2025/qrels.rag25.test.txt",
    "arguana": "beir-arguana/qrels.beir-v1.0.0-arguana.test.txt",
    "nfcorpus": "beir-nfcorpus/qrels.beir-v1.0.0-nfcorpus.test.txt",
    "scifact": "beir-scifact/qrels.beir-v1.0.0-scifact.test.txt",
}


def tie_heavy_files(qrels: Qrels, folder: Path, seed: int) -> tuple[Path, list[Path]]:
    """These qrels have no public runs: build runs from them that stress trec_eval's rules.

    A tenth of the queries is re-judged 0 everywhere (no relevant document), a tenth is left
    out of the runs; each run mixes judged and unjudged documents and queries the qrels do
    not have. Run 0 has scores of one decimal (many ties, broken by docid), run 1 scores
    that differ only beyond single precision (ties to trec_eval), run 2 distinct scores in
    shuffled lines (the rank column and the line order mean nothing).
    """
    rng = random.Random(seed)
    qids = sorted(rng.sample(sorted(qrels), min(80, len(qrels))))  # quick: 80 queries at most
    judged = {q: dict(qrels[q]) for q in qids}
    for q in rng.sample(qids, max(1, len(qids) // 10)):
        judged[q] = dict.fromkeys(judged[q], 0)
    qrels_path = folder / "qrels.txt"
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q in qids for d, g in judged[q].items()))
    runs = []
    for variant in range(3):
        lines = []
        for q in qids:
            if rng.random() < 0.1:
                continue
            docs = list(judged[q])
            docs = rng.sample(docs, rng.randint(0, min(len(docs), 60)))
            docs += [f"unjudged-{q}-{i}" for i in range(rng.randint(0, 30))]
            rng.shuffle(docs)
            for d in docs:
                if variant == 0:
                    score = round(rng.random() * 5, 1)
                elif variant == 1:
                    score = 1.0 + rng.randint(0, 3) * 1e-9
                else:
                    score = rng.gauss(0, 1)
                lines.append(f"{q} Q0 {d} 1 {score!r} synthetic")
        lines += [f"not-in-qrels-{i} Q0 x{i} 1 1.0 synthetic" for i in range(3)]
        if variant == 2:
            rng.shuffle(lines)
        path = folder / f"run{variant}.txt"
        path.write_text("\n".join(lines) + "\n")
        runs.append(path)
    return qrels_path, runs


@pytest.mark.parametrize("name", sorted(QRELS))
def test_it_matches_trec_eval_on_tie_heavy_runs_over_other_qrels(name: str, tmp_path) -> None:
    path = DATA / QRELS[name]
    if not path.exists():
        pytest.skip(f"{QRELS[name]} (../shared/data) not present")
    qrels_path, runs = tie_heavy_files(read_qrels(path), tmp_path, seed=len(name))
    names = {"mrr": "recip_rank", "map": "map"}
    for k in (1, 3, 10, 100):
        names |= {f"ndcg@{k}": f"ndcg_cut_{k}", f"p@{k}": f"P_{k}", f"recall@{k}": f"recall_{k}"}
    names |= {f"hit@{k}": f"success_{k}" for k in (1, 5)}
    for level in (1, 2):
        assert assert_trec_eval_parity(qrels_path, runs, names, level) > 0
    exponential = {f"ndcg@{k}": f"ndcg_cut_{k}" for k in (3, 10)}
    assert_trec_eval_parity(qrels_path, runs, exponential, 1, "exponential")


def dl20_pair_differences() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    runs = dl20_runs(2)
    scores = evaluate_files(DL20 / "qrels.dl20-passage.txt", runs, ["ndcg@10", "map", "p@10"])
    base, cand = (scores[str(p)] for p in runs)
    qids = sorted(base.per_query)
    return {
        m: (
            np.array([base.per_query[q][m] for q in qids]),
            np.array([cand.per_query[q][m] for q in qids]),
        )
        for m in ("ndcg@10", "map", "p@10")
    }


def test_it_matches_scipy_paired_tests_on_dl20_run_pairs() -> None:
    stats = pytest.importorskip("scipy.stats")
    for metric, (a, b) in dl20_pair_differences().items():
        d = b - a
        ours, theirs = paired_t_test(d), stats.ttest_rel(b, a)
        assert ours.t == pytest.approx(theirs.statistic, rel=1e-12), metric
        assert ours.p == pytest.approx(theirs.pvalue, rel=1e-9), metric
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        expected = stats.binomtest(wins, wins + losses).pvalue
        assert sign_test(wins, losses) == pytest.approx(expected, rel=1e-12), metric
        # The bootstrap is the naive one on the same draws, and the same for the same seed.
        interval = bootstrap_interval(d, resamples=2000, seed=11)
        draws = np.random.default_rng(11).integers(0, len(d), size=(2000, len(d)))
        lo, hi = np.quantile(d[draws].mean(axis=1), [0.025, 0.975])
        assert (interval.lo, interval.hi) == pytest.approx((lo, hi), abs=1e-15), metric
        assert bootstrap_interval(d, resamples=2000, seed=11) == interval


def test_it_matches_the_reference_libraries_on_a_five_grade_scale() -> None:
    """TREC RAG 2025: NIST's 0-4 grades against UMBRELA's, 10,284 shared pairs."""
    metrics = pytest.importorskip("sklearn.metrics")
    krippendorff = pytest.importorskip("krippendorff")
    folder = DATA / "trec-rag-2025"
    if not folder.exists():
        pytest.skip("trec-rag-2025 (../shared/data) not present")
    a = read_qrels(folder / "qrels.rag25.test-umbrela2.txt")
    b = read_qrels(folder / "qrels.rag25.test.txt")
    pairs = [(q, g, b[q][d]) for q, docs in a.items() for d, g in docs.items() if d in b.get(q, {})]
    grades_a = np.array([p[1] for p in pairs])
    grades_b = np.array([p[2] for p in pairs])
    report = agreement_report(a, b, threshold=2, bootstrap=100, seed=4).as_dict()
    assert report["n"] == len(pairs) and report["labels"] == [0, 1, 2, 3, 4]
    for key, weights in (
        ("kappa", None),
        ("kappa_linear", "linear"),
        ("kappa_quadratic", "quadratic"),
    ):
        expected = metrics.cohen_kappa_score(grades_a, grades_b, weights=weights)
        assert report[key] == pytest.approx(expected, abs=1e-12), key
    binary = metrics.cohen_kappa_score(grades_a >= 2, grades_b >= 2)
    assert report["kappa_binary"] == pytest.approx(binary, abs=1e-12)
    ratings = np.vstack([grades_a, grades_b]).astype(float)
    for level in ("nominal", "ordinal", "interval"):
        expected = krippendorff.alpha(reliability_data=ratings, level_of_measurement=level)
        assert report[f"alpha_{level}"] == pytest.approx(expected, abs=1e-12), level
    # The interval resamples whole queries: redo it pair list by pair list with scikit-learn.
    qids = sorted({p[0] for p in pairs})
    by_query: dict[str, list[tuple[int, int]]] = {q: [] for q in qids}
    for qid, grade_a, grade_b in pairs:
        by_query[qid].append((grade_a, grade_b))
    draws = np.random.default_rng(4).integers(0, len(qids), size=(100, len(qids)))
    kappas = []
    for draw in draws:
        sample = [pair for i in draw for pair in by_query[qids[i]]]
        kappas.append(metrics.cohen_kappa_score([x for x, _ in sample], [y for _, y in sample]))
    assert report["ci"]["kappa"] == pytest.approx(np.quantile(kappas, [0.025, 0.975]), abs=1e-12)


def test_it_pools_dl20_runs_with_the_provenance_of_a_hand_computation(tmp_path) -> None:
    runs = dl20_runs(3)
    tied = tmp_path / "tied.run"  # one-decimal scores: ties at every depth, docid decides
    rng = random.Random(3)
    with gzip.open(runs[0], "rt") as fh:
        rows = [line.split() for line in fh]
    tied.write_text("".join(f"{q} Q0 {d} 1 {round(rng.random(), 1)} t\n" for q, _, d, *_ in rows))
    paths = [*runs, tied]
    for depth in (1, 20):
        expected: dict[tuple[str, str], dict[str, int]] = {}
        for path in paths:
            opener = gzip.open if path.suffix == ".gz" else open
            per_query: dict[str, list[tuple[np.float32, str]]] = {}
            with opener(path, "rt") as fh:
                for line in fh:
                    qid, _, docid, _, score, _ = line.split()
                    per_query.setdefault(qid, []).append((np.float32(float(score)), docid))
            for qid, ranked in per_query.items():
                top = sorted(ranked, reverse=True)[:depth]  # score, then docid, descending
                for rank, (_, docid) in enumerate(top, start=1):
                    expected.setdefault((qid, docid), {})[str(path)] = rank
        entries = pool_files(paths, depth)
        assert {(e.qid, e.docid): dict(e.runs) for e in entries} == expected
        order = [(e.qid, e.best_position, e.docid) for e in entries]
        assert order == sorted(order)
