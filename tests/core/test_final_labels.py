"""Final labels and the adjudication queue's order, from plain records (no database)."""

from __future__ import annotations

import pytest

from agreement.labels import (
    POLICIES,
    PairGrades,
    Provenance,
    disagreements,
    final_label,
    final_labels,
    policy_of,
)
from annotation.protocol import excerpt

PAIRS = [
    PairGrades(1, "q1", "d1", (2,), None),  # single
    PairGrades(2, "q1", "d2", (1, 1), None),  # agreed
    PairGrades(3, "q1", "d3", (0, 3), None),  # unresolved
    PairGrades(4, "q2", "d1", (0, 3), 2),  # adjudicated over a disagreement
    PairGrades(5, "q2", "d2", (3, 3), 0),  # adjudicated over an agreement: the lead wins
    PairGrades(6, "q2", "d3", (), 1),  # adjudicated, every judge undid since
    PairGrades(7, "q2", "d4", (), None),  # nothing labels it
]


def test_it_labels_every_provenance() -> None:
    labels = {label.pair_id: label for label in final_labels(PAIRS).labels}
    assert {k: (v.grade, v.provenance) for k, v in labels.items()} == {
        1: (2, Provenance.SINGLE),
        2: (1, Provenance.AGREED),
        3: (0, Provenance.UNRESOLVED),
        4: (2, Provenance.ADJUDICATED),
        5: (0, Provenance.ADJUDICATED),
        6: (1, Provenance.ADJUDICATED),
    }


@pytest.mark.parametrize(
    ("policy", "grade", "written"), [("lower", 0, 6), ("higher", 3, 6), ("exclude", None, 5)]
)
def test_it_writes_unresolved_pairs_by_the_policy(
    policy: str, grade: int | None, written: int
) -> None:
    labels = final_labels(PAIRS, policy_of(policy))
    unresolved = next(x for x in labels.labels if x.pair_id == 3)
    assert unresolved.grade == grade and unresolved.provenance is Provenance.UNRESOLVED
    assert labels.counts.written == written == len(labels.qrels())
    assert ("q1", "d3", grade) in labels.qrels() or grade is None


def test_it_counts_per_provenance_and_says_how_unresolved_pairs_were_written() -> None:
    counts = final_labels(PAIRS, "exclude").counts
    assert (counts.pairs, counts.adjudicated, counts.agreed, counts.single) == (6, 3, 1, 1)
    assert (counts.unresolved, counts.written, counts.policy) == (1, 5, "exclude")
    assert counts.summary() == (
        "6 pairs: 3 adjudicated, 1 agreed, 1 single judge, 1 unresolved "
        "(left out: --unresolved exclude); 5 written"
    )
    lower = final_labels(PAIRS).counts.summary()
    assert "(written with the lowest grade given: --unresolved lower); 6 written" in lower


def test_it_defaults_to_the_lower_grade_and_refuses_an_unknown_policy() -> None:
    assert final_label(PAIRS[2]) == final_label(PAIRS[2], "lower")
    assert POLICIES == ("exclude", "lower", "higher")
    with pytest.raises(ValueError, match="exclude, lower, higher"):
        policy_of("first")


def test_it_sorts_the_qrels_by_query_then_document() -> None:
    shuffled = [PAIRS[4], PAIRS[0], PAIRS[2], PAIRS[1]]
    assert [(q, d) for q, d, _ in final_labels(shuffled).qrels()] == [
        ("q1", "d1"),
        ("q1", "d2"),
        ("q1", "d3"),
        ("q2", "d2"),
    ]


def test_it_queues_the_widest_disagreement_first_then_the_best_ranked() -> None:
    pairs = [
        PairGrades(10, "q1", "a", (2, 1)),  # distance 1, rank 1
        PairGrades(11, "q1", "b", (1, 2)),  # distance 1, rank 5
        PairGrades(12, "q1", "c", (3, 0)),  # distance 3, rank 9
        PairGrades(13, "q1", "d", (0, 2, 2)),  # distance 2, no pool holds it
        PairGrades(14, "q1", "e", (0, 2)),  # distance 2, rank 4
        PairGrades(15, "q1", "f", (0, 3), 3),  # adjudicated: not queued
        PairGrades(16, "q1", "g", (2, 2)),  # agreed: not queued
    ]
    queue = disagreements(pairs, {10: 1, 11: 5, 12: 9, 14: 4, 15: 1, 16: 1})
    assert [d.pair_id for d in queue] == [12, 14, 13, 10, 11]
    assert [d.distance for d in queue] == [3, 2, 2, 1, 1]
    assert queue[0].grades == (0, 3) and queue[2].best_rank is None


def test_an_excerpt_is_one_line_cut_at_a_word() -> None:
    assert excerpt("  Reset\n\nyour   password  ") == "Reset your password"
    cut = excerpt("word " * 100, limit=22)
    assert cut == "word word word word…"
