"""The double-judged pairs of a project, and the comparisons agreement is computed from.

Pure core: no Django. Current answers in (anything shaped like `judging.answers.CurrentAnswer`),
turned into columns once; numpy arrays and frozen records out. The statistics themselves are
`report.paired_report`'s (the engine of `agreement_report`).

Rules, stated once:

* Only current *grades* count. Unsure and skipped answers take no part in agreement, but are
  counted, so that a judge who avoids hard pairs is seen.
* A pair is double-judged when at least two people graded it. Its grades are in time order
  (when each person gave their current answer; answers of one instant keep their stored order).
* The headline comparison of a pair is its first grader against its second; a pair with three
  or more graders adds its later graders to the matrix of people, the per-person table and the
  multi-rater alpha only. With the people filter (``a`` and ``b``) the comparison is A's grade
  against B's on every pair both graded, whoever came first.
* The protocol filter keeps only grades made under that version *before* pairs are formed:
  "double-judged under v2" means two people graded the pair under v2. The stratum filter keeps
  the pairs of that stratum.
* A comparison's week is the ISO week of its later grade: when the disagreement became visible.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .kappa import FloatArray, IntArray, Paired, Qrels

GRADE = "grade"
NOT_A_GRADE = ("unsure", "skip")
Bools = npt.NDArray[np.bool_]
_DAY = 86_400.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class AnswerLike(Protocol):
    """What this module reads of a current answer (`judging.answers.CurrentAnswer`)."""

    @property
    def pair_id(self) -> int: ...
    @property
    def qid(self) -> str: ...
    @property
    def docid(self) -> str: ...
    @property
    def stratum(self) -> str: ...
    @property
    def username(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def grade(self) -> int | None: ...
    @property
    def protocol(self) -> int | None: ...
    @property
    def at(self) -> float: ...
    @property
    def seconds(self) -> float: ...


@dataclass(frozen=True)
class Filters:
    """What the lead narrows the view to; None is "all"."""

    a: str | None = None
    b: str | None = None
    stratum: str | None = None
    protocol: int | None = None

    def __post_init__(self) -> None:
        if (self.a is None) != (self.b is None):
            raise ValueError("name both people, a and b, or neither")
        if self.a is not None and self.a == self.b:
            raise ValueError(f"a and b are both {self.a!r}: choose two different people")

    @property
    def people(self) -> tuple[str, str] | None:
        return (self.a, self.b) if self.a is not None and self.b is not None else None

    def as_params(self) -> dict[str, str]:
        """The filters as query parameters (those set)."""
        values = {"a": self.a, "b": self.b, "stratum": self.stratum, "protocol": self.protocol}
        return {name: str(value) for name, value in values.items() if value is not None}

    def without_people(self) -> Filters:
        return Filters(stratum=self.stratum, protocol=self.protocol)

    def under(self, version: int) -> Filters:
        return Filters(self.a, self.b, self.stratum, version)


# --------------------------------------------------------------------------- answers


def _codes(values: Sequence[str]) -> tuple[IntArray, tuple[str, ...]]:
    """Each value's position in the sorted distinct values, and those values. Codes sort as
    the strings do, which is what `Paired.qids` asks of query codes."""
    names = tuple(sorted(set(values)))
    index = {name: i for i, name in enumerate(names)}
    return np.fromiter(map(index.__getitem__, values), np.int64, len(values)), names


@dataclass(frozen=True, eq=False)
class Answers:
    """Everyone's current answers as columns, one row per answer. ``grade`` is -1 and
    ``protocol`` is -1 where there is none; ``at`` is POSIX seconds."""

    pair: IntArray
    qid: IntArray
    stratum: IntArray
    user: IntArray
    grade: IntArray
    protocol: IntArray
    at: FloatArray
    seconds: FloatArray
    graded: Bools
    not_graded: Bools
    qids: tuple[str, ...]
    strata: tuple[str, ...]
    users: tuple[str, ...]
    docids: tuple[str, ...]

    @classmethod
    def of(cls, answers: Sequence[AnswerLike]) -> Answers:
        n = len(answers)

        def column(name: str) -> list[Any]:
            return list(map(attrgetter(name), answers))

        qid, qids = _codes(column("qid"))
        stratum, strata = _codes(column("stratum"))
        user, users = _codes(column("username"))
        kinds = column("kind")
        grades = [-1 if grade is None else grade for grade in column("grade")]
        versions = [-1 if version is None else version for version in column("protocol")]
        return cls(
            pair=np.fromiter(column("pair_id"), np.int64, n),
            qid=qid,
            stratum=stratum,
            user=user,
            grade=np.fromiter(grades, np.int64, n),
            protocol=np.fromiter(versions, np.int64, n),
            at=np.fromiter(column("at"), np.float64, n),
            seconds=np.fromiter(column("seconds"), np.float64, n),
            graded=np.fromiter((kind == GRADE for kind in kinds), np.bool_, n),
            not_graded=np.fromiter((kind in NOT_A_GRADE for kind in kinds), np.bool_, n),
            qids=qids,
            strata=strata,
            users=users,
            docids=tuple(column("docid")),
        )

    @property
    def graders(self) -> tuple[str, ...]:
        """Everyone with a current grade, sorted."""
        return tuple(self.users[i] for i in np.unique(self.user[self.graded]))

    @property
    def versions(self) -> tuple[int, ...]:
        """The protocol versions grades were made under, ascending."""
        found = np.unique(self.protocol[self.graded])
        return tuple(int(v) for v in found if v >= 0)

    def user_code(self, name: str) -> int:
        return self.users.index(name) if name in self.users else -1

    def admitted(self, filters: Filters) -> Bools:
        """The answers the stratum and protocol filters keep."""
        keep = np.ones(len(self.pair), dtype=np.bool_)
        if filters.stratum is not None:
            code = self.strata.index(filters.stratum) if filters.stratum in self.strata else -1
            keep &= self.stratum == code
        if filters.protocol is not None:
            keep &= self.protocol == filters.protocol
        return keep


# --------------------------------------------------------------------------- pairs


@dataclass(frozen=True, eq=False)
class Judged:
    """The double-judged pairs in view: ``rows`` (answer rows) grouped by pair, each group in
    time order; pair g holds ``rows[start[g] : start[g] + size[g]]``, ``size >= 2``."""

    answers: Answers
    rows: IntArray
    start: IntArray
    size: IntArray
    in_view: Bools  # every answer (of any kind) the filters keep
    unsure_or_skipped: int

    @property
    def group(self) -> IntArray:
        """The pair (group number) of each position of ``rows``."""
        return np.repeat(np.arange(len(self.size)), self.size)

    @property
    def raters(self) -> tuple[str, ...]:
        """Everyone who graded a double-judged pair in view, sorted."""
        return tuple(self.answers.users[i] for i in np.unique(self.answers.user[self.rows]))


def collect(answers: Answers, filters: Filters) -> Judged:
    """The double-judged pairs under the stratum and protocol filters (the people filter picks
    comparisons later). Unsure and skipped answers are counted: the two people's when the
    people filter is set, else everyone's."""
    in_view = answers.admitted(filters)
    graded = np.flatnonzero(in_view & answers.graded)
    # lexsort is stable: by pair, then time, then the stored order.
    rows = graded[np.lexsort((answers.at[graded], answers.pair[graded]))]
    _, size = _runs(answers.pair[rows])
    keep = size >= 2
    rows = rows[np.repeat(keep, size)]
    size = size[keep]
    skipped = in_view & answers.not_graded
    if filters.people is not None:
        codes = [answers.user_code(name) for name in filters.people]
        skipped &= np.isin(answers.user, codes)
    return Judged(
        answers=answers,
        rows=rows,
        start=np.cumsum(size) - size,
        size=size,
        in_view=in_view,
        unsure_or_skipped=int(skipped.sum()),
    )


def _runs(keys: IntArray) -> tuple[IntArray, IntArray]:
    """Start and length of each run of equal values in ``keys``."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return start, np.diff(np.r_[start, len(keys)])


# --------------------------------------------------------------------------- comparisons


@dataclass(frozen=True, eq=False)
class Comparisons:
    """Comparisons of two grades of one pair: answer rows ``x`` (judge A) and ``y`` (B)."""

    answers: Answers
    x: IntArray
    y: IntArray

    @property
    def n(self) -> int:
        return len(self.x)

    def paired(self) -> Paired:
        """The labels as `report.paired_report` takes them (queries by sorted code)."""
        a = self.answers
        return Paired(qids=a.qid[self.x], a=a.grade[self.x], b=a.grade[self.y], only_a=0, only_b=0)

    def take(self, positions: IntArray) -> Comparisons:
        return Comparisons(self.answers, self.x[positions], self.y[positions])

    def split(self, keys: IntArray) -> Iterator[tuple[int, Comparisons]]:
        """The comparisons grouped by ``keys`` (one per comparison), by ascending key."""
        order = np.argsort(keys, kind="stable")
        start, size = _runs(keys[order])
        for first, length in zip(start.tolist(), size.tolist(), strict=True):
            yield int(keys[order[first]]), self.take(order[first : first + length])

    def tables(
        self, keys: IntArray, labels: Sequence[int]
    ) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """Per distinct key, ascending: the key, its confusion table over ``labels`` (rows:
        A), its number of comparisons and of distinct queries."""
        a, values = self.answers, np.asarray(labels)
        k = len(values)
        distinct, slot = np.unique(keys, return_inverse=True)
        cells = np.searchsorted(values, a.grade[self.x]) * k + np.searchsorted(
            values, a.grade[self.y]
        )
        tables = np.bincount(slot * k * k + cells, minlength=len(distinct) * k * k)
        width = len(a.qids)
        queries = np.bincount(
            np.unique(slot * width + a.qid[self.x]) // width, minlength=len(distinct)
        )
        counts = np.bincount(slot, minlength=len(distinct))
        return distinct, tables.reshape(-1, k, k), counts, queries

    def by_stratum(self) -> Iterator[tuple[str, Comparisons]]:
        for code, part in self.split(self.answers.stratum[self.x]):
            yield self.answers.strata[code], part

    def by_week(self) -> Iterator[tuple[str, Comparisons]]:
        """By the ISO week of the later grade, as "2026-W48", in time order. Weeks start on
        Monday; 1970-01-01 was a Thursday, so day d falls in week (d + 3) // 7."""
        later = np.maximum(self.answers.at[self.x], self.answers.at[self.y])
        weeks = (np.floor(later / _DAY).astype(np.int64) + 3) // 7
        for week, part in self.split(weeks):
            monday = _EPOCH + timedelta(days=week * 7 - 3)
            year, number, _ = monday.isocalendar()
            yield f"{year}-W{number:02d}", part

    def qrels(self) -> tuple[Qrels, Qrels]:
        """The two judges' labels as qrels ({qid: {docid: grade}})."""
        answers = self.answers
        a: dict[str, dict[str, int]] = {}
        b: dict[str, dict[str, int]] = {}
        for x, y in zip(self.x.tolist(), self.y.tolist(), strict=True):
            qid, docid = answers.qids[answers.qid[x]], answers.docids[x]
            a.setdefault(qid, {})[docid] = int(answers.grade[x])
            b.setdefault(qid, {})[docid] = int(answers.grade[y])
        return a, b


def headline(judged: Judged, filters: Filters) -> Comparisons:
    """First grader against second, or A against B on every pair both graded."""
    answers = judged.answers
    if filters.people is None:
        return Comparisons(answers, judged.rows[judged.start], judged.rows[judged.start + 1])
    group, users = judged.group, answers.user[judged.rows]
    at_a = np.flatnonzero(users == answers.user_code(filters.people[0]))
    at_b = np.flatnonzero(users == answers.user_code(filters.people[1]))
    # A person has one current answer per pair, so each pair appears at most once on a side.
    _, in_a, in_b = np.intersect1d(group[at_a], group[at_b], return_indices=True)
    return Comparisons(answers, judged.rows[at_a[in_a]], judged.rows[at_b[in_b]])


def every_two(judged: Judged) -> Comparisons:
    """Every two graders of every pair, the one whose name sorts first as A."""
    xs, ys = [], []
    for i in range(int(judged.size.max(initial=0))):
        for j in range(i + 1, int(judged.size.max(initial=0))):
            has = judged.start[judged.size > j]
            xs.append(judged.rows[has + i])
            ys.append(judged.rows[has + j])
    x = np.concatenate(xs) if xs else np.zeros(0, np.int64)
    y = np.concatenate(ys) if ys else np.zeros(0, np.int64)
    user = judged.answers.user
    swap = user[x] > user[y]
    return Comparisons(judged.answers, np.where(swap, y, x), np.where(swap, x, y))


def person_pairs(judged: Judged) -> tuple[Comparisons, IntArray]:
    """Every two people's shared pairs (the one whose name sorts first as A), each keyed by
    the two people: ``key = code(A) * len(users) + code(B)``; `pair_names` reads a key."""
    both = every_two(judged)
    user = judged.answers.user
    return both, user[both.x] * len(judged.answers.users) + user[both.y]


def pair_names(answers: Answers, key: int) -> tuple[str, str]:
    width = len(answers.users)
    return answers.users[key // width], answers.users[key % width]


# --------------------------------------------------------------------------- people


@dataclass(frozen=True)
class Person:
    """One grader against everyone else on the double-judged pairs they graded.

    ``versus`` holds one comparison per (pair, other grader), own grade as A, so that a pair
    judged by three people counts once against each of the other two; ``confusion`` is its
    table over the labels (rows: own grade); ``leniency`` the mean of own minus other's grade.
    """

    username: str
    pairs: int
    versus: Comparisons
    confusion: tuple[tuple[int, ...], ...]
    leniency: float
    median_seconds: float | None


def people(judged: Judged, labels: Sequence[int]) -> list[Person]:
    """Each grader of a double-judged pair in view against the others, by name."""
    answers = judged.answers
    both = every_two(judged)
    directed = Comparisons(answers, np.r_[both.x, both.y], np.r_[both.y, both.x])
    graded = np.bincount(answers.user[judged.rows], minlength=len(answers.users))
    found = []
    for code, versus in directed.split(answers.user[directed.x]):
        own, other = answers.grade[versus.x], answers.grade[versus.y]
        seconds = answers.seconds[judged.in_view & (answers.user == code)]
        found.append(
            Person(
                username=answers.users[code],
                pairs=int(graded[code]),
                versus=versus,
                confusion=_confusion(own, other, labels),
                leniency=float((own - other).mean()),
                median_seconds=float(np.median(seconds)) if seconds.size else None,
            )
        )
    return found


def _confusion(a: IntArray, b: IntArray, labels: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    values = np.asarray(labels)
    k = len(values)
    cells = np.searchsorted(values, a) * k + np.searchsorted(values, b)
    table = np.bincount(cells, minlength=k * k).reshape(k, k)
    return tuple(tuple(int(v) for v in row) for row in table)


def ratings(judged: Judged) -> FloatArray:
    """Units (double-judged pairs) x raters (those in view), NaN where a rater did not grade
    the pair: the input of `kappa.krippendorff_alpha` for any number of raters."""
    answers = judged.answers
    users = answers.user[judged.rows]
    present, column = np.unique(users, return_inverse=True)
    matrix = np.full((len(judged.size), len(present)), np.nan)
    matrix[judged.group, column] = answers.grade[judged.rows]
    return matrix


# --------------------------------------------------------------------------- resolution


TARGET_HALF_WIDTH = 0.10


@dataclass(frozen=True)
class Resolution:
    """How sharp the kappa interval is, and how many pairs in all would make it ±0.10.

    A bootstrap interval's half-width shrinks about as 1 / sqrt(n), so reaching the target
    takes ``needed = n * (half_width / target)^2`` pairs.
    """

    n: int
    half_width: float
    needed: int

    @property
    def more(self) -> int:
        return max(self.needed - self.n, 0)

    @property
    def sharp_enough(self) -> bool:
        return self.half_width <= TARGET_HALF_WIDTH


def resolution(n: int, interval: tuple[float, float] | None) -> Resolution | None:
    if interval is None or n == 0:
        return None
    half_width = (interval[1] - interval[0]) / 2
    needed = int(np.ceil(n * (half_width / TARGET_HALF_WIDTH) ** 2))
    return Resolution(n=n, half_width=half_width, needed=needed)
