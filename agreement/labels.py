"""Final labels: one grade per pair out of everything said about it. Pure core, no Django.

Provenance, strongest first:

- ``adjudicated``: a lead's latest adjudication of the pair stands, whatever the judges said;
- ``agreed``: two or more judges' current grades, all equal;
- ``single``: one judge's current grade;
- ``unresolved``: the judges' current grades differ and no lead has adjudicated the pair.

Only grades count: an unsure or skipped answer, or an undone one, labels nothing (see
``judging.answers``), so a pair graded by one judge and marked unsure by another is ``single``.

An unresolved pair is written by a policy: ``lower`` (the default) takes the lowest grade any
judge gave, ``higher`` the highest, ``exclude`` leaves the pair out of the qrels. ``lower`` is
the default because it claims no more relevance than every judge saw — a document counts only
as relevant as all of them found it — and the pair stays judged. An excluded pair becomes a
hole: nDCG and the other measures score a hole as not relevant (grade 0, below what every judge
said whenever the lowest grade is above 0), and `judged@k` counts it as unjudged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, cast

Policy = Literal["exclude", "lower", "higher"]
POLICIES: tuple[Policy, ...] = ("exclude", "lower", "higher")
DEFAULT_POLICY: Policy = "lower"

_WRITTEN_AS = {
    "exclude": "left out",
    "lower": "written with the lowest grade given",
    "higher": "written with the highest grade given",
}


class Provenance(StrEnum):
    ADJUDICATED = "adjudicated"
    AGREED = "agreed"
    SINGLE = "single"
    UNRESOLVED = "unresolved"


def policy_of(text: str) -> Policy:
    """The policy named by ``text``; ValueError naming the choices otherwise."""
    if text not in POLICIES:
        raise ValueError(f"unresolved must be one of {', '.join(POLICIES)}, not {text!r}")
    return cast(Policy, text)


@dataclass(frozen=True)
class PairGrades:
    """What is known of one pair: its judges' current grades and the latest adjudication."""

    pair_id: int
    qid: str
    docid: str
    grades: tuple[int, ...] = ()
    adjudicated: int | None = None


@dataclass(frozen=True)
class FinalLabel:
    pair_id: int
    qid: str
    docid: str
    grade: int | None  # None: not written (an unresolved pair under ``exclude``)
    provenance: Provenance


@dataclass(frozen=True)
class LabelCounts:
    pairs: int
    adjudicated: int
    agreed: int
    single: int
    unresolved: int
    written: int
    policy: Policy

    def summary(self) -> str:
        """One line for a person: the counts, and what became of the unresolved pairs."""
        line = (
            f"{self.pairs} pairs: {self.adjudicated} adjudicated, {self.agreed} agreed, "
            f"{self.single} single judge, {self.unresolved} unresolved"
        )
        if self.unresolved:
            line += f" ({_WRITTEN_AS[self.policy]}: --unresolved {self.policy})"
        return f"{line}; {self.written} written"


@dataclass(frozen=True)
class FinalLabels:
    labels: tuple[FinalLabel, ...]  # every pair, by (qid, docid)
    counts: LabelCounts

    def qrels(self) -> list[tuple[str, str, int]]:
        """(qid, docid, grade) of every pair written, in order."""
        return [(x.qid, x.docid, x.grade) for x in self.labels if x.grade is not None]


def provenance_of(pair: PairGrades) -> Provenance | None:
    """Where the pair's final grade comes from; None when nothing labels it."""
    if pair.adjudicated is not None:
        return Provenance.ADJUDICATED
    if not pair.grades:
        return None
    if len(pair.grades) == 1:
        return Provenance.SINGLE
    return Provenance.AGREED if len(set(pair.grades)) == 1 else Provenance.UNRESOLVED


def final_label(pair: PairGrades, policy: Policy = DEFAULT_POLICY) -> FinalLabel | None:
    provenance = provenance_of(pair)
    if provenance is None:
        return None
    grade: int | None
    if provenance is Provenance.ADJUDICATED:
        grade = pair.adjudicated
    elif provenance is Provenance.UNRESOLVED:
        grade = {"exclude": None, "lower": min(pair.grades), "higher": max(pair.grades)}[policy]
    else:
        grade = pair.grades[0]
    return FinalLabel(pair.pair_id, pair.qid, pair.docid, grade, provenance)


def final_labels(pairs: Iterable[PairGrades], policy: Policy = DEFAULT_POLICY) -> FinalLabels:
    """Every labelled pair's final label, by (qid, docid), with the counts per provenance."""
    labels = sorted(
        (label for pair in pairs if (label := final_label(pair, policy)) is not None),
        key=lambda label: (label.qid, label.docid),
    )
    by = {p: sum(1 for label in labels if label.provenance is p) for p in Provenance}
    counts = LabelCounts(
        pairs=len(labels),
        adjudicated=by[Provenance.ADJUDICATED],
        agreed=by[Provenance.AGREED],
        single=by[Provenance.SINGLE],
        unresolved=by[Provenance.UNRESOLVED],
        written=sum(1 for label in labels if label.grade is not None),
        policy=policy,
    )
    return FinalLabels(tuple(labels), counts)


@dataclass(frozen=True)
class Disagreement:
    """An unresolved pair waiting for a lead: its judges' grades (ascending) and the best
    rank any pooled run gave it (None for a pair no pool selected)."""

    pair_id: int
    qid: str
    docid: str
    grades: tuple[int, ...]
    best_rank: int | None

    @property
    def distance(self) -> int:
        return self.grades[-1] - self.grades[0]


def disagreements(pairs: Iterable[PairGrades], best_ranks: Mapping[int, int]) -> list[Disagreement]:
    """The adjudication queue: unresolved pairs, the widest disagreement first (0 against 3
    before 1 against 2), then the pairs that matter most to the measures — ranked highest by
    some pooled run, where a wrong grade moves nDCG most — then by pair."""
    queue = [
        Disagreement(
            pair.pair_id,
            pair.qid,
            pair.docid,
            tuple(sorted(pair.grades)),
            best_ranks.get(pair.pair_id),
        )
        for pair in pairs
        if provenance_of(pair) is Provenance.UNRESOLVED
    ]
    never_pooled = float("inf")
    return sorted(
        queue,
        key=lambda d: (
            -d.distance,
            never_pooled if d.best_rank is None else d.best_rank,
            d.pair_id,
        ),
    )
