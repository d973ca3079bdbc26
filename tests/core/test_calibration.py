"""The calibration maths against the reference implementations: scikit-learn's
cohen_kappa_score (plain, linear, quadratic), scipy's kendalltau, plain numpy for the rest.
Real grades: NIST's DL 2020 qrels as the humans and the published UMBRELA GPT-4o labels as
the LLM, with a second (derived) human on part of the pairs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score

from evaluation.calibration import Thresholds, calibrate, observations, ranking_tau
from formats.trec import read_qrels
from tests.conftest import DATA

NIST = DATA / "trec-dl-2020-passage" / "qrels.dl20-passage.txt"
UMBRELA = DATA / "llm-qrels" / "umbrela-gpt4o-arabzad" / "umbrela_gpt-4o_graded_dl20.txt"
real = pytest.mark.skipif(
    not (NIST.exists() and UMBRELA.exists()),
    reason="DL 2020 qrels and UMBRELA labels (../shared/data) not present",
)


def _kappas(a: list[int], b: list[int], t: int) -> dict[str, float]:
    return {
        "kappa": cohen_kappa_score(a, b, labels=[0, 1, 2, 3]),
        "kappa_linear": cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="linear"),
        "kappa_quadratic": cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic"),
        "kappa_binary": cohen_kappa_score([x >= t for x in a], [x >= t for x in b]),
    }


def _real() -> tuple[list[tuple[str, str]], dict, dict]:
    nist, llm = read_qrels(NIST), read_qrels(UMBRELA)
    keys = [(q, d) for q in sorted(nist) for d in sorted(nist[q])]
    return keys, nist, llm


def _second(grade: int, i: int) -> int:
    """A second human who disagrees on every third pair by one grade."""
    return grade if i % 3 else min(3, grade + 1) if grade < 2 else grade - 1


@real
def test_it_reproduces_the_published_kappas_of_umbrela_on_dl20() -> None:
    keys, nist, llm = _real()
    obs = observations(
        qids=[q for q, _ in keys],
        llm=[llm.get(q, {}).get(d) for q, d in keys],
        has_llm=[d in llm.get(q, {}) for q, d in keys],
        consensus=[nist[q][d] for q, d in keys],
        humans=[(i, "nist", nist[q][d]) for i, (q, d) in enumerate(keys)],
    )
    report = calibrate(obs, Thresholds(), resamples=200)
    assert report["n"] == 11386
    assert round(report["kappa"], 4) == 0.3413
    assert round(report["kappa_binary"], 4) == 0.4497
    assert round(report["kappa_quadratic"], 4) == 0.5547
    a = [nist[q][d] for q, d in keys]
    b = [llm[q][d] for q, d in keys]
    for name, value in _kappas(a, b, 2).items():
        assert report[name] == pytest.approx(value, abs=1e-12), name
    assert report["human_kappa"] is None and report["passed"] is False
    assert "ceiling" in report["reasons"]
    ceiling = next(c for c in report["conditions"] if c["code"] == "ceiling")
    assert "unknown" in ceiling["label"] and not ceiling["measured"]
    lo, hi = report["ci"]["kappa"]
    assert lo < report["kappa"] < hi


@real
def test_it_stacks_every_human_and_measures_the_ceiling_with_two() -> None:
    keys, nist, llm = _real()
    double = 600
    humans = [(i, "nist", nist[q][d]) for i, (q, d) in enumerate(keys)]
    humans += [(i, "second", _second(nist[q][d], i)) for i, (q, d) in enumerate(keys[:double])]
    obs = observations(
        qids=[q for q, _ in keys],
        llm=[llm[q][d] for q, d in keys],
        has_llm=[True] * len(keys),
        consensus=[min(nist[q][d], _second(nist[q][d], i)) for i, (q, d) in enumerate(keys)],
        humans=humans,
    )
    t = Thresholds(relevance_threshold=2)
    report = calibrate(obs, t, resamples=200)
    rows = [(g, llm[keys[i][0]][keys[i][1]]) for i, _, g in sorted(humans, key=lambda h: h[0])]
    stacked = _kappas([h for h, _ in rows], [m for _, m in rows], 2)
    for name, value in stacked.items():
        assert report[name] == pytest.approx(value, abs=1e-12), name
    first = [nist[q][d] for q, d in keys[:double]]
    second = [_second(g, i) for i, g in enumerate(first)]
    assert report["human_kappa"] == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
    assert report["per_human"]["second"]["n"] == double
    b_second = [llm[q][d] for q, d in keys[:double]]
    assert report["per_human"]["second"]["kappa"] == pytest.approx(
        cohen_kappa_score(second, b_second, labels=[0, 1, 2, 3]), abs=1e-12
    )
    h = np.array([h for h, _ in rows])
    m = np.array([m for _, m in rows])
    assert report["leniency"]["mean_diff"] == pytest.approx((m - h).mean())
    assert report["recall"] == pytest.approx(np.mean(m[h >= 2] >= 2))
    assert report["per_grade_recall"]["3"] == pytest.approx(np.mean(m[h == 3] == 3))
    assert np.array(report["confusion"]).sum() == len(rows)
    ceiling = next(c for c in report["conditions"] if c["code"] == "ceiling")
    assert ceiling["measured"] and ceiling["passed"] == (
        report["kappa"] >= report["human_kappa"] - t.ceiling_margin
    )


def test_it_counts_parse_failures_as_missing_never_as_a_grade() -> None:
    obs = observations(
        qids=["q1", "q1", "q2", "q2"],
        llm=[3, None, 0, 2],
        has_llm=[True, True, True, False],
        consensus=[3, 1, 0, 2],
        humans=[(0, "a", 3), (1, "a", 1), (2, "a", 0), (3, "a", 2)],
    )
    report = calibrate(obs, Thresholds(min_pairs=1), resamples=0)
    assert report["n"] == 3  # the pair without a row is not calibrated
    assert report["graded"] == 2
    assert report["parse_failures"] == pytest.approx(1 / 3)
    assert "parse_failures" in report["reasons"]


def test_it_passes_a_judge_that_agrees_as_well_as_the_humans() -> None:
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 4, 400)
    humans = [(i, "a", int(g)) for i, g in enumerate(truth)]
    humans += [(i, "b", int(g)) for i, g in enumerate(truth)]
    runs = {f"r{i}": (0.1 * i, 0.1 * i + 0.01) for i in range(4)}
    obs = observations(
        qids=[f"q{i % 20}" for i in range(400)],
        llm=list(map(int, truth)),
        has_llm=[True] * 400,
        consensus=list(map(int, truth)),
        humans=humans,
        retest=[(int(g), int(g)) for g in truth[:50]],
        run_scores=runs,
    )
    report = calibrate(obs, Thresholds(), resamples=100)
    assert report["passed"] is True and report["reasons"] == []
    assert report["tau"] == pytest.approx(1.0) and report["retest"] == pytest.approx(1.0)


def test_it_measures_tau_b_as_scipy_and_only_from_three_runs() -> None:
    scores = {"a": (0.5, 0.4), "b": (0.6, 0.3), "c": (0.7, 0.7), "d": (0.2, 0.2)}
    human, llm = zip(*scores.values(), strict=True)
    assert ranking_tau(scores) == pytest.approx(kendalltau(human, llm).statistic)
    assert ranking_tau(dict(list(scores.items())[:2])) is None
