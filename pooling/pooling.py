"""Depth-k pooling with provenance, pool statistics and a judging budget.

The pool of a query is the union of the top ``depth`` documents of every run. Each pooled
document remembers where every run placed it, so that later analyses (which run found
the relevant documents, what a shallower pool would have missed) need no second pass
over the runs.

Two ways in, one result: :func:`depth_pool` pools runs already read into rows (as
:func:`pooling.trec.read_run` returns them, or as the database holds them);
:func:`pooling.fastpool.pool_files` pools run files directly. The latter streams each file in
blocks, parses a block with numpy and keeps, per query, only the rows that can still be in the top
``depth``: no Python object per line, so a fraction of the time and memory that reading the
runs into rows takes (bench/results/pool.md). It returns exactly what
``depth_pool(read_run(...))`` returns, and reports a broken file exactly as ``read_run``
does.

This module is a pure core: no Django, plain records in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import numpy.typing as npt

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

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]
Bytes = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]


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

    Per-query figures are over the queries that have at least one pooled document;
    ``per_query`` maps each of them to its pool size. ``runs`` holds one
    :class:`RunContribution` per run, in the order given to :func:`pool_stats`;
    :meth:`contribution` looks one up by name. For every pair of names ``(a, b)`` in that
    order, ``shared[(a, b)]`` counts the (qid, docid) pairs both runs contributed and
    ``overlap[(a, b)]`` is their Jaccard index: shared over the size of the union (0.0 when
    neither contributed anything).
    """

    n_queries: int
    total: int
    per_query_min: int
    per_query_mean: float
    per_query_max: int
    runs: tuple[RunContribution, ...]
    overlap: Mapping[tuple[str, str], float]
    per_query: Mapping[str, int] = field(default_factory=dict)
    shared: Mapping[tuple[str, str], int] = field(default_factory=dict)

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
    contributed = {name: len(found[name]) for name in run_names}
    shared = {(a, b): len(found[a] & found[b]) for a, b in combinations(run_names, 2)}
    return pool_summary(
        sizes, [(name, contributed[name], unique[name]) for name in run_names], shared
    )


def pool_summary(
    sizes: Mapping[str, int],
    runs: Sequence[tuple[str, int, int]],
    shared: Mapping[tuple[str, str], int],
) -> PoolStats:
    """Assemble :class:`PoolStats` from pool sizes, (name, contributed, unique) and overlaps."""
    counts = list(sizes.values())
    contributed = {name: count for name, count, _ in runs}
    return PoolStats(
        n_queries=len(counts),
        total=sum(counts),
        per_query_min=min(counts, default=0),
        per_query_mean=sum(counts) / len(counts) if counts else 0.0,
        per_query_max=max(counts, default=0),
        runs=tuple(RunContribution(*run) for run in runs),
        overlap={
            pair: _jaccard(both, contributed[pair[0]] + contributed[pair[1]] - both)
            for pair, both in shared.items()
        },
        per_query=dict(sizes),
        shared=dict(shared),
    )


def _jaccard(intersection: int, union: int) -> float:
    return intersection / union if union else 0.0


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
