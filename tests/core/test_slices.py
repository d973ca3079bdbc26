"""Slices of a run's per-query values: per stratum, the Hájek mean, canary conditions; and
the corpus reader keeping BEIR metadata."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluation.slices import (
    Condition,
    parse_condition,
    slice_mean,
    stratum_means,
    weighted_mean,
)
from formats.beir import FormatError, iter_corpus

VALUES = {"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.25, "e": 1.0}


def test_it_orders_strata_as_sampled_then_others_then_none() -> None:
    strata = {"a": "tail", "b": "head", "c": "zeta", "d": "failures"}
    means = stratum_means(VALUES, strata)
    assert list(means) == ["head", "tail", "failures", "zeta", ""]
    assert means["head"].mean == 0.5 and means[""].n == 1


def test_it_takes_the_hajek_mean_and_counts_the_queries_without_pi() -> None:
    pi = {"a": 0.5, "b": 0.1, "c": 1.0, "d": 0.0, "e": float("nan")}
    result = weighted_mean(VALUES, pi)
    x, p = np.array([1.0, 0.5, 0.0]), np.array([0.5, 0.1, 1.0])
    assert result.mean == pytest.approx(np.sum(x / p) / np.sum(1 / p))
    assert (result.n, result.unweighted, result.estimator) == (3, 2, "Hájek")
    assert weighted_mean(VALUES, {}).mean is None


def test_it_weighs_by_traffic_with_frequencies() -> None:
    pi = {"a": 0.5, "b": 0.1, "c": 1.0, "d": 0.2}
    frequency = {"a": 10.0, "b": 1.0, "c": 30.0, "e": 5.0}  # d has none, e no pi
    result = weighted_mean(VALUES, pi, frequency)
    x, w = np.array([1.0, 0.5, 0.0]), np.array([10 / 0.5, 1 / 0.1, 30 / 1.0])
    assert result.mean == pytest.approx(np.average(x, weights=w))
    assert (result.n, result.unweighted) == (3, 2)
    # Drawn proportionally to frequency (pi = f / 100), each search weighs the same: the
    # traffic mean is the sample's plain mean.
    pps = {q: f / 100 for q, f in frequency.items()}
    plain = weighted_mean(VALUES, pps, frequency)
    assert plain.mean == pytest.approx(np.mean([1.0, 0.5, 0.0, 1.0]))


def test_it_gives_a_slice_mean_with_n_and_none_for_an_empty_slice() -> None:
    assert slice_mean(VALUES, {"a", "b", "zz"}).mean == 0.75
    assert slice_mean(VALUES, set()) == slice_mean(VALUES, {"zz"})
    assert slice_mean(VALUES, set()).n == 0 and slice_mean(VALUES, set()).mean is None


@pytest.mark.parametrize(
    ("text", "metadata", "expected"),
    [
        ("published >= 2024-01-01", {"published": "2024-01-01"}, True),
        ("published >= 2024-01-01", {"published": "2023-12-31T23:59"}, False),
        ("published<2024-01-01", {"published": "2023-12-31"}, True),
        ("year > 9", {"year": 10}, True),  # numbers as numbers, not "10" < "9"
        ("year != 2024", {"year": 2024.0}, False),
        ("open = true", {"open": True}, True),
        ("source = wiki", {"source": "wiki"}, True),
        ("source = wiki", {"source": None}, False),
        ("source = wiki", {}, False),
    ],
)
def test_it_compares_metadata_as_numbers_or_as_text(
    text: str, metadata: dict[str, object], expected: bool
) -> None:
    assert parse_condition(text).matches(metadata) is expected


def test_it_reads_conditions_and_refuses_what_it_cannot_read() -> None:
    assert parse_condition("  published <= 2024-06 ") == Condition("published", "<=", "2024-06")
    for bad in ("published", "published >=", ">= 3", ""):
        with pytest.raises(ValueError, match="key op value"):
            parse_condition(bad)


def test_it_keeps_beir_metadata_as_json_text(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    rows: list[dict[str, object]] = [
        {"_id": "d1", "text": "x", "metadata": {"published": "2024-01-02", "tags": ["a"]}},
        {"_id": "d2", "text": "y", "metadata": None},
        {"_id": "d3", "text": "z"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    docs = list(iter_corpus(path))
    assert json.loads(docs[0].metadata) == {"published": "2024-01-02", "tags": ["a"]}
    assert [d.metadata for d in docs[1:]] == ["{}", "{}"]


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [(["a"], "must be a JSON object"), ({"k": "a\u0000b"}, "NUL"), ({"a\u0000": 1}, "NUL")],
)
def test_it_refuses_metadata_that_cannot_be_stored(
    tmp_path: Path, metadata: object, reason: str
) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "d1", "text": "x", "metadata": metadata}) + "\n")
    with pytest.raises(FormatError, match=reason):
        list(iter_corpus(path))
