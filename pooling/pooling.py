"""Depth-k pooling with provenance, pool statistics and a judging budget.

The pool of a query is the union of the top ``depth`` documents of every run. Each pooled
document remembers where every run placed it, so that later analyses (which run found
the relevant documents, what a shallower pool would have missed) need no second pass
over the runs.

This module is a pure core: no Django, plain records in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from pooling.trec import RunRow

__all__ = [
    "Budget",
    "PoolEntry",
    "PoolStats",
    "RunContribution",
    "depth_pool",
    "judging_budget",
    "pool_stats",
]


@dataclass(frozen=True)
class PoolEntry:
    """One pooled (query, document) pair.

    ``runs`` maps each run that put the document in its top ``depth`` to the document's
    1-based position in that run's trec_eval-ordered list (score descending, docid
    descending), not to the rank column of the run file, which trec_eval ignores too.
    """

    qid: str
    docid: str
    runs: Mapping[str, int]

    @property
    def best_position(self) -> int:
        """The highest placement any run gave the document (the minimum position)."""
        return min(self.runs.values())


def depth_pool(
    runs: Mapping[str, Mapping[str, Sequence[RunRow]]],
    depth: int,
    qids: Collection[str] | None = None,
) -> list[PoolEntry]:
    """Pool the top ``depth`` documents of every run, for every query.

    ``runs`` maps run name -> qid -> rows already in trec_eval order (as
    :func:`pooling.trec.read_run` returns them). When ``qids`` is given only those queries
    are pooled; a query no run answers contributes nothing. Entries are ordered by qid
    (string order), then best position, then docid, so the same input always gives the
    same list, whatever the order of ``runs``.
    """
    if depth < 1:
        raise ValueError(f"pool depth must be at least 1, got {depth}")
    wanted = _pooled_qids(runs, qids)
    entries: list[PoolEntry] = []
    for qid in sorted(wanted):
        entries.extend(_pool_query(runs, qid, depth))
    return entries


def _pooled_qids(
    runs: Mapping[str, Mapping[str, Sequence[RunRow]]], qids: Collection[str] | None
) -> set[str]:
    answered = {qid for per_query in runs.values() for qid in per_query}
    return answered if qids is None else answered & set(qids)


def _pool_query(
    runs: Mapping[str, Mapping[str, Sequence[RunRow]]], qid: str, depth: int
) -> list[PoolEntry]:
    positions: dict[str, dict[str, int]] = {}  # docid -> run name -> position
    for name in sorted(runs):
        for position, row in enumerate(runs[name].get(qid, ())[:depth], start=1):
            # setdefault keeps the first (best) position should a run repeat a document.
            positions.setdefault(row.docid, {}).setdefault(name, position)
    entries = [PoolEntry(qid, docid, found) for docid, found in positions.items()]
    entries.sort(key=lambda entry: (entry.best_position, entry.docid))
    return entries


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class RunContribution:
    """What one run brought to the pool.

    ``contributed``: pooled (qid, docid) pairs the run placed in its top ``depth``.
    ``unique``: those of them no other run placed there; a run with many unique documents
    is one the pool would miss most if it were left out.
    """

    name: str
    contributed: int
    unique: int


@dataclass(frozen=True)
class PoolStats:
    """Summary of a pool.

    Per-query figures are over the queries that have at least one pooled document.
    ``runs`` holds one :class:`RunContribution` per run, in the order given to
    :func:`pool_stats`; :meth:`contribution` looks one up by name.
    ``overlap[(a, b)]`` is the Jaccard index (size of the intersection over size of the
    union) of the (qid, docid) pairs runs ``a`` and ``b`` contributed, for every pair of
    names in the order given to :func:`pool_stats` (0.0 when neither contributed anything).
    """

    n_queries: int
    total: int
    per_query_min: int
    per_query_mean: float
    per_query_max: int
    runs: tuple[RunContribution, ...]
    overlap: Mapping[tuple[str, str], float]

    def contribution(self, name: str) -> RunContribution:
        """The contribution of run ``name`` (KeyError when it was not pooled)."""
        for run in self.runs:
            if run.name == name:
                return run
        raise KeyError(name)


def pool_stats(entries: Iterable[PoolEntry], run_names: Sequence[str]) -> PoolStats:
    """Compute :class:`PoolStats`; ``run_names`` lists every pooled run, even silent ones."""
    sizes: dict[str, int] = {}
    found: dict[str, set[tuple[str, str]]] = {name: set() for name in run_names}
    unique: dict[str, int] = dict.fromkeys(run_names, 0)
    for entry in entries:
        sizes[entry.qid] = sizes.get(entry.qid, 0) + 1
        for name in entry.runs:
            found.setdefault(name, set()).add((entry.qid, entry.docid))
        if len(entry.runs) == 1:
            (only,) = entry.runs
            unique[only] = unique.get(only, 0) + 1
    counts = list(sizes.values())
    return PoolStats(
        n_queries=len(counts),
        total=sum(counts),
        per_query_min=min(counts, default=0),
        per_query_mean=sum(counts) / len(counts) if counts else 0.0,
        per_query_max=max(counts, default=0),
        runs=tuple(RunContribution(name, len(found[name]), unique[name]) for name in run_names),
        overlap={(a, b): _jaccard(found[a], found[b]) for a, b in combinations(run_names, 2)},
    )


def _jaccard(a: set[tuple[str, str]], b: set[tuple[str, str]]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


# --------------------------------------------------------------------------- budget


@dataclass(frozen=True)
class Budget:
    """Judging effort for a pool.

    ``judgments`` = pool size; ``double_judged`` = round(pool size * double share), the
    judgments done a second time by another person to measure agreement;
    ``total_judgments`` = judgments + double_judged; ``hours`` = total * seconds / 3600.
    """

    judgments: int
    double_judged: int
    total_judgments: int
    hours: float


def judging_budget(
    pool_size: int, double_share: float = 0.2, seconds_per_judgment: float = 30.0
) -> Budget:
    """Estimate the judging effort of a pool (see :class:`Budget` for the formulas).

    ``round`` is Python's (half to even), so 2.5 double judgments round to 2.
    """
    if pool_size < 0:
        raise ValueError(f"pool size must be non-negative, got {pool_size}")
    if not 0.0 <= double_share <= 1.0:
        raise ValueError(f"double share must be between 0 and 1, got {double_share}")
    if seconds_per_judgment < 0:
        raise ValueError(f"seconds per judgment must be non-negative, got {seconds_per_judgment}")
    double = round(pool_size * double_share)
    total = pool_size + double
    return Budget(pool_size, double, total, total * seconds_per_judgment / 3600)
