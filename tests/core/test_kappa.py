"""Agreement statistics: the chapter's worked examples, reference parity, properties, edge cases.

Reference implementations (scikit-learn's ``cohen_kappa_score``, the ``krippendorff`` package)
are test dependencies only; the core never imports them.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from agreement.kappa import (
    Level,
    Weighting,
    align_qrels,
    binary_kappa,
    bootstrap_confusions,
    cohen_kappa,
    confusion_matrix,
    grade_recall,
    kappa_from_confusion,
    krippendorff_alpha,
    label_set,
    landis_koch,
    leniency,
    rating_matrix,
)
from agreement.report import (
    TRAP_SENTENCE,
    agreement_report,
)
from formats.trec import FormatError, read_qrels

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
NO_DATA = "real judgment data (../shared/data) not present"
needs_data = pytest.mark.skipif(not DATA.exists(), reason=NO_DATA)
TOL = 1e-9
Qrels = dict[str, dict[str, int]]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")


def from_table(table: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Label arrays whose confusion matrix is ``table`` (rows = A, labels 0..k-1)."""
    k = len(table)
    counts = np.array(table).ravel()
    cells = np.repeat(np.arange(k * k), counts)
    return cells // k, cells % k


def as_qrels(labels: np.ndarray, queries: int = 1) -> Qrels:
    """One judge's labels as qrels, pair i going to query ``i % queries``."""
    qrels: Qrels = {}
    for i, grade in enumerate(labels.tolist()):
        qrels.setdefault(f"q{i % queries}", {})[f"d{i}"] = grade
    return qrels


def judges(table: list[list[int]], queries: int = 1) -> tuple[Qrels, Qrels]:
    """Qrels of judges A and B whose confusion matrix is ``table``."""
    a, b = from_table(table)
    return as_qrels(a, queries), as_qrels(b, queries)


def sklearn_kappa(a: np.ndarray, b: np.ndarray, weights: Weighting = None) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it warns, then returns nan, when kappa is undefined
        return float(cohen_kappa_score(a, b, weights=weights))


def package_alpha(units_by_raters: np.ndarray, level: Level) -> float:
    """The package's alpha (it takes raters x units); NaN where it refuses a single value."""
    try:
        alpha = krippendorff.alpha(reliability_data=units_by_raters.T, level_of_measurement=level)
    except ValueError as error:
        if "more than one value" not in str(error):
            raise
        return float("nan")
    return float(alpha)


def same(ours: float, reference: float) -> bool:
    both_undefined = np.isnan(ours) and np.isnan(reference)
    return bool(both_undefined or abs(ours - reference) <= TOL)


# --------------------------------------------------------------------------- chapter 7, step 4
#
# The chapter's 2x2 tables were lost from the text. These reconstructions hold 100 pairs each and
# agree with every number the text prints. Labels: 0 = not relevant, 1 = relevant; rows = A.
#
# Worked example one: 85% raw agreement, kappa in the "substantial" band (0.61-0.80).
#                  B: not   B: relevant
#   A: not            45         10
#   A: relevant        5         40
#   p_o = (45 + 40) / 100 = 0.85
#   p_e = 0.55 * 0.50 + 0.45 * 0.50 = 0.50
#   kappa = (0.85 - 0.50) / (1 - 0.50) = 0.70
EXAMPLE_ONE = [[45, 10], [5, 40]]
#
# Worked example two, "the trap": 95% raw agreement, kappa 0.52, almost nothing relevant.
#                  B: not   B: relevant
#   A: not            92          3
#   A: relevant        2          3
#   p_o = (92 + 3) / 100 = 0.95   (92 of the 95 agreements are two people saying "no")
#   p_e = 0.95 * 0.94 + 0.05 * 0.06 = 0.896
#   kappa = (0.95 - 0.896) / (1 - 0.896) = 0.519... = 0.52
EXAMPLE_TWO = [[92, 3], [2, 3]]
#
# The step's opening remark: two annotators who both say "not relevant" 90% of the time agree
# 82% of the time by pure chance (0.9 * 0.9 + 0.1 * 0.1). Labelling independently:
CHANCE_ONLY = [[81, 9], [9, 1]]


def test_it_reproduces_worked_example_one() -> None:
    a, b = from_table(EXAMPLE_ONE)
    kappa = cohen_kappa(a, b)
    assert (round(kappa.observed, 2), round(kappa.expected, 2)) == (0.85, 0.50)
    assert round(kappa.kappa, 2) == 0.70
    assert landis_koch(kappa.kappa) == "substantial"


def test_it_reproduces_the_trap_of_worked_example_two() -> None:
    a, b = from_table(EXAMPLE_TWO)
    kappa = cohen_kappa(a, b)
    assert round(kappa.observed, 2) == 0.95
    assert round(kappa.expected, 3) == 0.896
    assert round(kappa.kappa, 2) == 0.52
    # "worse than the pair who agreed only 85% of the time"
    assert kappa.kappa < cohen_kappa(*from_table(EXAMPLE_ONE)).kappa


def test_it_flags_the_trap_in_the_report_and_not_the_honest_pair() -> None:
    trap = agreement_report(*judges(EXAMPLE_TWO), bootstrap=0)
    honest = agreement_report(*judges(EXAMPLE_ONE), bootstrap=0)
    assert TRAP_SENTENCE in trap.notes
    assert not any(TRAP_SENTENCE in note for note in honest.notes)
    assert (trap.band, honest.band) == ("moderate", "substantial")


def test_it_gives_82_percent_chance_agreement_and_kappa_0_at_chance_level() -> None:
    kappa = cohen_kappa(*from_table(CHANCE_ONLY))
    assert round(kappa.expected, 2) == 0.82
    assert abs(kappa.kappa) < TOL


def test_it_gives_1_for_perfect_agreement_and_negative_for_systematic_disagreement() -> None:
    assert cohen_kappa(*from_table([[50, 0], [0, 50]])).kappa == 1.0
    assert cohen_kappa(*from_table([[0, 50], [50, 0]])).kappa == -1.0


# --------------------------------------------------------------------------- reference parity


def test_it_matches_sklearn_on_a_small_graded_example() -> None:
    a = np.array([0, 0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3, 0, 0])
    b = np.array([0, 1, 1, 2, 2, 3, 3, 3, 0, 0, 1, 2, 0, 3])
    for weights in (None, "linear", "quadratic"):
        assert same(cohen_kappa(a, b, weights=weights).kappa, sklearn_kappa(a, b, weights))
    assert same(binary_kappa(a, b, threshold=2).kappa, sklearn_kappa(a >= 2, b >= 2))


def test_it_matches_the_krippendorff_package_with_missing_labels() -> None:
    # The package's own doctest data (Krippendorff's example), as units x raters.
    nan = np.nan
    data = np.array(
        [
            [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
            [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
            [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
        ]
    ).T
    assert round(krippendorff_alpha(data, "nominal"), 6) == 0.691358
    assert round(krippendorff_alpha(data, "interval"), 6) == 0.810845
    for level in LEVELS:
        assert same(krippendorff_alpha(data, level), package_alpha(data, level))


def assert_parity(a_qrels: Qrels, b_qrels: Qrels) -> None:
    """Every kappa and alpha of the report against scikit-learn and the krippendorff package."""
    paired = align_qrels(a_qrels, b_qrels)
    a, b = paired.a, paired.b
    report = agreement_report(a_qrels, b_qrels, bootstrap=0)
    assert report.n == paired.n > 0
    assert same(report.unweighted.kappa, sklearn_kappa(a, b))
    assert same(report.linear.kappa, sklearn_kappa(a, b, "linear"))
    assert same(report.quadratic.kappa, sklearn_kappa(a, b, "quadratic"))
    assert same(report.binary.kappa, sklearn_kappa(a >= 1, b >= 1))
    units = np.column_stack([a, b]).astype(float)
    for level in LEVELS:
        reference = package_alpha(units, level)
        assert same(getattr(report, f"alpha_{level}"), reference), level
        assert same(krippendorff_alpha(units, level), reference), level


def data_cases() -> list[object]:
    """(A, B) qrels files of real judges who labelled the same pairs; see SOURCES.md."""
    if not DATA.exists():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=NO_DATA), id="no-data")]
    nist = {
        year: DATA / f"trec-dl-{year}-passage" / f"qrels.dl{year % 100}-passage.txt"
        for year in (2019, 2020, 2021)
    }
    umbrela = DATA / "llm-qrels" / "umbrela-gpt4o-arabzad"
    cases = [
        (nist[2020], umbrela / "umbrela_gpt-4o_graded_dl20.txt"),
        (nist[2021], umbrela / "umbrela_gpt-4o_graded_dl21.txt"),
        *((nist[2020], path) for path in sorted((umbrela / "other-prompts").glob("*.txt"))),
    ]
    llmjudge = DATA / "llmjudge"
    humans = llmjudge / "llmjudge_test_qrel_idx.txt"
    scores = sorted((llmjudge / "submissions" / "scores").glob("*.txt"))
    cases += [(humans, path) for path in scores]
    reannotation = DATA / "dl19-human-reannotation"
    for round_ in ("pilot-round-01", "agreement-round", "main"):
        judges = sorted((reannotation / round_ / "qrels").glob("*.txt"))
        cases += [(nist[2019], judge) for judge in judges]
        cases += list(itertools.combinations(judges, 2))
    return [
        pytest.param(a, b, marks=pytest.mark.data, id=f"{name(a)}-vs-{name(b)}") for a, b in cases
    ]


def name(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}" if path.parent.name == "qrels" else path.stem


@pytest.mark.parametrize(("a_path", "b_path"), data_cases())
def test_it_matches_the_reference_libraries_on_real_judgments(a_path: Path, b_path: Path) -> None:
    # Every LLM label file in the data set parses with read_qrels (TREC "qid 0 docid grade"),
    # so no special loader is needed; two LLMJudge submissions use grades outside 0-3
    # (RMITIR-llama70B has 5, h2oloo-zeroshot2 has 10), which the label-set union keeps.
    a_qrels, b_qrels = read_qrels(a_path), read_qrels(b_path)
    if align_qrels(a_qrels, b_qrels).n:
        assert_parity(a_qrels, b_qrels)
    else:  # some main-round pairings of judges never saw the same pair
        with pytest.raises(ValueError, match="no \\(qid, docid\\) pair is judged in both"):
            agreement_report(a_qrels, b_qrels)


@needs_data
@pytest.mark.data
@pytest.mark.parametrize("round_", ["pilot-round-01", "agreement-round", "main"])
def test_it_matches_the_package_for_many_raters_with_missing_labels(round_: str) -> None:
    # Units x raters over the union of pairs; in the main round each pair has about two of the
    # eight judges, so most cells are missing. NIST joins as one more rater.
    judges = sorted((DATA / "dl19-human-reannotation" / round_ / "qrels").glob("*.txt"))
    nist = read_qrels(DATA / "trec-dl-2019-passage" / "qrels.dl19-passage.txt")
    reannotated = [read_qrels(path) for path in judges]
    pairs = {(qid, docid) for qrels in reannotated for qid, docs in qrels.items() for docid in docs}
    nist_on_pairs: Qrels = {}
    for qid, docid in pairs:
        if docid in nist.get(qid, {}):
            nist_on_pairs.setdefault(qid, {})[docid] = nist[qid][docid]
    matrix = rating_matrix([*reannotated, nist_on_pairs])
    assert matrix.shape == (len(pairs), len(judges) + 1)
    for level in LEVELS:
        assert same(krippendorff_alpha(matrix, level), package_alpha(matrix, level)), level


@needs_data
@pytest.mark.data
def test_it_matches_the_package_across_all_llmjudge_submissions() -> None:
    llmjudge = DATA / "llmjudge"
    raters = [read_qrels(llmjudge / "llmjudge_test_qrel_idx.txt")]
    raters += [read_qrels(p) for p in sorted((llmjudge / "submissions" / "scores").glob("*.txt"))]
    matrix = rating_matrix(raters)
    assert not np.isnan(matrix).any()  # every submission labelled every test pair
    for level in LEVELS:
        assert same(krippendorff_alpha(matrix, level), package_alpha(matrix, level)), level


@needs_data
@pytest.mark.data
@pytest.mark.parametrize("year", [2019, 2020, 2021, 2023])
def test_it_refuses_syndl_against_nist_because_they_share_no_pair(year: int) -> None:
    # SynDL's GPT-4 labels cover only the queries NIST did not judge (SOURCES.md): the pairing
    # is empty, and the report says so instead of printing numbers about nothing.
    syndl = read_qrels(DATA / "llm-qrels" / "syndl-gpt4" / f"gpt4_judgments_dl{year}_processed.txt")
    nist = read_qrels(DATA / f"trec-dl-{year}-passage" / f"qrels.dl{year % 100}-passage.txt")
    paired = align_qrels(syndl, nist)
    assert paired.n == 0
    assert paired.only_b == sum(len(docs) for docs in nist.values())
    with pytest.raises(ValueError, match="no \\(qid, docid\\) pair is judged in both"):
        agreement_report(syndl, nist)


@needs_data
@pytest.mark.data
def test_it_cannot_read_the_unlabelled_llmjudge_pair_list() -> None:
    # llm4eval_test_qrel_2024.txt lists the test pairs without grades ("qidx 0 pidx"): not a
    # label set, and read_qrels says where it stops making sense.
    path = DATA / "llmjudge" / "llm4eval_test_qrel_2024.txt"
    with pytest.raises(FormatError, match=":2: grade 'p11027' is not an integer"):
        read_qrels(path)


# --------------------------------------------------------------------------- properties

grades = st.integers(min_value=0, max_value=3)


@st.composite
def two_judges(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(min_value=1, max_value=60))
    a = draw(st.lists(grades, min_size=n, max_size=n))
    b = draw(st.lists(grades, min_size=n, max_size=n))
    return np.array(a), np.array(b)


@given(st.lists(grades, min_size=1, max_size=60))
def test_it_gives_1_for_identical_labels_unless_undefined(labels: list[int]) -> None:
    a = np.array(labels)
    for weights in (None, "linear", "quadratic"):
        kappa = cohen_kappa(a, a, weights=weights).kappa
        if len(set(labels)) > 1:  # p_e < 1
            assert kappa == pytest.approx(1.0, abs=TOL)
        else:  # one grade for everything: p_e == 1 and kappa is undefined
            assert np.isnan(kappa)


@given(two_judges())
def test_it_is_symmetric_in_a_and_b(judges: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = judges
    for weights in (None, "linear", "quadratic"):
        assert same(
            cohen_kappa(a, b, weights=weights).kappa, cohen_kappa(b, a, weights=weights).kappa
        )


@given(two_judges())
def test_it_builds_a_confusion_matrix_that_sums_to_n(judges: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = judges
    confusion = confusion_matrix(a, b)
    labels = label_set(a, b)
    assert confusion.sum() == len(a)
    assert confusion.sum(axis=1).tolist() == [int((a == g).sum()) for g in labels]  # rows are A
    assert confusion.sum(axis=0).tolist() == [int((b == g).sum()) for g in labels]


@given(two_judges())
def test_it_agrees_with_sklearn_on_any_labels(judges: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = judges
    for weights in (None, "linear", "quadratic"):
        assert same(cohen_kappa(a, b, weights=weights).kappa, sklearn_kappa(a, b, weights))


@given(
    st.lists(
        st.lists(st.one_of(st.none(), grades), min_size=2, max_size=5), min_size=1, max_size=30
    ).filter(lambda rows: len({len(r) for r in rows}) == 1)
)
def test_it_agrees_with_the_krippendorff_package_on_any_ratings(
    rows: list[list[int | None]],
) -> None:
    matrix = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)
    if not ((~np.isnan(matrix)).sum(axis=1) >= 2).any():
        # Nothing can be paired: the package refuses too, each in its own words.
        with pytest.raises(ValueError, match="no unit has labels from two raters"):
            krippendorff_alpha(matrix)
        return
    for level in LEVELS:
        assert same(krippendorff_alpha(matrix, level), package_alpha(matrix, level))


# --------------------------------------------------------------------------- degenerate input


def test_it_returns_nan_when_both_judges_give_one_grade_to_everything() -> None:
    a = b = np.zeros(10, dtype=int)
    kappa = cohen_kappa(a, b)
    assert np.isnan(kappa.kappa) and kappa.expected == 1.0 and kappa.observed == 1.0
    assert np.isnan(sklearn_kappa(a, b))  # the reference agrees it is undefined
    report = agreement_report(as_qrels(a), as_qrels(b), bootstrap=50)
    as_json = report.as_dict()
    assert as_json["kappa"] is None and as_json["kappa_binary"] is None
    assert as_json["ci"]["kappa"] is None
    assert as_json["band"] == "undefined"
    assert any("p_e = 1" in note for note in report.notes)


def test_it_gives_kappa_0_not_nan_when_each_judge_is_constant_but_they_differ() -> None:
    a, b = np.zeros(10, dtype=int), np.ones(10, dtype=int)
    assert cohen_kappa(a, b).kappa == 0.0 == sklearn_kappa(a, b)


def test_it_refuses_empty_input_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="no pairs"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="no pairs"):
        kappa_from_confusion(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="one length"):
        cohen_kappa([0, 1], [0])
    with pytest.raises(ValueError, match="no \\(qid, docid\\) pair"):
        agreement_report({}, {"q": {"d": 1}})


def test_it_checks_a_given_label_set_and_weighs_by_its_positions() -> None:
    a, b = np.array([0, 1, 3, 3, 0]), np.array([0, 3, 3, 1, 1])
    with pytest.raises(ValueError, match="label 3 is used but not in labels"):
        cohen_kappa(a, b, labels=[0, 1, 2])
    # Grade 2 unused: in the union 1 and 3 are neighbours; on the 0..3 scale they are not.
    union = cohen_kappa(a, b, weights="linear")
    scale = cohen_kappa(a, b, weights="linear", labels=[0, 1, 2, 3])
    assert same(union.kappa, sklearn_kappa(a, b, "linear"))
    assert same(scale.kappa, float(cohen_kappa_score(a, b, weights="linear", labels=[0, 1, 2, 3])))
    assert union.kappa != scale.kappa
    assert cohen_kappa(a, b).kappa == cohen_kappa(a, b, labels=[0, 1, 2, 3]).kappa


@pytest.mark.parametrize(
    ("kappa", "band"),
    [
        (-0.01, "poor"),
        (0.0, "slight"),
        (0.20, "slight"),
        (0.21, "fair"),
        (0.40, "fair"),
        (0.41, "moderate"),
        (0.60, "moderate"),
        (0.61, "substantial"),
        (0.80, "substantial"),
        (0.81, "almost perfect"),
        (1.0, "almost perfect"),
        (float("nan"), "undefined"),
    ],
)
def test_it_names_the_landis_koch_band(kappa: float, band: str) -> None:
    assert landis_koch(kappa) == band


# --------------------------------------------------------------------------- pairing, leniency


def test_it_pairs_only_what_both_judged_in_a_order() -> None:
    a = {"q1": {"d1": 0, "d2": 1, "d3": 2}, "q2": {"d1": 3}}
    b = {"q1": {"d3": 1, "d1": 0, "d9": 2}, "q3": {"d1": 3}}
    paired = align_qrels(a, b)
    assert paired.qids.tolist() == ["q1", "q1"]
    assert (paired.a.tolist(), paired.b.tolist()) == ([0, 2], [0, 1])
    assert (paired.only_a, paired.only_b, paired.n) == (2, 2, 2)


def test_it_builds_a_rating_matrix_with_nan_where_a_rater_is_silent() -> None:
    matrix = rating_matrix([{"q": {"a": 1, "b": 2}}, {"q": {"b": 3, "c": 0}}])
    expected = np.array([[1, np.nan], [2, 3], [np.nan, 0]])
    np.testing.assert_array_equal(matrix, expected)


def test_it_measures_leniency_and_per_grade_recall() -> None:
    a = np.array([0, 0, 1, 2, 3, 3])
    b = np.array([0, 1, 1, 3, 3, 2])
    confusion = confusion_matrix(a, b)
    lenient = leniency(confusion, [0, 1, 2, 3])
    assert (lenient.mean_a, lenient.mean_b) == (pytest.approx(9 / 6), pytest.approx(10 / 6))
    assert (lenient.a_higher, lenient.b_higher) == (pytest.approx(1 / 6), pytest.approx(2 / 6))
    recall = grade_recall(confusion, [0, 1, 2, 3])
    assert recall.b_matches_a == (0.5, 1.0, 0.0, 0.5)
    assert recall.a_matches_b == (1.0, 0.5, 0.0, 0.5)
    assert np.isnan(grade_recall([[1, 0], [0, 0]], [0, 1]).b_matches_a[1])  # grade never used


# --------------------------------------------------------------------------- bootstrap


def two_query_judges() -> tuple[Qrels, Qrels]:
    """Query x: 10 pairs, every one (0, 0); query y: 5 pairs, every one (1, 2)."""
    a = {"x": {f"d{i}": 0 for i in range(10)}, "y": {f"e{i}": 1 for i in range(5)}}
    b = {"x": {f"d{i}": 0 for i in range(10)}, "y": {f"e{i}": 2 for i in range(5)}}
    return a, b


def test_it_resamples_whole_queries() -> None:
    paired = align_qrels(*two_query_judges())
    confusions = bootstrap_confusions(paired, [0, 1, 2], resamples=500, unit="query", seed=1)
    assert confusions.shape == (500, 3, 3)
    drawn_x, drawn_y = confusions[:, 0, 0] / 10, confusions[:, 1, 2] / 5
    # Only whole queries move: cells are multiples of the query's size, two queries per draw.
    assert np.all(drawn_x == np.round(drawn_x)) and np.all(drawn_y == np.round(drawn_y))
    assert np.all(drawn_x + drawn_y == 2)
    assert confusions.sum() == confusions[:, 0, 0].sum() + confusions[:, 1, 2].sum()
    assert {0, 1, 2} <= set(drawn_x.tolist())


def test_it_resamples_pairs_keeping_n_and_the_shares_on_average() -> None:
    a, b = from_table([[40, 10, 0], [5, 30, 5], [0, 3, 7]])
    paired = align_qrels(as_qrels(a, queries=4), as_qrels(b, queries=4))
    confusions = bootstrap_confusions(paired, [0, 1, 2], resamples=4000, unit="pair", seed=2)
    assert np.all(confusions.sum(axis=(1, 2)) == 100)
    np.testing.assert_allclose(confusions.mean(axis=0), confusion_matrix(a, b), atol=0.5)


def test_it_computes_percentile_intervals_from_the_resampled_matrices() -> None:
    a, b = from_table([[40, 10, 2], [5, 30, 5], [1, 3, 4]])
    qa, qb = as_qrels(a, queries=12), as_qrels(b, queries=12)
    report = agreement_report(qa, qb, bootstrap=300, unit="query", seed=5)
    confusions = bootstrap_confusions(align_qrels(qa, qb), [0, 1, 2], resamples=300, seed=5)
    kappas: tuple[tuple[str, Weighting], ...] = (("kappa", None), ("kappa_quadratic", "quadratic"))
    for name, weights in kappas:
        one_by_one = [kappa_from_confusion(c, weights).kappa for c in confusions]
        assert report.ci[name] == pytest.approx(tuple(np.quantile(one_by_one, [0.025, 0.975])))
    alphas = [
        krippendorff_alpha(np.column_stack(from_table(c.astype(int).tolist()))) for c in confusions
    ]
    assert report.ci["alpha_ordinal"] == pytest.approx(tuple(np.quantile(alphas, [0.025, 0.975])))


def test_it_is_reproducible_with_a_seed() -> None:
    qa, qb = judges([[20, 5], [4, 11]], queries=7)
    first = agreement_report(qa, qb, bootstrap=200, seed=9).as_dict()
    assert agreement_report(qa, qb, bootstrap=200, seed=9).as_dict() == first
    assert agreement_report(qa, qb, bootstrap=200, seed=10).as_dict()["ci"] != first["ci"]


def test_it_warns_when_there_are_too_few_queries_to_resample() -> None:
    report = agreement_report(*judges(EXAMPLE_ONE), bootstrap=100)
    assert "only 1 query(s) to resample: the intervals are coarse" in report.notes
    assert report.ci["kappa"] == (report.unweighted.kappa, report.unweighted.kappa)
