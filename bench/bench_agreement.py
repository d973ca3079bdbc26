"""Bootstrap of Cohen's kappa: 10,000 resamples over ~11,000 judged pairs.

Data: NIST's TREC DL 2020 passage qrels against GPT-4o with the UMBRELA prompt on the same
11,386 pairs (54 queries) when ../shared/data is present; otherwise a synthetic pair of judges
of the same size and shape. Cases, measured in the same run:

- ``bootstrap_confusions`` alone, resampling whole queries, then single pairs;
- ``agreement_report`` end to end (every kappa, alpha and interval), both units;
- a naive numpy pair bootstrap: one (B, n) index matrix, one bincount, kappa per resample;
- scikit-learn's ``cohen_kappa_score`` in a Python loop, timed on 200 resamples and scaled
  to 10,000 (running all of them would take minutes and tell nothing more).

Wall time is the best of 5 runs; peak memory is from tracemalloc in one further run.
Writes ``bench/results/agreement.md``.

    python bench/bench_agreement.py
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import sklearn
from sklearn.metrics import cohen_kappa_score

from agreement.kappa import (
    Paired,
    Unit,
    align_qrels,
    bootstrap_confusions,
    kappa_from_confusion,
)
from agreement.report import (
    agreement_report,
)

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe
from formats.trec import read_qrels

RESAMPLES = 10_000
LOOP_SAMPLE = 200
REPEATS = 5
SEED = 0
LABELS = [0, 1, 2, 3]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results" / "agreement.md"
Qrels = dict[str, dict[str, int]]
Interval = tuple[float, float]


def real_judges() -> tuple[Qrels, Qrels, str] | None:
    nist = DATA / "trec-dl-2020-passage" / "qrels.dl20-passage.txt"
    llm = DATA / "llm-qrels" / "umbrela-gpt4o-arabzad" / "umbrela_gpt-4o_graded_dl20.txt"
    if not (nist.exists() and llm.exists()):
        return None
    return read_qrels(nist), read_qrels(llm), "TREC DL 2020 NIST qrels vs UMBRELA GPT-4o"


def synthetic_judges() -> tuple[Qrels, Qrels, str]:
    """11,386 pairs over 54 queries; B agrees with A about 60% of the time, else drifts up."""
    rng = np.random.default_rng(2024)
    a_grades = rng.choice(4, size=11_386, p=[0.68, 0.17, 0.09, 0.06])
    drift = rng.choice([-1, 0, 0, 0, 1, 1, 2], size=a_grades.size)
    b_grades = np.clip(a_grades + drift, 0, 3)
    a: Qrels = {}
    b: Qrels = {}
    for i, (ga, gb) in enumerate(zip(a_grades.tolist(), b_grades.tolist(), strict=True)):
        a.setdefault(f"q{i % 54}", {})[f"d{i}"] = ga
        b.setdefault(f"q{i % 54}", {})[f"d{i}"] = gb
    return a, b, "synthetic judges (../shared/data absent)"


def quantiles(kappas: np.ndarray) -> Interval:
    lo, hi = np.quantile(kappas[~np.isnan(kappas)], [0.025, 0.975])
    return float(lo), float(hi)


def vectorised_kappa(confusions: np.ndarray) -> np.ndarray:
    n = confusions.sum(axis=(1, 2))
    observed = np.trace(confusions, axis1=1, axis2=2) / n
    expected = (confusions.sum(axis=2) * confusions.sum(axis=1)).sum(axis=1) / n**2
    return (observed - expected) / (1 - expected)


def core_query(paired: Paired) -> Interval:
    confusions = bootstrap_confusions(paired, LABELS, resamples=RESAMPLES, unit="query", seed=SEED)
    return quantiles(vectorised_kappa(confusions))


def core_pair(paired: Paired) -> Interval:
    confusions = bootstrap_confusions(paired, LABELS, resamples=RESAMPLES, unit="pair", seed=SEED)
    return quantiles(vectorised_kappa(confusions))


def full_report(a: Qrels, b: Qrels, unit: Unit) -> Interval:
    ci = agreement_report(a, b, bootstrap=RESAMPLES, unit=unit, seed=SEED).ci["kappa"]
    assert ci is not None
    return ci


def naive_pairs(paired: Paired) -> Interval:
    k = len(LABELS)
    cells = paired.a * k + paired.b
    idx = np.random.default_rng(SEED).integers(0, paired.n, size=(RESAMPLES, paired.n))
    flat = (np.arange(RESAMPLES)[:, None] * k * k + cells[idx]).ravel()
    confusions = np.bincount(flat, minlength=RESAMPLES * k * k).reshape(RESAMPLES, k, k)
    return quantiles(vectorised_kappa(confusions.astype(float)))


def sklearn_loop(paired: Paired) -> Interval:
    rng = np.random.default_rng(SEED)
    kappas = []
    for _ in range(LOOP_SAMPLE):
        idx = rng.integers(0, paired.n, size=paired.n)
        kappas.append(cohen_kappa_score(paired.a[idx], paired.b[idx]))
    return quantiles(np.array(kappas))


def best_time(fn: Callable[[], Interval]) -> tuple[float, Interval]:
    best, result = float("inf"), (float("nan"), float("nan"))
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def peak_mib(fn: Callable[[], Interval]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def machine() -> str:
    return describe(("numpy", np.__version__), ("scikit-learn", sklearn.__version__))


def main() -> None:
    a, b, source = real_judges() or synthetic_judges()
    paired = align_qrels(a, b)
    cases: list[tuple[str, Callable[[], Interval], float]] = [
        ("bootstrap_confusions, unit=query", lambda: core_query(paired), 1),
        ("bootstrap_confusions, unit=pair", lambda: core_pair(paired), 1),
        ("agreement_report, unit=query (everything)", lambda: full_report(a, b, "query"), 1),
        ("agreement_report, unit=pair (everything)", lambda: full_report(a, b, "pair"), 1),
        ("naive numpy pairs, one (B, n) index matrix", lambda: naive_pairs(paired), 1),
        (
            f"sklearn cohen_kappa_score loop, {LOOP_SAMPLE} resamples scaled to {RESAMPLES:,}",
            lambda: sklearn_loop(paired),
            RESAMPLES / LOOP_SAMPLE,
        ),
    ]
    rows = []
    for name, fn, scale in cases:
        seconds, interval = best_time(fn)
        rows.append((name, seconds * scale, peak_mib(fn), interval))
        print(f"{name}: {seconds * scale:.3f} s")
    point = kappa_from_confusion(
        np.bincount(paired.a * 4 + paired.b, minlength=16).reshape(4, 4)
    ).kappa
    write_report(rows, source, paired, point)


def write_report(rows: list, source: str, paired: Paired, point: float) -> None:
    queries = len(set(paired.qids.tolist()))
    lines = [
        "# Agreement bootstrap benchmark",
        "",
        f"Date: {dt.date.today().isoformat()}  ",
        f"Machine: {machine()}",
        "",
        f"{source}: {paired.n:,} pairs over {queries} queries, Cohen's kappa {point:.4f}. "
        f"{RESAMPLES:,} resamples, seed {SEED}, best of {REPEATS} runs; peak memory from "
        "tracemalloc in a separate run.",
        "",
        "| implementation | wall time (s) | peak memory (MiB) | kappa 95 % CI |",
        "|---|---:|---:|---|",
    ]
    for name, seconds, mib, (lo, hi) in rows:
        memory = f"{mib:.0f}" if mib >= 1 else "< 1"
        lines.append(f"| {name} | {seconds:.3f} | {memory} | [{lo:.4f}, {hi:.4f}] |")
    lines += [
        "",
        "Resampling whole queries gives the wider interval, and the honest one: pairs of one "
        "query share a topic and are judged together, so they are not independent draws. The "
        "pair bootstrap draws each resample's cell counts as Multinomial(n, observed shares), "
        "which is what counting n indices drawn with replacement produces, without the "
        "(B, n) index matrix; its interval matches the naive one up to sampling noise. The "
        "query bootstrap counts how often each query is drawn with one bincount over "
        "flattened (resample, query) indices and sums per-query confusion matrices with one "
        "matrix product. `agreement_report` also computes the weighted and binary kappas and "
        "three alphas for every resample. The scikit-learn loop's time is scaled from "
        f"{LOOP_SAMPLE} resamples, and its interval comes from those {LOOP_SAMPLE} only.",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
