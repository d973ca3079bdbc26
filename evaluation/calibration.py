"""Calibration of an LLM judge against the humans, and the gate. Pure core: no Django.

Chapter 7, step 5: the judge grades the pairs the humans graded (the double-judged subset),
and is licensed to label at scale only when it agrees with a human about as well as a second
human does — and is neither more lenient, nor blind to the relevant class, nor unreliable,
nor ranking systems otherwise than the humans' labels do.

Definitions, stated once:

* A *calibrated* pair has a human grade and a row of the judge version (``n`` counts them).
  A row that is not ``ok`` (a parse failure or a failed call) is missing, never guessed: it
  counts in ``parse_failures`` (their share of the calibrated pairs) and takes no part in
  the kappas.
* ``kappa`` (and ``_linear``, ``_quadratic``, ``_binary`` at the relevance threshold) is the
  LLM against each human's grade *stacked*: every (pair, human) is one row. That is what a
  second human is measured by, so the figure compares with ``human_kappa`` apples to apples.
  ``consensus`` is the LLM against the pair's final label (adjudicated, else agreed, else the
  lowest grade given: `agreement.labels`), ``per_human`` against each person alone.
* ``human_kappa`` is the pair's first grader against its second, by time (as the agreement
  dashboard's headline), on the same pairs; None when no pair has two humans.
* Confusion rows are the humans' grades, columns the LLM's, labels 0..3. ``per_grade_recall[g]``
  is the share of the humans' g the LLM also graded g; ``recall`` the share of the humans'
  relevant rows (grade >= threshold) the LLM also found relevant.
* ``leniency``: mean grade difference (LLM minus humans) and positive rates at the threshold,
  ``ratio`` = LLM rate / humans' rate.
* Intervals: percentile bootstrap resampling whole queries, seeded.
* ``tau``: Kendall's tau-b between the systems' orders by nDCG@10 under the humans' consensus
  labels and under the LLM's, over the same pairs; None under three runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import kendalltau

from agreement.kappa import (
    DEFAULT_RESAMPLES,
    Paired,
    binarizer,
    bootstrap_confusions,
    confusion_matrix,
    disagreement_weights,
    grade_recall,
    kappa_from_confusion,
    kappa_parts,
    leniency,
    percentile_interval,
)

__all__ = [
    "CODES",
    "LABELS",
    "Observations",
    "Thresholds",
    "calibrate",
    "ranking_tau",
]

LABELS = (0, 1, 2, 3)
CODES = ("too_few", "ceiling", "floor", "leniency", "recall", "parse_failures", "ranking")
MIN_RUNS = 3
CONFIDENCE = 0.95
_WEIGHTS = {"kappa": None, "kappa_linear": "linear", "kappa_quadratic": "quadratic"}

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Thresholds:
    """The gate's conditions (`judging.models.JudgeSettings`, defaults from the issue)."""

    min_pairs: int = 100
    ceiling_margin: float = 0.05
    kappa_floor: float = 0.30
    max_mean_diff: float = 0.3
    ratio_low: float = 0.8
    ratio_high: float = 1.25
    min_recall: float = 0.7
    max_parse_failures: float = 0.02
    min_tau: float = 0.8
    relevance_threshold: int = 2


@dataclass(frozen=True, eq=False)
class Observations:
    """What calibration reads, as columns.

    Per pair of the subset (index i): ``qid``, ``llm`` (the judge's grade, -1 when its row is
    not ok), ``has_llm`` (it has a row at all), ``consensus`` (final label, -1 for none),
    ``human_only`` (the pair's query is in the human-only slice).
    Per human grade (index j), sorted by pair and then by time: ``human_pair`` (i),
    ``human_rater`` (a position in ``raters``), ``human_grade``.
    ``retest``: the (repeat 0, repeat 1) grades of the retest pairs both graded, or None when
    the judge has no repeats (an external judge). ``run_scores``: per run, nDCG@10 under the
    humans' and the LLM's labels (see `ranking_tau`), or None.
    """

    qid: npt.NDArray[np.str_]
    llm: IntArray
    has_llm: Bools
    consensus: IntArray
    human_pair: IntArray
    human_rater: IntArray
    human_grade: IntArray
    raters: tuple[str, ...]
    human_only: Bools | None = None
    retest: tuple[IntArray, IntArray] | None = None
    run_scores: Mapping[str, tuple[float, float]] | None = None


@dataclass(frozen=True)
class Condition:
    code: str
    label: str
    value: float | None
    bound: str
    passed: bool
    measured: bool = True


# --------------------------------------------------------------------------- numbers


def _num(value: float | None) -> float | None:
    """A finite float, or None (JSON null) for NaN and missing values."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _binary(confusion: npt.ArrayLike, threshold: int) -> FloatArray:
    """Collapse k x k confusion tables (stacked on leading axes) to 2 x 2 at the threshold."""
    m = binarizer(np.asarray(LABELS), threshold)
    return np.asarray(m.T @ np.asarray(confusion, dtype=np.float64) @ m)


def kappas(a: IntArray, b: IntArray, threshold: int) -> dict[str, Any]:
    """n and the four kappas of A (rows) against B; None values when there are no pairs."""
    if len(a) == 0:
        return {"n": 0, **dict.fromkeys((*_WEIGHTS, "kappa_binary"))}
    table = confusion_matrix(a, b, LABELS)
    found: dict[str, Any] = {"n": len(a)}
    for name, weights in _WEIGHTS.items():
        found[name] = _num(kappa_from_confusion(table, weights).kappa)  # type: ignore[arg-type]
    found["kappa_binary"] = _num(kappa_from_confusion(_binary(table, threshold)).kappa)
    return found


def intervals(
    qids: npt.NDArray[np.generic],
    a: IntArray,
    b: IntArray,
    threshold: int,
    *,
    resamples: int,
    seed: int,
) -> dict[str, list[float] | None]:
    """Percentile bootstrap intervals of the four kappas, resampling whole queries."""
    names = (*_WEIGHTS, "kappa_binary")
    if len(a) == 0 or resamples == 0:
        return dict.fromkeys(names)
    paired = Paired(qids=qids, a=a, b=b, only_a=0, only_b=0)
    tables = bootstrap_confusions(paired, LABELS, resamples=resamples, unit="query", seed=seed)
    found: dict[str, list[float] | None] = {}
    for name, weights in _WEIGHTS.items():
        values = kappa_parts(tables, disagreement_weights(len(LABELS), weights))[0]  # type: ignore[arg-type]
        found[name] = _interval(values)
    binary = kappa_parts(_binary(tables, threshold), disagreement_weights(2))[0]
    found["kappa_binary"] = _interval(binary)
    return found


def _interval(values: FloatArray) -> list[float] | None:
    found = percentile_interval(np.asarray(values, dtype=np.float64), CONFIDENCE)
    return None if found is None else [found[0], found[1]]


def ranking_tau(run_scores: Mapping[str, tuple[float, float]] | None) -> float | None:
    """Kendall's tau-b between the runs' scores under the humans' labels and under the LLM's;
    None under `MIN_RUNS` runs (or when undefined: every run scored alike)."""
    if run_scores is None or len(run_scores) < MIN_RUNS:
        return None
    human, llm = np.array(list(run_scores.values()), dtype=np.float64).T
    return _num(kendalltau(human, llm, variant="b").statistic)


# --------------------------------------------------------------------------- the report


def _first_two(obs: Observations, keep: Bools) -> tuple[IntArray, IntArray, IntArray]:
    """(pair, first grade, second grade) of the kept pairs with two or more human grades;
    human rows are sorted by pair, then time."""
    rows = np.flatnonzero(keep[obs.human_pair])
    pairs = obs.human_pair[rows]
    starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]]) if len(rows) else rows
    sizes = np.diff(np.r_[starts, len(rows)])
    double = starts[sizes >= 2]
    return pairs[double], obs.human_grade[rows[double]], obs.human_grade[rows[double + 1]]


def _leniency(a: IntArray, b: IntArray, threshold: int) -> dict[str, float | None]:
    if len(a) == 0:
        return dict.fromkeys(("mean_diff", "positive_rate_llm", "positive_rate_human", "ratio"))
    found = leniency(confusion_matrix(a, b, LABELS), LABELS)
    human, llm = float(np.mean(a >= threshold)), float(np.mean(b >= threshold))
    return {
        "mean_diff": _num(found.mean_b - found.mean_a),
        "positive_rate_llm": llm,
        "positive_rate_human": human,
        "ratio": _num(llm / human) if human > 0 else None,
    }


def _recalls(
    a: IntArray, b: IntArray, threshold: int
) -> tuple[dict[str, float | None], float | None]:
    if len(a) == 0:
        return {str(g): None for g in LABELS}, None
    table = confusion_matrix(a, b, LABELS)
    per_grade = grade_recall(table, LABELS).b_matches_a
    relevant = a >= threshold
    recall = float(np.mean(b[relevant] >= threshold)) if relevant.any() else None
    return {str(g): _num(r) for g, r in zip(LABELS, per_grade, strict=True)}, recall


def calibrate(
    obs: Observations,
    thresholds: Thresholds = Thresholds(),
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """The calibration report: every figure, the gate's conditions, `passed` and `reasons`."""
    t = thresholds.relevance_threshold
    graded = np.zeros(len(obs.qid), dtype=np.bool_)
    graded[obs.human_pair] = True
    calibrated = graded & obs.has_llm
    ok = calibrated & (obs.llm >= 0)
    n = int(calibrated.sum())
    stacked = np.flatnonzero(ok[obs.human_pair])
    a, b = obs.human_grade[stacked], obs.llm[obs.human_pair[stacked]]
    qids = obs.qid[obs.human_pair[stacked]]
    report: dict[str, Any] = {"n": n, "graded": int(ok.sum()), "labels": list(LABELS)}
    report |= {k: v for k, v in kappas(a, b, t).items() if k != "n"}
    report["rows"] = len(a)
    report["human"] = _human(obs, ok, t)
    report["human_kappa"] = report["human"]["kappa"]
    report["consensus"] = _consensus(obs, ok, t)
    report["per_human"] = {
        name: kappas(a[mask], b[mask], t)
        for code, name in enumerate(obs.raters)
        if (mask := obs.human_rater[stacked] == code).any()
    }
    report["leniency"] = _leniency(a, b, t)
    report["per_grade_recall"], report["recall"] = _recalls(a, b, t)
    report["confusion"] = confusion_matrix(a, b, LABELS).tolist() if len(a) else _zeros()
    report["parse_failures"] = _num((n - int(ok.sum())) / n) if n else None
    report["retest"], report["retest_n"] = _retest(obs.retest)
    report["tau"] = ranking_tau(obs.run_scores)
    report["ranking"] = _ranking(obs.run_scores)
    report["human_only"] = _slice(obs, ok, stacked, a, b, t)
    report["ci"] = intervals(qids, a, b, t, resamples=resamples, seed=seed)
    pairs, first, second = _first_two(obs, ok)
    report["ci"]["human_kappa"] = intervals(
        obs.qid[pairs], first, second, t, resamples=resamples, seed=seed
    )["kappa"]
    report["threshold"] = t
    conditions = gate(report, thresholds)
    report["conditions"] = [asdict(c) for c in conditions]
    report["thresholds"] = asdict(thresholds)
    report["reasons"] = [c.code for c in conditions if not c.passed]
    report["passed"] = not report["reasons"]
    report["bootstrap"] = {"resamples": resamples, "unit": "query", "seed": seed}
    return report


def _zeros() -> list[list[int]]:
    return [[0] * len(LABELS) for _ in LABELS]


def _human(obs: Observations, keep: Bools, threshold: int) -> dict[str, Any]:
    """The humans' own agreement (first grader against second) on the kept pairs."""
    _, first, second = _first_two(obs, keep)
    return kappas(first, second, threshold)


def _consensus(obs: Observations, ok: Bools, threshold: int) -> dict[str, Any]:
    labelled = np.flatnonzero(ok & (obs.consensus >= 0))
    return kappas(obs.consensus[labelled], obs.llm[labelled], threshold)


def _retest(retest: tuple[IntArray, IntArray] | None) -> tuple[float | None, int]:
    if retest is None or len(retest[0]) == 0:
        return None, 0
    first, second = retest
    return _num(kappa_from_confusion(confusion_matrix(first, second, LABELS)).kappa), len(first)


def _ranking(run_scores: Mapping[str, tuple[float, float]] | None) -> dict[str, Any] | None:
    if not run_scores:
        return None
    return {
        "runs": len(run_scores),
        "measure": "ndcg@10",
        "human": {name: _num(h) for name, (h, _) in run_scores.items()},
        "llm": {name: _num(m) for name, (_, m) in run_scores.items()},
    }


def _slice(
    obs: Observations, ok: Bools, stacked: IntArray, a: IntArray, b: IntArray, threshold: int
) -> dict[str, Any] | None:
    """The figures on the human-only slice's pairs (the reference a new version is compared on)."""
    if obs.human_only is None:
        return None
    inside = obs.human_only[obs.human_pair[stacked]]
    found = kappas(a[inside], b[inside], threshold)
    return {"pairs": int((ok & obs.human_only).sum()), **found}


# --------------------------------------------------------------------------- the gate


def gate(report: Mapping[str, Any], t: Thresholds) -> list[Condition]:
    """Every condition of the gate, in `CODES` order; a condition that cannot be measured
    fails, except the ranking, which is only checked where runs exist."""
    kappa, human = report["kappa"], report["human_kappa"]
    lenient = report["leniency"]
    mean_diff, ratio = lenient["mean_diff"], lenient["ratio"]
    return [
        Condition(
            "too_few",
            "calibrated pairs",
            report["n"],
            f">= {t.min_pairs}",
            report["n"] >= t.min_pairs,
        ),
        _ceiling(kappa, human, t),
        Condition(
            "floor",
            "kappa(LLM, humans), the floor",
            kappa,
            f">= {t.kappa_floor:.2f}",
            kappa is not None and kappa >= t.kappa_floor,
            kappa is not None,
        ),
        Condition(
            "leniency",
            "mean grade difference (LLM - humans) and positive rate ratio",
            mean_diff,
            f"|diff| <= {t.max_mean_diff:g}, ratio in [{t.ratio_low:g}, {t.ratio_high:g}]"
            f" (ratio {_shown(ratio)})",
            mean_diff is not None
            and abs(mean_diff) <= t.max_mean_diff
            and ratio is not None
            and t.ratio_low <= ratio <= t.ratio_high,
            mean_diff is not None,
        ),
        Condition(
            "recall",
            f"recall of the relevant class (grade >= {t.relevance_threshold})",
            report["recall"],
            f">= {t.min_recall:g}",
            report["recall"] is not None and report["recall"] >= t.min_recall,
            report["recall"] is not None,
        ),
        Condition(
            "parse_failures",
            "share of calls without a grade",
            report["parse_failures"],
            f"<= {t.max_parse_failures:g}",
            report["parse_failures"] is not None
            and report["parse_failures"] <= t.max_parse_failures,
            report["parse_failures"] is not None,
        ),
        _ranking_condition(report["tau"], t),
    ]


def _shown(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f}"


def _ceiling(kappa: float | None, human: float | None, t: Thresholds) -> Condition:
    if human is None:
        return Condition(
            "ceiling",
            "kappa(LLM, humans) against the humans' own kappa: the humans' own agreement is "
            "unknown (no double-judged pairs)",
            kappa,
            "humans' kappa unknown",
            False,
            False,
        )
    bound = human - t.ceiling_margin
    return Condition(
        "ceiling",
        "kappa(LLM, humans) against the humans' own kappa, less the margin",
        kappa,
        f">= {bound:.3f} (humans' kappa {human:.3f} - {t.ceiling_margin:g})",
        kappa is not None and kappa >= bound,
        kappa is not None,
    )


def _ranking_condition(tau: float | None, t: Thresholds) -> Condition:
    if tau is None:
        return Condition(
            "ranking",
            f"Kendall's tau of system rankings (needs >= {MIN_RUNS} runs)",
            None,
            f">= {t.min_tau:g}",
            True,
            False,
        )
    return Condition(
        "ranking",
        "Kendall's tau of system rankings (nDCG@10)",
        tau,
        f">= {t.min_tau:g}",
        tau >= t.min_tau,
    )


def observations(
    *,
    qids: Sequence[str],
    llm: Sequence[int | None],
    has_llm: Sequence[bool],
    consensus: Sequence[int | None],
    humans: Sequence[tuple[int, str, int]],
    human_only: Sequence[bool] | None = None,
    retest: Sequence[tuple[int, int]] | None = None,
    run_scores: Mapping[str, tuple[float, float]] | None = None,
) -> Observations:
    """Columns from plain records. ``humans``: (pair index, rater name, grade), in time order
    within each pair."""
    raters = tuple(sorted({name for _, name, _ in humans}))
    code = {name: i for i, name in enumerate(raters)}
    pair = np.array([p for p, _, _ in humans], dtype=np.int64)
    order = np.argsort(pair, kind="stable")
    return Observations(
        qid=np.array(qids, dtype=np.str_),
        llm=np.array([-1 if g is None else g for g in llm], dtype=np.int64),
        has_llm=np.array(has_llm, dtype=np.bool_),
        consensus=np.array([-1 if g is None else g for g in consensus], dtype=np.int64),
        human_pair=pair[order],
        human_rater=np.array([code[r] for _, r, _ in humans], dtype=np.int64)[order]
        if humans
        else np.zeros(0, np.int64),
        human_grade=np.array([g for _, _, g in humans], dtype=np.int64)[order]
        if humans
        else np.zeros(0, np.int64),
        raters=raters,
        human_only=None if human_only is None else np.array(human_only, dtype=np.bool_),
        retest=None
        if retest is None
        else (
            np.array([x for x, _ in retest], dtype=np.int64),
            np.array([y for _, y in retest], dtype=np.int64),
        ),
        run_scores=run_scores,
    )
