"""Paired statistics for comparing two systems on the same queries (chapter 5, chapter 7 step 7).

Every comparison starts from the per-query differences ``d_i = b_i - a_i`` (candidate minus
baseline, aligned by the caller): pairing cancels query difficulty, which is most of the spread
of per-query scores. On top of ``d`` this module offers the normal interval and the regression
gate's verdict, a paired bootstrap interval, the sign test, the paired t-test and a
randomisation test; then Holm's correction, Kendall's tau between leaderboards and the sample
size arithmetic.

The tests scipy has (the paired t-test, the exact binomial sign test, Kendall's tau-b) are
scipy's; normal quantiles are the standard library's (``statistics.NormalDist``). What is
written here is what scipy does not offer at this speed or memory: the paired bootstrap and
the randomisation test, drawn in blocks, and the gate's arithmetic around them.

This module is a pure core: no Django, numpy arrays in, frozen dataclasses out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

__all__ = [
    "BootstrapInterval",
    "Comparison",
    "PairedSummary",
    "PermutationTest",
    "TTest",
    "bootstrap_interval",
    "compare_summary",
    "holm",
    "kendall_tau",
    "kendall_tau_between",
    "min_detectable_difference",
    "normal_quantile",
    "paired_differences",
    "paired_summary",
    "paired_t_test",
    "permutation_test",
    "queries_needed",
    "sign_test",
]

Verdict = Literal["regression", "improvement", "inconclusive"]
FloatArray = npt.NDArray[np.float64]

# Elements of one (rows, n) resampling block: 2**22 int64 indices plus the gathered float64
# values is ~64 MiB whatever n is, which keeps peak memory flat as the query set grows.
CHUNK_ELEMENTS = 1 << 22
# 2**20 sign patterns (8 MiB of sums) is the largest exact enumeration worth doing inline.
EXACT_PERMUTATION_MAX_N = 20


def normal_quantile(p: float) -> float:
    """Standard normal quantile ``Phi^{-1}(p)`` (Wichura's AS 241, as the standard library
    computes it); -inf at 0 and +inf at 1, the limits."""
    if not 0 <= p <= 1:
        raise ValueError(f"probability must be in [0, 1], got {p}")
    if p in (0, 1):
        return math.copysign(math.inf, p - 0.5)
    return NormalDist().inv_cdf(p)


# ---------------------------------------------------------------------------------------------
# Paired summary and the regression gate
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedSummary:
    """Mean paired difference with its normal interval, the win/loss shape and the verdict.

    ``se = sd / sqrt(n)`` with the sample sd (ddof=1); ``lo, hi = mean -/+ z * se``.
    A query is a tie when ``|d_i| <= tol``.
    """

    n: int
    mean: float
    sd: float
    se: float
    confidence: float
    z: float
    lo: float
    hi: float
    wins: int
    losses: int
    ties: int
    tol: float
    verdict: Verdict


def paired_differences(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Per-query differences ``d = b - a`` (candidate minus baseline).

    The caller aligns the two arrays query by query; the lengths must match and every value
    must be finite, because a NaN score would silently poison every statistic downstream.
    """
    base = np.asarray(a, dtype=np.float64)
    cand = np.asarray(b, dtype=np.float64)
    if base.ndim != 1 or base.shape != cand.shape:
        raise ValueError(f"need two aligned 1-D arrays, got shapes {base.shape} and {cand.shape}")
    if not (np.isfinite(base).all() and np.isfinite(cand).all()):
        raise ValueError("per-query scores must be finite")
    return cand - base


def paired_summary(
    d: npt.ArrayLike, *, confidence: float = 0.95, z: float | None = None, tol: float = 0.0
) -> PairedSummary:
    """Summarise paired differences as the chapter 7 gate does.

    ``z`` defaults to ``z_{1-(1-confidence)/2}`` (1.95996398454005 at 95 %); pass ``z=1.96`` to
    reproduce the book's rounding. Verdict: "regression" when ``hi < 0``, "improvement" when
    ``lo > 0``, else "inconclusive" (an interval that touches zero does not exclude it).
    """
    diffs = _as_differences(d, minimum=2)
    n = diffs.size
    _check_confidence(confidence)
    z_used = normal_quantile(0.5 + confidence / 2) if z is None else float(z)
    mean = float(diffs.mean())
    sd = float(diffs.std(ddof=1))
    se = sd / math.sqrt(n)
    lo, hi = mean - z_used * se, mean + z_used * se
    wins, losses, ties = _win_loss_tie(diffs, tol)
    return PairedSummary(
        n, mean, sd, se, confidence, z_used, lo, hi, wins, losses, ties, tol, _verdict(lo, hi)
    )


def _verdict(lo: float, hi: float) -> Verdict:
    if hi < 0:
        return "regression"
    if lo > 0:
        return "improvement"
    return "inconclusive"


def _win_loss_tie(diffs: FloatArray, tol: float) -> tuple[int, int, int]:
    if tol < 0:
        raise ValueError(f"tie tolerance must be >= 0, got {tol}")
    wins = int(np.count_nonzero(diffs > tol))
    losses = int(np.count_nonzero(diffs < -tol))
    return wins, losses, diffs.size - wins - losses


def _as_differences(d: npt.ArrayLike, *, minimum: int) -> FloatArray:
    diffs = np.asarray(d, dtype=np.float64)
    if diffs.ndim != 1 or diffs.size < minimum:
        raise ValueError(f"need a 1-D array of at least {minimum} differences")
    if not np.isfinite(diffs).all():
        raise ValueError("differences must be finite")
    return diffs


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


# ---------------------------------------------------------------------------------------------
# Paired bootstrap
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapInterval:
    """Percentile interval of the mean difference over query resamples."""

    lo: float
    hi: float
    confidence: float
    resamples: int
    seed: int


def bootstrap_interval(
    d: npt.ArrayLike, *, resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> BootstrapInterval:
    """Paired bootstrap: resample *queries* with replacement and take percentiles of the means.

    ``means[r] = mean(d[idx[r]])`` with ``idx = rng.integers(0, n, size=(resamples, n))``;
    ``lo, hi`` are the ``alpha/2`` and ``1 - alpha/2`` quantiles of ``means`` with linear
    interpolation (numpy's default, also scipy.stats.bootstrap's percentile method).
    The index matrix is drawn in row blocks; numpy's Generator consumes its stream element by
    element, so the blocks concatenate to exactly the single big draw and the interval is
    the same as the naive one for the same seed, at a fraction of its memory.
    """
    diffs = _as_differences(d, minimum=1)
    _check_count("resamples", resamples)
    _check_confidence(confidence)
    alpha = 1 - confidence
    means = _bootstrap_means(diffs, resamples, np.random.default_rng(seed))
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return BootstrapInterval(float(lo), float(hi), confidence, resamples, seed)


def _bootstrap_means(diffs: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    n = diffs.size
    rows = max(1, CHUNK_ELEMENTS // n)
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = diffs[idx].mean(axis=1)
    return means


def _check_count(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


# ---------------------------------------------------------------------------------------------
# Significance tests
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TTest:
    """Paired t-test: ``t = mean / se``, ``df = n - 1``, two-sided p."""

    t: float
    df: int
    p: float


@dataclass(frozen=True)
class PermutationTest:
    """Randomisation test of the mean difference by sign flips.

    ``method`` is "exact" (all ``2**m`` patterns, ``resamples`` = that count) or "monte_carlo".
    """

    p: float
    method: Literal["exact", "monte_carlo"]
    resamples: int


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test; ties are discarded before calling.

    ``p = min(1, 2 * P(X <= min(wins, losses)))`` with ``X ~ Bin(wins + losses, 1/2)``:
    scipy's ``binomtest(...).pvalue``, which for ``p = 1/2`` (a symmetric binomial) sums the
    same tails. No queries moved (``wins = losses = 0``) is no evidence: ``p = 1``.
    """
    if wins < 0 or losses < 0:
        raise ValueError("wins and losses must be non-negative")
    m = wins + losses
    if m == 0:
        return 1.0
    return min(1.0, float(sps.binomtest(wins, m, 0.5).pvalue))


def paired_t_test(d: npt.ArrayLike) -> TTest:
    """Paired t-test: scipy's ``ttest_rel(b, a)``, on the differences ``d = b - a``.

    ``t = mean(d) / (sd(d) / sqrt(n))``, ``p = 2 * P(T_{n-1} > |t|)``. When every difference
    is equal scipy has no answer (NaN); here all zero gives ``t = 0, p = 1`` (nothing
    changed) and a non-zero constant ``t = +-inf, p = 0`` (a change without any spread).
    """
    diffs = _as_differences(d, minimum=2)
    n = diffs.size
    mean, sd = float(diffs.mean()), float(diffs.std(ddof=1))
    if sd == 0:
        return (
            TTest(0.0, n - 1, 1.0)
            if mean == 0
            else TTest(math.copysign(math.inf, mean), n - 1, 0.0)
        )
    result = sps.ttest_1samp(diffs, 0.0)
    return TTest(float(result.statistic), n - 1, float(result.pvalue))


def permutation_test(
    d: npt.ArrayLike,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    exact_max_n: int = EXACT_PERMUTATION_MAX_N,
) -> PermutationTest:
    """Two-sided randomisation test of ``mean(d) = 0`` by flipping the sign of each difference.

    Under the null each ``d_i`` is as likely to be ``-d_i``. Zero differences are dropped: their
    flip changes no sum, so the proportion below is the same. With ``m`` non-zero differences:
    - ``m <= exact_max_n``: every pattern, ``p = #{|S*| >= |S|} / 2**m`` (the identity pattern
      is among them, so ``p >= 2 / 2**m``);
    - otherwise ``resamples`` random patterns, ``p = (1 + #{|S*| >= |S|}) / (resamples + 1)``,
      which counts the observed pattern once and so is never 0 (a valid p-value).
    ``S`` is the sum (the mean times a constant). A relative slack of 1e-10 on the comparison
    counts patterns whose sum equals the observed one but rounds differently as "as extreme".
    """
    diffs = _as_differences(d, minimum=1)
    _check_count("resamples", resamples)
    moved = diffs[diffs != 0]
    if moved.size == 0:
        return PermutationTest(1.0, "exact", 1)
    threshold = abs(float(moved.sum())) - 1e-10 * float(np.abs(moved).sum())
    if moved.size <= exact_max_n:
        sums = _all_signed_sums(moved)
        return PermutationTest(_share(sums, threshold), "exact", sums.size)
    hits = _random_sign_hits(moved, threshold, resamples, np.random.default_rng(seed))
    return PermutationTest((1 + hits) / (resamples + 1), "monte_carlo", resamples)


def _share(sums: FloatArray, threshold: float) -> float:
    return int(np.count_nonzero(np.abs(sums) >= threshold)) / sums.size


def _all_signed_sums(values: FloatArray) -> FloatArray:
    """Every ``sum(s_i * v_i)`` over ``s in {-1, 1}**m``, as the outer sum of two halves.

    Meeting in the middle needs ``2 * 2**(m/2)`` partial sums and one ``2**m`` outer sum,
    instead of a ``(2**m, m)`` sign matrix.
    """
    half = values.size // 2
    left, right = _half_sums(values[:half]), _half_sums(values[half:])
    return (left[:, None] + right[None, :]).ravel()


def _half_sums(values: FloatArray) -> FloatArray:
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def _random_sign_hits(
    values: FloatArray, threshold: float, resamples: int, rng: np.random.Generator
) -> int:
    n = values.size
    rows, width = max(1, CHUNK_ELEMENTS // n), -(-n // 8)
    hits = 0
    for start in range(0, resamples, rows):
        count = min(rows, resamples - start)
        # One random byte gives eight fair signs: 8x fewer draws than integers(0, 2).
        raw = np.frombuffer(rng.bytes(count * width), dtype=np.uint8).reshape(count, width)
        bits = np.unpackbits(raw, axis=1, count=n).astype(np.float64)
        # S* = sum(s_i v_i) with s = 2 bit - 1, i.e. 2 (bits @ v) - sum(v): one BLAS matvec.
        sums = 2.0 * (bits @ values) - values.sum()
        hits += int(np.count_nonzero(np.abs(sums) >= threshold))
    return hits


def holm(pvalues: npt.ArrayLike) -> FloatArray:
    """Holm's step-down adjustment, in the input order.

    Sorting ascending, ``adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j))``: the running max
    keeps the adjusted values monotone in the raw order, as statsmodels' ``holm`` does.
    Tied raw p-values get the same adjusted value whatever order the sort puts them in.
    """
    raw = np.asarray(pvalues, dtype=np.float64)
    if raw.ndim != 1:
        raise ValueError("p-values must be a 1-D sequence")
    if raw.size and not ((raw >= 0) & (raw <= 1)).all():
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(raw, kind="stable")
    factors = np.arange(raw.size, 0, -1, dtype=np.float64)
    stepped = np.minimum(1.0, np.maximum.accumulate(raw[order] * factors))
    adjusted = np.empty_like(raw)
    adjusted[order] = stepped
    return adjusted


# ---------------------------------------------------------------------------------------------
# Agreement between leaderboards
# ---------------------------------------------------------------------------------------------


def kendall_tau(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Kendall's tau-b: scipy's ``kendalltau(x, y).statistic``.

    Concordant minus discordant pairs over the geometric mean of the pairs untied in each
    ranking. NaN when either ranking is constant (tau is undefined), without scipy's warning.
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.ndim != 1 or xs.shape != ys.shape or xs.size < 2:
        raise ValueError("need two aligned 1-D arrays of at least 2 values")
    if (xs == xs[0]).all() or (ys == ys[0]).all():
        return math.nan
    return float(sps.kendalltau(xs, ys).statistic)


def kendall_tau_between(scores_a: Mapping[str, float], scores_b: Mapping[str, float]) -> float:
    """Kendall's tau-b between two leaderboards (system -> score) over their common systems."""
    common = sorted(set(scores_a) & set(scores_b))
    if len(common) < 2:
        raise ValueError(f"need at least 2 systems in common, got {len(common)}")
    return kendall_tau([scores_a[s] for s in common], [scores_b[s] for s in common])


# ---------------------------------------------------------------------------------------------
# Sample size (chapter 5)
# ---------------------------------------------------------------------------------------------


def queries_needed(delta: float, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Queries to detect a mean paired difference ``delta`` (two-sided test at level ``alpha``).

    ``n = ceil(((z_{1-alpha/2} + z_{power}) * sd_diff / delta)^2)``. A relative slack of 1e-12
    before the ceiling keeps an exact integer from rounding up because of float noise.
    """
    if delta <= 0 or sd_diff <= 0:
        raise ValueError("delta and sd_diff must be positive")
    n = ((_z_sum(alpha, power) * sd_diff / delta) ** 2) * (1 - 1e-12)
    return max(2, math.ceil(n))


def min_detectable_difference(
    n: int, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest mean difference ``n`` queries detect: ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``.

    With ``power=0.5`` (``z_power = 0``) this is the interval half-width, the "resolution"
    chapter 5 quotes.
    """
    if n < 2 or sd_diff <= 0:
        raise ValueError("need n >= 2 and a positive sd_diff")
    return _z_sum(alpha, power) * sd_diff / math.sqrt(n)


def _z_sum(alpha: float, power: float) -> float:
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("alpha and power must be in (0, 1)")
    return normal_quantile(1 - alpha / 2) + normal_quantile(power)


# ---------------------------------------------------------------------------------------------
# The comparison report
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Everything the paired report prints, from one call."""

    summary: PairedSummary
    bootstrap: BootstrapInterval | None  # None when no resamples were asked for
    sign_p: float
    t_test: TTest
    permutation: PermutationTest

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready; the keys of ``compare --format json`` plus the test details.

        Non-finite numbers (an infinite t) become ``None`` because JSON has no infinity.
        """
        s, boot = self.summary, self.bootstrap
        return {
            "n": s.n,
            "mean_diff": s.mean,
            "sd": s.sd,
            "se": s.se,
            "confidence": s.confidence,
            "z": s.z,
            "ci": [s.lo, s.hi],
            "wins": s.wins,
            "losses": s.losses,
            "ties": s.ties,
            "tie_tolerance": s.tol,
            "verdict": s.verdict,
            "bootstrap": None
            if boot is None
            else {"ci": [boot.lo, boot.hi], "resamples": boot.resamples, "seed": boot.seed},
            "sign_test": {"p": self.sign_p},
            "t_test": {
                "t": _finite_or_none(self.t_test.t),
                "df": self.t_test.df,
                "p": self.t_test.p,
            },
            "permutation": {
                "p": self.permutation.p,
                "method": self.permutation.method,
                "resamples": self.permutation.resamples,
            },
        }


def compare_summary(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    bootstrap: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    permutations: int = 10_000,
    tol: float = 0.0,
    z: float | None = None,
) -> Comparison:
    """Compare candidate ``b`` with baseline ``a`` on aligned per-query scores.

    The bootstrap and the Monte Carlo permutation test each get their own
    ``default_rng(seed)``, so each reproduces its stand-alone call with the same seed.
    ``bootstrap=0`` skips the bootstrap (``Comparison.bootstrap`` is None): an interval from
    a handful of resamples would look certain and mean nothing.
    """
    d = paired_differences(a, b)
    summary = paired_summary(d, confidence=confidence, z=z, tol=tol)
    boot = (
        bootstrap_interval(d, resamples=bootstrap, confidence=confidence, seed=seed)
        if bootstrap > 0
        else None
    )
    return Comparison(
        summary=summary,
        bootstrap=boot,
        sign_p=sign_test(summary.wins, summary.losses),
        t_test=paired_t_test(d),
        permutation=permutation_test(d, resamples=permutations, seed=seed),
    )


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
