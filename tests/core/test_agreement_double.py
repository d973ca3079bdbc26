"""The pure core behind the agreement dashboard: which grades are compared, and that the
array entry points give exactly what `agreement_report` gives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from agreement import kappa
from agreement.charts import PlotInput, heatmap, kappa_plot
from agreement.double import (
    Answers,
    Filters,
    collect,
    every_two,
    headline,
    pair_names,
    people,
    person_pairs,
    ratings,
    resolution,
)
from agreement.kappa import Paired, align_qrels
from agreement.report import agreement_report, confusion_statistics, paired_report

T0 = datetime(2026, 11, 30, 9, tzinfo=UTC)  # a Monday


@dataclass(frozen=True)
class A:
    """An answer as `judging.answers.current_answers` gives it."""

    pair_id: int
    username: str
    grade: int | None
    minutes: float = 0.0
    kind: str = "grade"
    protocol: int | None = 1
    stratum: str = "head"
    seconds: float = 5.0

    @property
    def qid(self) -> str:
        return f"q{self.pair_id // 10}"

    @property
    def docid(self) -> str:
        return f"d{self.pair_id}"

    @property
    def at(self) -> float:
        return (T0 + timedelta(minutes=self.minutes)).timestamp()


def rows(compared: object) -> list[tuple[str, str, int, int]]:
    """(A's name, B's name, A's grade, B's grade) of each comparison."""
    a = compared.answers  # type: ignore[attr-defined]
    return [
        (a.users[a.user[x]], a.users[a.user[y]], int(a.grade[x]), int(a.grade[y]))
        for x, y in zip(compared.x, compared.y, strict=True)  # type: ignore[attr-defined]
    ]


def test_it_compares_the_first_two_graders_by_time_not_by_storage_order() -> None:
    answers = Answers.of(
        [A(1, "bob", 2, minutes=5), A(1, "alice", 1, minutes=1), A(1, "carl", 3, minutes=9)]
    )
    judged = collect(answers, Filters())
    assert rows(headline(judged, Filters())) == [("alice", "bob", 1, 2)]
    assert sorted(rows(every_two(judged))) == [
        ("alice", "bob", 1, 2),
        ("alice", "carl", 1, 3),
        ("bob", "carl", 2, 3),
    ]
    assert judged.raters == ("alice", "bob", "carl")
    assert ratings(judged).tolist() == [[1.0, 2.0, 3.0]]


def test_it_leaves_out_pairs_with_one_grade_and_counts_unsure_and_skipped() -> None:
    answers = Answers.of(
        [
            A(1, "alice", 1),
            A(1, "bob", None, kind="unsure"),
            A(2, "alice", 0),
            A(2, "bob", 0, minutes=1),
            A(3, "carl", None, kind="skip"),
        ]
    )
    judged = collect(answers, Filters())
    assert rows(headline(judged, Filters())) == [("alice", "bob", 0, 0)]
    assert judged.unsure_or_skipped == 2
    both = Filters(a="alice", b="bob")
    assert collect(answers, both).unsure_or_skipped == 1  # carl's skip is not theirs


def test_it_compares_a_with_b_whoever_graded_first() -> None:
    answers = Answers.of(
        [
            A(1, "bob", 3, minutes=0),
            A(1, "alice", 2, minutes=1),
            A(2, "alice", 0),
            A(2, "carl", 0, minutes=1),
            A(3, "carl", 1),
            A(3, "bob", 1, minutes=1),
            A(3, "alice", 2, minutes=2),
        ]
    )
    people_filter = Filters(a="alice", b="bob")
    compared = headline(collect(answers, people_filter), people_filter)
    assert sorted(rows(compared)) == [("alice", "bob", 2, 1), ("alice", "bob", 2, 3)]


def test_it_forms_pairs_from_the_grades_made_under_the_protocol_version() -> None:
    answers = Answers.of(
        [
            A(1, "alice", 1, protocol=1),
            A(1, "bob", 2, minutes=1, protocol=2),
            A(1, "carl", 3, minutes=2, protocol=2),
            A(2, "alice", 0, protocol=1, stratum="tail"),
            A(2, "bob", 0, minutes=1, protocol=1, stratum="tail"),
        ]
    )
    assert answers.versions == (1, 2)
    under_two = Filters(protocol=2)
    assert rows(headline(collect(answers, under_two), under_two)) == [("bob", "carl", 2, 3)]
    under_one = Filters(protocol=1)
    assert rows(headline(collect(answers, under_one), under_one)) == [("alice", "bob", 0, 0)]
    tail = Filters(stratum="tail")
    assert rows(headline(collect(answers, tail), tail)) == [("alice", "bob", 0, 0)]
    assert collect(answers, Filters(stratum="nowhere")).rows.size == 0


def test_it_groups_comparisons_by_the_iso_week_of_the_later_grade() -> None:
    # 2026-12-31 is in ISO week 2026-W53; 2027-01-04 starts 2027-W01.
    new_year = datetime(2026, 12, 31, 23, tzinfo=UTC) - T0
    late = new_year.total_seconds() / 60
    answers = Answers.of(
        [
            A(1, "alice", 1, minutes=0),
            A(1, "bob", 1, minutes=late),
            A(2, "alice", 1, minutes=late),
            A(2, "bob", 1, minutes=late + 5 * 24 * 60),
            A(3, "alice", 1),
            A(3, "bob", 1, minutes=1),
        ]
    )
    compared = headline(collect(answers, Filters()), Filters())
    weeks = {label: part.n for label, part in compared.by_week()}
    assert weeks == {"2026-W49": 1, "2026-W53": 1, "2027-W01": 1}
    for label, _ in compared.by_week():
        year, week = label.split("-W")
        assert datetime.fromisocalendar(int(year), int(week), 1)


def test_it_sums_each_person_against_the_others() -> None:
    answers = Answers.of(
        [
            A(1, "alice", 3, seconds=4),
            A(1, "bob", 1, minutes=1, seconds=8),
            A(1, "carl", 2, minutes=2),
            A(2, "alice", 2, seconds=6),
            A(2, "bob", 2, minutes=1),
            A(3, "alice", None, kind="unsure", seconds=100),
        ]
    )
    found = {
        person.username: person for person in people(collect(answers, Filters()), [0, 1, 2, 3])
    }
    alice = found["alice"]
    assert alice.pairs == 2 and alice.versus.n == 3  # pair 1 against bob and carl, pair 2 bob
    assert alice.leniency == pytest.approx(((3 - 1) + (3 - 2) + 0) / 3)
    assert alice.confusion[3][1] == 1 and alice.confusion[3][2] == 1 and alice.confusion[2][2] == 1
    assert alice.median_seconds == 6  # of 4, 6 and her unsure answer's 100
    _, keys = person_pairs(collect(answers, Filters()))
    names = sorted(pair_names(answers, k) for k in set(keys.tolist()))
    assert names == [("alice", "bob"), ("alice", "carl"), ("bob", "carl")]


def test_it_says_how_many_pairs_narrow_the_interval_to_a_tenth() -> None:
    found = resolution(100, (0.3, 0.6))
    assert found is not None
    assert (found.half_width, found.needed, found.more) == (pytest.approx(0.15), 225, 125)
    assert not found.sharp_enough
    sharp = resolution(400, (0.45, 0.61))
    assert sharp is not None and sharp.sharp_enough and sharp.more == 0
    assert resolution(10, None) is None


qrels_pairs = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=60
)


@settings(max_examples=40, deadline=None)
@given(qrels_pairs, st.integers(0, 2**31))
def test_paired_report_is_agreement_report_on_codes_that_sort_as_the_qids(cases, seed) -> None:
    a: dict[str, dict[str, int]] = {}
    b: dict[str, dict[str, int]] = {}
    for n, (q, ga, gb) in enumerate(cases):
        a.setdefault(f"q{q:02d}", {})[f"d{n}"] = ga
        b.setdefault(f"q{q:02d}", {})[f"d{n}"] = gb
    expected = agreement_report(a, b, bootstrap=50, seed=seed, labels=(0, 1, 2, 3)).as_dict()
    aligned = align_qrels(a, b)
    _, codes = np.unique(aligned.qids, return_inverse=True)
    order = np.random.default_rng(seed).permutation(aligned.n)  # any order of the pairs
    paired = Paired(codes[order], aligned.a[order], aligned.b[order], 0, 0)
    assert paired_report(paired, bootstrap=50, seed=seed, labels=(0, 1, 2, 3)).as_dict() == expected
    only_kappa = paired_report(
        paired, bootstrap=50, seed=seed, labels=(0, 1, 2, 3), intervals=("kappa",)
    )
    assert only_kappa.ci["kappa"] == pytest.approx(expected["ci"]["kappa"])
    assert only_kappa.ci["alpha_ordinal"] is None
    tables = [kappa.confusion_matrix(aligned.a, aligned.b, [0, 1, 2, 3])]
    stacked = confusion_statistics(tables, [0, 1, 2, 3], wanted=("kappa", "kappa_binary"))
    for name in ("kappa", "kappa_binary"):  # as_dict writes an undefined kappa as None
        value = float("nan") if expected[name] is None else expected[name]
        assert stacked[name][0] == pytest.approx(value, nan_ok=True)
    if expected["kappa"] is not None:
        assert stacked["kappa"][0] == pytest.approx(
            cohen_kappa_score(aligned.a, aligned.b, labels=[0, 1, 2, 3])
        )


def test_the_query_bootstrap_draws_the_same_in_any_chunks(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    paired = Paired(
        rng.integers(0, 40, 500), rng.integers(0, 4, 500), rng.integers(0, 4, 500), 0, 0
    )
    whole = kappa.bootstrap_confusions(paired, [0, 1, 2, 3], resamples=300, seed=4)
    monkeypatch.setattr(kappa, "_MAX_DRAWS", 97)  # chunks of 2 resamples
    assert np.array_equal(
        kappa.bootstrap_confusions(paired, [0, 1, 2, 3], resamples=300, seed=4), whole
    )


def test_the_heatmap_colours_by_share_and_the_plot_marks_zero_and_the_threshold() -> None:
    heat = heatmap([[6, 2], [0, 2]], [0, 1])
    cells = {(c.row, c.column): c for c in heat.cells}
    assert heat.total == 10 and cells[(0, 0)].share == pytest.approx(0.6)
    assert cells[(0, 0)].opacity == 1.0 and cells[(1, 0)].opacity == 0.0
    assert cells[(0, 0)].on_diagonal and cells[(0, 0)].dark and not cells[(1, 1)].dark
    plot = kappa_plot(
        [
            PlotInput("overall", "all", 0.5, (0.3, 0.7), 10),
            PlotInput("week", "W1", float("nan"), None, 2),
        ],
        threshold=0.4,
    )
    assert plot.left == plot.zero < plot.threshold_x < plot.right
    first = plot.rows[0]
    assert first.lo is not None and first.x is not None and first.hi is not None
    assert first.lo < first.x < first.hi
    assert plot.rows[1].x is None and plot.rows[1].first_of_group
    assert plot.ticks[0][1] == "0.0" and plot.ticks[-1][1] == "1.0"
    low = kappa_plot([PlotInput("overall", "all", -0.3, (-0.45, -0.1), 10)], threshold=0.4)
    assert low.ticks[0][1] == "-0.6" and low.zero > low.left
