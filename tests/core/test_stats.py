"""Paired statistics: worked examples from chapters 5 and 7, and scipy as the reference."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from evaluation import stats
from evaluation.stats import (
    bootstrap_interval,
    compare_summary,
    holm,
    kendall_tau,
    kendall_tau_between,
    min_detectable_difference,
    normal_quantile,
    paired_differences,
    paired_summary,
    paired_t_test,
    permutation_test,
    queries_needed,
    sign_test,
)

RTOL = 1e-10


def close(actual: float, expected: float, rtol: float = RTOL) -> bool:
    """Relative closeness, also for values far below 1 (tiny p-values)."""
    return abs(actual - expected) <= rtol * abs(expected)


def gate_vector(mean: float) -> np.ndarray:
    """Nine differences with the given mean, sample sd exactly 0.3 and so se = 0.3 / 3 = 0.1.

    Deviations from the mean: four of -0.3, one 0, four of +0.3; sum of squares 8 * 0.09 =
    0.72, divided by n - 1 = 8 gives a variance of 0.09.
    """
    return mean + np.array([-0.3] * 4 + [0.0] + [0.3] * 4)


def astuple_counts(summary: stats.PairedSummary) -> tuple[int, int, int]:
    return summary.wins, summary.losses, summary.ties


# ---------------------------------------------------------------------------------------------
# Paired differences and the regression gate (chapter 7, step 7)
# ---------------------------------------------------------------------------------------------


def test_it_takes_candidate_minus_baseline() -> None:
    assert paired_differences([0.5, 0.25, 1.0], [0.75, 0.25, 0.5]).tolist() == [0.25, 0.0, -0.5]


@pytest.mark.parametrize(
    ("a", "b"), [([0.1, 0.2], [0.1]), ([[0.1]], [[0.2]]), ([0.1, math.nan], [0.1, 0.2])]
)
def test_it_rejects_misaligned_or_non_finite_scores(a: list, b: list) -> None:
    with pytest.raises(ValueError):
        paired_differences(a, b)


def test_it_reproduces_the_gate_arithmetic_with_z_1_96() -> None:
    # mean 0.25, se 0.1: lo = 0.25 - 0.196 = 0.054, hi = 0.25 + 0.196 = 0.446.
    summary = paired_summary(gate_vector(0.25), z=1.96)
    assert summary.n == 9
    assert summary.mean == pytest.approx(0.25)
    assert summary.sd == pytest.approx(0.3)
    assert summary.se == pytest.approx(0.1)
    assert (summary.lo, summary.hi) == (pytest.approx(0.054), pytest.approx(0.446))
    assert (summary.wins, summary.losses, summary.ties) == (5, 4, 0)
    assert summary.verdict == "improvement"


def test_it_agrees_with_the_chapter_7_gate_code() -> None:
    rng = np.random.default_rng(7)
    for shift in (-0.05, 0.0, 0.02, 0.05):
        d = list(rng.normal(shift, 0.15, 300))
        # the chapter's code, verbatim apart from names
        mean_d = sum(d) / len(d)
        se = statistics.stdev(d) / len(d) ** 0.5
        lo, hi = mean_d - 1.96 * se, mean_d + 1.96 * se
        expected = "regression" if hi < 0 else "improvement" if lo > 0 else "inconclusive"
        summary = paired_summary(d, z=1.96)
        assert summary.verdict == expected
        assert (summary.lo, summary.hi) == (pytest.approx(lo), pytest.approx(hi))


@pytest.mark.parametrize(
    ("mean", "verdict", "lo", "hi"),
    [
        (0.25, "improvement", 0.054, 0.446),
        (-0.25, "regression", -0.446, -0.054),
        (0.10, "inconclusive", -0.096, 0.296),
    ],
)
def test_it_gives_the_three_verdicts(mean: float, verdict: str, lo: float, hi: float) -> None:
    summary = paired_summary(gate_vector(mean), z=1.96)
    assert summary.verdict == verdict
    assert (summary.lo, summary.hi) == (pytest.approx(lo), pytest.approx(hi))


def test_it_calls_identical_systems_inconclusive() -> None:
    # lo = hi = 0: an interval that touches zero does not exclude it.
    summary = paired_summary(np.zeros(50))
    assert (summary.lo, summary.hi, summary.verdict) == (0.0, 0.0, "inconclusive")
    assert (summary.wins, summary.losses, summary.ties) == (0, 0, 50)


def test_it_uses_the_exact_quantile_unless_told_1_96() -> None:
    # mean 0.195998, se 0.1: the exact z (1.959964) puts lo at +0.0000016, the book's 1.96
    # at -0.000002 -- the rounding decides the verdict only this close to the edge.
    d = gate_vector(0.195998)
    # AS 241 lands within an ulp of the correctly rounded 1.959963984540054.
    assert paired_summary(d).z == pytest.approx(1.959963984540054, rel=1e-15)
    assert paired_summary(d).verdict == "improvement"
    assert paired_summary(d, z=1.96).verdict == "inconclusive"
    assert paired_summary(d, confidence=0.99).z == pytest.approx(2.5758293035489004, rel=1e-15)


def test_it_counts_ties_exactly_unless_given_a_tolerance() -> None:
    d = [0.0, 0.0, 1e-15, -1e-15, 0.2, -0.1, 0.3]
    assert astuple_counts(paired_summary(d)) == (3, 2, 2)
    assert astuple_counts(paired_summary(d, tol=1e-12)) == (2, 1, 4)


def test_it_needs_two_queries_for_an_interval() -> None:
    with pytest.raises(ValueError):
        paired_summary([0.1])


# ---------------------------------------------------------------------------------------------
# Special functions against scipy
# ---------------------------------------------------------------------------------------------


def test_it_matches_scipy_normal_quantiles() -> None:
    grid = np.concatenate(
        [np.linspace(1e-6, 1 - 1e-6, 1001), np.logspace(-300, -1, 60), [0.975, 0.995, 0.8]]
    )
    for p in grid:
        assert close(normal_quantile(float(p)), float(sps.norm.ppf(p))), p
    assert normal_quantile(0.5) == 0.0
    assert normal_quantile(0.0) == -math.inf
    assert normal_quantile(1.0) == math.inf


@pytest.mark.parametrize(
    "d", [[2.0, 1.0], [0.3, -0.2], [5.0, 4.9], [1.0, 2.0, 4.0], [-0.1, 0.2, -0.4], [3.0, 2.9, 3.1]]
)
def test_it_gives_the_t_test_p_value_of_the_closed_forms(d: list[float]) -> None:
    # df = 1 is Cauchy and df = 2 has a closed form: sharper references than a second library.
    result = paired_t_test(np.array(d))
    t = abs(result.t)
    expected = 1 - 2 * math.atan(t) / math.pi if result.df == 1 else 1 - t / math.sqrt(2 + t * t)
    assert close(result.p, expected, 1e-12), (d, result)


@pytest.mark.parametrize("n", [2, 3, 5, 10, 31, 312, 1000, 5000])
def test_it_matches_scipy_paired_t_test(n: int) -> None:
    rng = np.random.default_rng(n)
    for shift in (0.0, 0.01, 0.05, 0.3):
        a = rng.random(n)
        b = a + shift + rng.normal(0, 0.1, n)
        expected = sps.ttest_rel(b, a)
        result = paired_t_test(b - a)
        assert result.df == n - 1
        assert close(result.t, float(expected.statistic))
        assert close(result.p, float(expected.pvalue))


def test_it_handles_constant_differences_in_the_t_test() -> None:
    assert paired_t_test(np.zeros(5)) == stats.TTest(0.0, 4, 1.0)
    assert paired_t_test(np.full(5, -0.25)) == stats.TTest(-math.inf, 4, 0.0)


@pytest.mark.parametrize(
    ("wins", "losses"),
    [(0, 0), (0, 1), (1, 0), (3, 3), (10, 0), (62, 38), (71, 44), (5, 95), (250, 320),
     (2400, 2600), (9_000, 11_000), (11_000, 10_000), (49_000, 51_200), (100, 100_000)],
)  # fmt: skip
def test_it_matches_scipy_binomtest(wins: int, losses: int) -> None:
    expected = 1.0 if wins + losses == 0 else sps.binomtest(wins, wins + losses, 0.5).pvalue
    assert close(sign_test(wins, losses), float(expected), 1e-10)


def test_it_reproduces_the_chapter_sign_tests() -> None:
    # Chapter 5: 62 wins out of the 100 queries where something changed; P(X >= 62) for
    # X ~ Bin(100, 1/2) is 0.0105, so two-sided p = 0.021 < 0.05 -- significant.
    assert sign_test(62, 38) == pytest.approx(0.020978735677851718, rel=1e-12)
    # The five-line report: wins 71 / losses 44 / ties 197 (312 queries); p = 0.015, which
    # agrees with its interval (+0.008 to +0.034) excluding zero.
    assert sign_test(71, 44) == pytest.approx(0.014964671136824323, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# Noise floor and sample size (chapter 5)
# ---------------------------------------------------------------------------------------------


def test_it_reproduces_the_chapter_noise_floor() -> None:
    # n = 500 queries, sigma = 0.35 per system: two independent means differ with sd
    # 0.35 * sqrt(2), so the 95 % half-width is 1.96 * 0.35 * sqrt(2 / 500) = 0.0434 ("4.3
    # points"). Paired, sigma_d = 0.15: 1.96 * 0.15 / sqrt(500) = 0.0131 ("1.3 points"), 3.3x.
    # At power 1/2 (z_power = 0) the minimum detectable difference is exactly that half-width.
    unpaired = min_detectable_difference(500, 0.35 * math.sqrt(2), power=0.5)
    paired = min_detectable_difference(500, 0.15, power=0.5)
    assert round(unpaired, 3) == 0.043
    assert round(paired, 3) == 0.013
    assert round(unpaired / paired, 1) == 3.3


def test_it_reproduces_the_chapter_sample_size() -> None:
    # The formula's numbers were lost from the text; what survives is delta = 0.03, 95 %
    # two-sided, 80 % power and the answer "two hundred to three hundred and fifty". With
    # n = ((1.96 + 0.84) * sigma_d / delta)^2 that range is sigma_d from 0.15 (the chapter's
    # typical paired sd) to 0.20: (2.8 * 5)^2 = 196 and (2.8 * 6.67)^2 = 348.4.
    low, high = (((1.96 + 0.84) * sd / 0.03) ** 2 for sd in (0.15, 0.20))
    assert (low, high) == (pytest.approx(196.0), pytest.approx(348.44, abs=0.01))
    # Exact quantiles (1.959964 + 0.841621 = 2.801585) round up to whole queries:
    assert queries_needed(0.03, 0.15) == 197
    assert queries_needed(0.03, 0.20) == 349


def test_it_inverts_the_sample_size() -> None:
    for delta, sd in ((0.03, 0.15), (0.03, 0.20), (0.01, 0.12), (0.05, 0.3)):
        n = queries_needed(delta, sd)
        assert min_detectable_difference(n, sd) <= delta < min_detectable_difference(n - 1, sd)


def test_it_does_not_round_an_exact_sample_size_up() -> None:
    # z_{0.975} + z_{0.8} = 2.8015852...; delta chosen so that n is 100 up to float noise.
    delta = (normal_quantile(0.975) + normal_quantile(0.8)) * 0.1 / 10
    assert queries_needed(delta, 0.1) == 100


# ---------------------------------------------------------------------------------------------
# Paired bootstrap
# ---------------------------------------------------------------------------------------------


def naive_bootstrap(d: np.ndarray, resamples: int, seed: int, confidence: float) -> tuple:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(resamples, d.size))
    means = d[idx].mean(axis=1)
    alpha = 1 - confidence
    return tuple(np.quantile(means, [alpha / 2, 1 - alpha / 2]))


def test_it_reproduces_the_bootstrap_with_the_same_seed() -> None:
    d = np.random.default_rng(1).normal(0.02, 0.15, 300)
    first = bootstrap_interval(d, seed=42)
    assert bootstrap_interval(d, seed=42) == first
    assert bootstrap_interval(d, seed=43) != first
    assert (first.resamples, first.seed, first.confidence) == (10_000, 42, 0.95)


@pytest.mark.parametrize("chunk_elements", [7, 64, 1 << 22])
def test_it_matches_a_naive_bootstrap_on_the_same_draws(
    chunk_elements: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 7 and 64 elements per block force several blocks, one of them ragged.
    monkeypatch.setattr(stats, "CHUNK_ELEMENTS", chunk_elements)
    d = np.random.default_rng(2).normal(0.0, 0.2, 13)
    result = bootstrap_interval(d, resamples=1_001, seed=5, confidence=0.9)
    assert (result.lo, result.hi) == naive_bootstrap(d, 1_001, 5, 0.9)


def test_it_draws_blocks_that_concatenate_to_one_big_draw() -> None:
    rng = np.random.default_rng(9)
    blocks = [rng.integers(0, 50, size=(rows, 50)) for rows in (3, 17, 1, 29)]
    big = np.random.default_rng(9).integers(0, 50, size=(50, 50))
    assert (np.concatenate(blocks) == big).all()


def test_it_contains_the_mean_for_symmetric_data() -> None:
    d = np.concatenate([np.linspace(-0.3, 0.3, 101), [0.5, -0.5]]) + 0.01
    interval = bootstrap_interval(d, seed=0)
    assert interval.lo < d.mean() < interval.hi
    assert interval.hi - d.mean() == pytest.approx(d.mean() - interval.lo, rel=0.1)


def test_it_lands_between_the_chapters_order_statistics() -> None:
    # Chapter 5 reads lo, hi off the sorted means at 250 and 9750; linear interpolation puts
    # the 2.5 % quantile at 249.975, between means[249] and means[250].
    d = np.random.default_rng(3).normal(0.01, 0.2, 300)
    means = np.sort(d[np.random.default_rng(0).integers(0, 300, size=(10_000, 300))].mean(axis=1))
    interval = bootstrap_interval(d, seed=0)
    assert means[249] <= interval.lo <= means[250]
    assert means[9749] <= interval.hi <= means[9750]


def test_it_agrees_with_scipy_bootstrap_within_resampling_error() -> None:
    rng = np.random.default_rng(4)
    a = rng.random(400)
    b = np.clip(a + rng.normal(0.02, 0.15, 400), 0, 1)
    reference = sps.bootstrap(
        (a, b),
        lambda x, y, axis: (y - x).mean(axis=axis),
        paired=True,
        method="percentile",
        n_resamples=10_000,
        rng=np.random.default_rng(0),
    ).confidence_interval
    ours = bootstrap_interval(b - a, seed=0)
    width = reference.high - reference.low
    assert abs(ours.lo - reference.low) < 0.05 * width
    assert abs(ours.hi - reference.high) < 0.05 * width


# ---------------------------------------------------------------------------------------------
# Randomisation test
# ---------------------------------------------------------------------------------------------


def brute_force_permutation_p(values: list[str]) -> Fraction:
    """All 2^n sign patterns in exact rational arithmetic: #{|S*| >= |S|} / 2^n."""
    d = [Fraction(v) for v in values]
    observed = abs(sum(d, Fraction(0)))
    extreme = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        flipped = sum((s * x for s, x in zip(signs, d, strict=True)), Fraction(0))
        extreme += abs(flipped) >= observed
    return Fraction(extreme, 2 ** len(d))


@pytest.mark.parametrize(
    "values",
    [
        ["0.1", "0.2", "0.3", "-0.1", "0.4"],
        ["0.5", "-0.5", "0.25", "0.25", "-0.125", "0.375", "0.1"],
        # decimals that are not binary fractions, with many exact ties among the sums
        ["0.1", "0.1", "0.2", "-0.3", "0.1", "0.2", "0.3", "-0.1", "0.2", "0.1"],
        ["0.7", "0.3", "-0.2", "0.11", "0.13", "0.05", "-0.07", "0.4", "0.01"],
    ],
)
def test_it_enumerates_sign_flips_exactly(values: list[str]) -> None:
    result = permutation_test(np.array([float(v) for v in values]))
    assert result.method == "exact"
    assert result.resamples == 2 ** len(values)
    assert result.p == float(brute_force_permutation_p(values))


def test_it_drops_zero_differences_from_the_enumeration() -> None:
    values = ["0.3", "0.1", "-0.2", "0.4"]
    padded = np.array([float(v) for v in values] + [0.0] * 30)
    result = permutation_test(padded)
    assert (result.method, result.resamples) == ("exact", 16)
    assert result.p == float(brute_force_permutation_p(values))


def test_it_stays_within_sampling_error_of_the_exact_p() -> None:
    d = np.random.default_rng(11).normal(0.08, 0.3, 16)
    exact = permutation_test(d).p
    resamples = 20_000
    monte_carlo = permutation_test(d, resamples=resamples, seed=3, exact_max_n=0)
    assert monte_carlo.method == "monte_carlo"
    assert abs(monte_carlo.p - exact) < 4 * math.sqrt(exact * (1 - exact) / resamples)


def test_it_reproduces_the_monte_carlo_p_with_the_same_seed() -> None:
    d = np.random.default_rng(12).normal(0.01, 0.2, 500)
    assert permutation_test(d, seed=1) == permutation_test(d, seed=1)


def test_it_never_returns_a_zero_monte_carlo_p() -> None:
    result = permutation_test(np.full(400, 0.1) + np.linspace(0, 0.01, 400), resamples=999)
    assert result.p == 1 / 1000


def test_it_gives_p_one_when_nothing_moved() -> None:
    assert permutation_test(np.zeros(40)).p == 1.0


# ---------------------------------------------------------------------------------------------
# Holm
# ---------------------------------------------------------------------------------------------


def test_it_adjusts_a_hand_worked_holm_example() -> None:
    # raw        0.01   0.04   0.03   0.005     (m = 4)
    # sorted     0.005  0.01   0.03   0.04
    # x (m-j+1)  4      3      2      1
    # product    0.02   0.03   0.06   0.04
    # running max 0.02  0.03   0.06   0.06   -> back in input order: 0.03 0.06 0.06 0.02
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_it_caps_holm_at_one_and_keeps_ties_equal() -> None:
    # sorted 0.3, 0.3, 0.6 times 3, 2, 1: 0.9, 0.6 -> 0.9 (running max), 0.6 -> 0.9
    assert holm([0.3, 0.6, 0.3]).tolist() == pytest.approx([0.9, 0.9, 0.9])
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]
    assert holm([]).size == 0


def test_it_explains_the_56_datasets_trap() -> None:
    # 56 comparisons at 5 %: 56 * 0.05 = 2.8 false "wins" expected from noise alone. After
    # Holm a single dataset only counts if its raw p is below 0.05 / 56 = 0.00089.
    expected_false_wins = 56 * 0.05
    assert expected_false_wins == pytest.approx(2.8)
    rest = [0.5] * 55
    assert holm([0.0008, *rest])[0] < 0.05
    assert holm([0.0009, *rest])[0] > 0.05


# ---------------------------------------------------------------------------------------------
# Kendall's tau
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_it_matches_scipy_kendall_tau_without_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.random(30)
    y = x + rng.normal(0, 0.3, 30)
    assert close(kendall_tau(x, y), float(sps.kendalltau(x, y).statistic))


@pytest.mark.parametrize("seed", range(5))
def test_it_matches_scipy_kendall_tau_b_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, 40)
    y = rng.integers(0, 4, 40)
    assert close(kendall_tau(x, y), float(sps.kendalltau(x, y).statistic))


def test_it_compares_two_leaderboards_over_common_systems() -> None:
    a = {"bm25": 0.42, "e5": 0.61, "bge": 0.63, "gte": 0.58, "only-a": 0.9}
    b = {"bm25": 0.50, "e5": 0.55, "bge": 0.66, "gte": 0.57, "only-b": 0.1}
    # common order by a: bm25 < gte < e5 < bge; by b: bm25 < e5 < gte < bge -> one swap of
    # six pairs: (5 - 1) / 6.
    assert kendall_tau_between(a, b) == pytest.approx(4 / 6)
    with pytest.raises(ValueError):
        kendall_tau_between({"x": 1.0}, {"x": 2.0, "y": 3.0})


def test_it_returns_nan_for_a_constant_ranking() -> None:
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))


# ---------------------------------------------------------------------------------------------
# The bundled comparison
# ---------------------------------------------------------------------------------------------


def test_it_bundles_every_comparison_statistic() -> None:
    rng = np.random.default_rng(21)
    a = rng.random(312)
    b = np.clip(a + rng.normal(0.02, 0.12, 312), 0, 1)
    result = compare_summary(a, b, seed=4)
    d = b - a
    assert result.summary == paired_summary(d)
    assert result.bootstrap == bootstrap_interval(d, seed=4)
    assert result.permutation == permutation_test(d, seed=4)
    assert result.sign_p == sign_test(result.summary.wins, result.summary.losses)
    assert result.t_test == paired_t_test(d)


def test_it_serialises_to_the_compare_json_shape() -> None:
    a = [0.5, 0.4, 0.9, 0.1]
    out = compare_summary(a, [0.6, 0.4, 1.0, 0.2], bootstrap=200, permutations=200).as_dict()
    json.dumps(out, allow_nan=False)
    for key in ("mean_diff", "ci", "wins", "losses", "ties", "verdict"):
        assert key in out
    assert (out["wins"], out["losses"], out["ties"]) == (3, 0, 1)
    assert out["permutation"]["method"] == "exact"


def test_it_writes_an_infinite_t_as_null() -> None:
    # binary fractions, so every difference is exactly 0.25 and the sd exactly 0
    out = compare_summary([0.25, 0.5, 0.75], [0.5, 0.75, 1.0], bootstrap=10, permutations=10)
    assert out.as_dict()["t_test"]["t"] is None
    json.dumps(out.as_dict(), allow_nan=False)


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=3_000)
pvalue_lists = st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=40)


@given(counts, counts)
def test_it_keeps_sign_test_p_in_range_and_symmetric(wins: int, losses: int) -> None:
    p = sign_test(wins, losses)
    assert 0 <= p <= 1
    assert sign_test(losses, wins) == p


@given(pvalue_lists)
def test_it_never_lowers_a_p_value_and_keeps_holm_monotone(raw: list[float]) -> None:
    adjusted = holm(raw)
    assert (adjusted >= np.asarray(raw)).all()
    assert (adjusted <= 1).all()
    order = np.argsort(raw, kind="stable")
    assert (np.diff(adjusted[order]) >= 0).all()


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=30))
def test_it_matches_scipy_kendall_tau_on_any_small_rankings(pairs: list) -> None:
    x, y = (np.array(column, dtype=float) for column in zip(*pairs, strict=True))
    expected = float(sps.kendalltau(x, y).statistic)
    ours = kendall_tau(x, y)
    assert (math.isnan(ours) and math.isnan(expected)) or close(ours, expected, 1e-12)
