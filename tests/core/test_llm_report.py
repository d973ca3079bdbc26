"""A stored calibration report read for its page: failed conditions named with what to do, a
missing figure read as "not measured", the kappa rows to plot."""

from __future__ import annotations

import math

import pytest

from evaluation.llm_report import number, report_view

REPORT = {
    "n": 124,
    "kappa": 0.41,
    "human_kappa": 0.62,
    "passed": False,
    "reasons": ["ceiling", "leniency"],
    "ci": {"kappa": [0.3, 0.5], "human_kappa": [0.5, 0.7]},
    "per_human": {"alice": {"kappa": 0.45, "n": 124}, "bob": {"kappa": 0.38, "n": 124}},
    "confusion": [[5, 1, 0, 0], [1, 5, 1, 0], [0, 2, 4, 1], [0, 0, 1, 3]],
    "labels": [0, 1, 2, 3],
    "leniency": {"mean_diff": 0.35, "positive_rate_ratio": 1.6},
    "per_grade_recall": {"0": 0.8, "1": 0.6},
    "recall": 0.55,
    "threshold": 2,
    "retest": 0.8,
    "retest_n": 50,
    "tau": None,
    "thresholds": {"kappa_floor": 0.3, "ceiling_margin": 0.05},
    "conditions": [
        {"code": "too_few", "label": "at least 100 pairs", "value": 124, "bound": ">= 100",
         "passed": True, "measured": True},
        {"code": "ceiling", "label": "κ ≥ humans' κ − 0.05", "value": 0.41, "bound": ">= 0.570",
         "passed": False, "measured": True},
        {"code": "floor", "label": "κ ≥ 0.30", "value": 0.41, "bound": ">= 0.30",
         "passed": True, "measured": True},
        {"code": "ranking", "label": "τ ≥ 0.8", "value": None, "bound": ">= 0.8",
         "passed": True, "measured": False},
    ],
}  # fmt: skip


def test_it_names_the_failed_conditions_with_what_to_do() -> None:
    view = report_view(REPORT)
    assert not view.passed and [c.code for c in view.failed] == ["ceiling"]
    assert view.failed[0].advice.startswith("The judge agrees with a person less well")
    ranking = view.conditions[-1]
    assert (ranking.value, ranking.measured) == ("not measured", False)
    assert view.tau == "not measured"
    assert view.recall[0].name == "the relevant class (grade ≥ 2)"
    assert view.retest[0].name == "κ of the same 50 pairs asked twice"


def test_it_plots_the_judge_each_person_and_the_ceiling() -> None:
    view = report_view(REPORT)
    labels = [row.label for row in view.plot_rows]
    assert labels == ["vs humans", "vs alice", "vs bob", "ceiling: each other"]
    assert view.plot_rows[0].ci == (0.3, 0.5) and view.bar == pytest.approx(0.57)
    assert view.confusion == REPORT["confusion"]


def test_it_counts_a_condition_it_could_not_measure_as_failed() -> None:
    unknown = {"code": "ceiling", "label": "humans' kappa unknown", "value": None,
               "bound": "humans' kappa unknown", "passed": False, "measured": False}  # fmt: skip
    view = report_view(REPORT | {"conditions": [unknown], "human_kappa": None})
    assert [c.code for c in view.failed] == ["ceiling"] and view.failed[0].value == "not measured"
    assert view.bar == 0.3  # the floor alone


def test_it_reads_an_old_or_partial_report() -> None:
    view = report_view({"passed": False, "reasons": ["too_few"], "confusion": [[1]]})
    assert [c.code for c in view.failed] == ["too_few"] and view.confusion is None
    assert math.isnan(view.plot_rows[0].kappa) and view.bar is None
    assert number(float("nan")) == "not measured" and number([0.1, 0.25]) == "[0.100, 0.250]"
