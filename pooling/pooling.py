"""Depth-k pooling with provenance, pool statistics and a judging budget.

The pool of a query is the union of the top ``depth`` documents of every run. Each pooled
document remembers where every run placed it, so that later analyses (which run found
the relevant documents, what a shallower pool would have missed) need no second pass
over the runs.

One core, two ways in. :func:`pool_table` (and :func:`pool_files`) pools run files: each is
read in pieces of numpy columns (:func:`formats.trec.iter_run_pieces`), and per query only
the rows that can still be in the top ``depth`` are kept, so no Python object is made per
line. :func:`depth_pool` pools runs already read into rows (as :func:`formats.trec.read_run`
returns them, or as the database holds them). Both turn each run into hits (query,
document, position in trec_eval order) and :func:`_join` makes the pool of them; the
statistics are computed once, on the pool's columns (:meth:`PoolTable.stats`), for
:func:`pool_stats` too.

This module is a pure core: no Django, plain records in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from formats.trec import (
    NotSplit,
    RunRow,
    RunTable,
    concat_tables,
    has_duplicates,
    iter_run_pieces,
    key_strings,
    lexsort_keys,
    pack_keys,
    read_run,
    single,
    trec_order,
    widen,
)

__all__ = [
    "Budget",
    "PoolEntry",
    "PoolStats",
    "PoolTable",
    "RunContribution",
    "depth_pool",
    "judging_budget",
    "pool_files",
    "pool_stats",
    "pool_table",
]

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]


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


# --------------------------------------------------------------------------- pooling


def pool_files(
    paths: Sequence[str | Path], depth: int, names: Sequence[str] | None = None
) -> list[PoolEntry]:
    """Pool run files: the same list as :func:`depth_pool` of their :func:`read_run`.

    Run ``i`` is called ``names[i]``, by default the path as given (``str(path)``). Files may
    be gzip-compressed. A file that is not a valid run raises
    :class:`formats.trec.FormatError` naming the file and the line, as ``read_run`` would.
    """
    return pool_table(paths, depth, names).entries()


def pool_table(
    paths: Sequence[str | Path], depth: int, names: Sequence[str] | None = None
) -> PoolTable:
    """Pool run files like :func:`pool_files`, keeping the pool in columns (:class:`PoolTable`).

    The columns are what a large pool needs to be summarised and written out quickly;
    :meth:`PoolTable.entries` turns them into the :class:`PoolEntry` list.
    """
    _check_depth(depth)
    run_names = _run_names(paths, names)
    qids: dict[str, int] = {}  # qid -> code, shared by all runs, in order of first sight
    hits = [_file_hits(path, depth, qids) for path in paths]
    return _join(hits, run_names, list(qids), depth)


def depth_pool(
    runs: Mapping[str, Mapping[str, Sequence[RunRow]]],
    depth: int,
    qids: Collection[str] | None = None,
) -> list[PoolEntry]:
    """Pool the top ``depth`` documents of every run, for every query.

    ``runs`` maps run name -> qid -> rows already in trec_eval order (as
    :func:`formats.trec.read_run` returns them): a row's position is its place in the list.
    When ``qids`` is given only those queries are pooled; a query no run answers contributes
    nothing. Entries are ordered by qid (string order), then best position, then docid, so
    the same input always gives the same list, whatever the order of ``runs``.
    """
    _check_depth(depth)
    wanted = None if qids is None else set(qids)
    codes: dict[str, int] = {}
    hits = [_listed_hits(per_query, depth, wanted, codes) for per_query in runs.values()]
    return _join(hits, tuple(runs), list(codes), depth).entries()


def _check_depth(depth: int) -> None:
    if depth < 1:
        raise ValueError(f"pool depth must be at least 1, got {depth}")


def _run_names(paths: Sequence[str | Path], names: Sequence[str] | None) -> tuple[str, ...]:
    run_names = tuple(str(path) for path in paths) if names is None else tuple(names)
    if len(run_names) != len(paths):
        raise ValueError(f"{len(run_names)} run names for {len(paths)} run files")
    seen: set[str] = set()
    for name in run_names:
        if name in seen:
            raise ValueError(f"run name {name!r} is given twice; each run needs its own")
        seen.add(name)
    return run_names


@dataclass(frozen=True)
class _Hits:
    """Where one run places documents in its top ``depth``: the query (a code shared by all
    runs), the document (key and length in bytes, see :func:`formats.trec.pack_keys`) and
    its 1-based position in trec_eval order."""

    query: Ints
    keys: Words
    lengths: Ints
    position: Ints

    def take(self, index: npt.NDArray[Any]) -> _Hits:
        return _Hits(self.query[index], self.keys[index], self.lengths[index], self.position[index])

    @staticmethod
    def concat(parts: Sequence[_Hits]) -> _Hits:
        width = max((part.keys.shape[1] for part in parts), default=1)
        return _Hits(
            np.concatenate([part.query for part in parts]) if parts else _ints([]),
            np.concatenate([widen(part.keys, width) for part in parts])
            if parts
            else np.zeros((0, 1), np.uint64),
            np.concatenate([part.lengths for part in parts]) if parts else _ints([]),
            np.concatenate([part.position for part in parts]) if parts else _ints([]),
        )


def _listed_hits(
    per_query: Mapping[str, Sequence[RunRow]],
    depth: int,
    wanted: set[str] | None,
    codes: dict[str, int],
) -> _Hits:
    """Hits of a run given as ranked lists: the first ``depth`` rows of each query."""
    queries: list[int] = []
    docids: list[str] = []
    positions: list[int] = []
    for qid, rows in per_query.items():
        top = rows[:depth]
        if not top or (wanted is not None and qid not in wanted):
            continue
        queries += [codes.setdefault(qid, len(codes))] * len(top)
        docids += [row.docid for row in top]
        positions += range(1, len(top) + 1)
    keys, lengths = pack_keys(docids)
    hits = _Hits(_ints(queries), keys, lengths, _ints(positions))
    # A list may repeat a document (files may not): it keeps its first, best, position.
    order = np.lexsort([hits.position, hits.lengths, *lexsort_keys(keys, False), hits.query])
    return hits.take(order[_first_of_groups(hits.take(order))])


def _file_hits(path: str | Path, depth: int, qids: dict[str, int]) -> _Hits:
    """Hits of a run file, its queries coded in ``qids`` (which grows)."""
    try:
        table = _top_rows(iter_run_pieces(path), depth)
    except NotSplit:
        # A layout the bulk reader leaves to the line parser (non-ASCII ids, aligned
        # columns), or a problem, which the line parser reports with its line.
        table = RunTable.from_mapping(read_run(path))
    order = trec_order(table.qid_codes, table.scores, table.doc_keys, table.doc_lengths)
    position = _ranks_within(table.qid_codes[order])
    keep = order[position <= depth]
    code = _ints([qids.setdefault(qid, len(qids)) for qid in table.qids])
    query = code[table.qid_codes[keep]] if len(code) else _ints([])
    return _Hits(query, table.doc_keys[keep], table.doc_lengths[keep], position[position <= depth])


def _top_rows(pieces: Iterator[RunTable], depth: int) -> RunTable:
    """The rows of a file that can be in the top ``depth`` of their query; raises NotSplit
    (for the line parser to name the line) when a document appears twice for a query."""
    kept: list[RunTable] = []
    codes: list[npt.NDArray[np.int32]] = []
    keys: list[Words] = []
    for piece in pieces:
        codes.append(piece.qid_codes)
        keys.append(piece.doc_keys)
        kept.append(_keep_top(piece, depth))
        if len(kept) > 32:  # bound the memory a long file takes
            kept = [_keep_top(concat_tables(kept), depth)]
    width = max((k.shape[1] for k in keys), default=1)
    if keys and has_duplicates(
        np.concatenate(codes), np.concatenate([widen(k, width) for k in keys])
    ):
        raise NotSplit
    return concat_tables(kept)


def _keep_top(table: RunTable, depth: int) -> RunTable:
    """Drop the rows below the ``depth``-th best score of their query: they cannot be pooled.

    Rows tied with that score stay; the docid decides between them later. Scores compare
    in single precision, as trec_eval compares them.
    """
    score = single(table.scores)
    firsts, sizes = _groups(table.qid_codes)  # blocks of one query, as the file lists them
    if _descending(score, firsts):  # the usual file: the cut-off is the depth-th row
        cutoff = score[firsts + np.minimum(sizes, depth) - 1]
        return table.take(np.flatnonzero(score >= np.repeat(cutoff, sizes)))
    order = np.lexsort([-score, table.qid_codes])
    score = score[order]
    firsts, sizes = _groups(table.qid_codes[order])
    cutoff = score[firsts + np.minimum(sizes, depth) - 1]
    return table.take(order[score >= np.repeat(cutoff, sizes)])


def _descending(score: npt.NDArray[np.float32], firsts: Ints) -> bool:
    """Whether every block (starting at ``firsts``) lists its scores from high to low."""
    rises = score[1:] > score[:-1]
    rises[firsts[1:] - 1] = False  # from one block to the next is no rise
    return not np.any(rises)


def _groups(codes: npt.NDArray[Any]) -> tuple[Ints, Ints]:
    """First index and length of each run of equal consecutive values."""
    changed = np.ones(len(codes), dtype=bool)
    changed[1:] = codes[1:] != codes[:-1]
    firsts = np.flatnonzero(changed)
    return firsts, np.diff(np.append(firsts, len(codes)))


def _ranks_within(codes: npt.NDArray[Any]) -> Ints:
    """1-based position of each row in its run of equal consecutive codes."""
    firsts, sizes = _groups(codes)
    return np.arange(len(codes)) - np.repeat(firsts, sizes) + 1


def _first_of_groups(hits: _Hits) -> npt.NDArray[np.bool_]:
    """True for the first hit of each (query, document), hits being sorted by them."""
    changed = np.ones(len(hits.query), dtype=bool)
    changed[1:] = (
        (hits.query[1:] != hits.query[:-1])
        | (hits.lengths[1:] != hits.lengths[:-1])
        | np.any(hits.keys[1:] != hits.keys[:-1], axis=1)
    )
    return changed


def _ints(values: Sequence[int]) -> Ints:
    return np.array(values, dtype=np.int64)


def _join(
    hits: Sequence[_Hits], run_names: tuple[str, ...], qids: list[str], depth: int
) -> PoolTable:
    """Join the runs' hits into pool entries, in depth_pool's order."""
    by_name = sorted(range(len(hits)), key=run_names.__getitem__)
    joined = _Hits.concat([hits[i] for i in by_name])
    run = np.repeat(_ints(by_name), [len(hits[i].query) for i in by_name])
    # qids as strings rank the queries; depth_pool orders entries by qid string.
    qid_rank = np.argsort(np.argsort(np.array(qids, dtype=object))) if qids else _ints([])
    query = qid_rank[joined.query] if len(qid_rank) else _ints([])
    # Hits by (query, document); stable, so a pair's runs stay in name order.
    order = np.lexsort([joined.lengths, *lexsort_keys(joined.keys, False), query])
    joined, run, query = joined.take(order), run[order], query[order]
    firsts = np.flatnonzero(
        _first_of_groups(_Hits(query, joined.keys, joined.lengths, joined.position))
    )
    sizes = np.diff(np.append(firsts, len(run)))
    best = np.minimum.reduceat(joined.position, firsts) if len(firsts) else _ints([])
    # Entries come out by (query, docid); a stable sort on (query, best) finishes the order.
    entry_order = np.argsort(query[firsts] * (depth + 1) + best, kind="stable")
    entries = firsts[entry_order]
    pooled = np.unique(query[firsts])  # ranks of the pooled qids, ascending
    by_rank = sorted(qids)
    hit_order = _expand(entries, sizes[entry_order])
    return PoolTable(
        run_names=run_names,
        depth=depth,
        qids=tuple(by_rank[r] for r in pooled.tolist()),
        entry_qid=np.searchsorted(pooled, query[entries]),
        docids=tuple(key_strings(joined.keys[entries], joined.lengths[entries])),
        hit_start=np.append(0, np.cumsum(sizes[entry_order])),
        hit_run=run[hit_order],
        hit_position=joined.position[hit_order],
    )


def _expand(starts: Ints, sizes: Ints) -> Ints:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, sizes)])`` without the loop."""
    offsets = np.cumsum(sizes) - sizes
    return np.repeat(starts - offsets, sizes) + np.arange(int(sizes.sum()))


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
    entries = list(entries)
    names = tuple(dict.fromkeys([*run_names, *(name for e in entries for name in e.runs)]))
    return _table_of(entries, names).stats(run_names)


def _table_of(entries: Sequence[PoolEntry], run_names: tuple[str, ...]) -> PoolTable:
    """The columns of pool entries (queries in order of first appearance)."""
    qids = list(dict.fromkeys(entry.qid for entry in entries))
    code = {qid: i for i, qid in enumerate(qids)}
    index = {name: i for i, name in enumerate(run_names)}
    hits = [(index[name], position) for e in entries for name, position in e.runs.items()]
    return PoolTable(
        run_names=run_names,
        depth=max((position for _, position in hits), default=1),
        qids=tuple(qids),
        entry_qid=_ints([code[entry.qid] for entry in entries]),
        docids=tuple(entry.docid for entry in entries),
        hit_start=np.append(0, np.cumsum([len(entry.runs) for entry in entries])).astype(np.int64),
        hit_run=_ints([run for run, _ in hits]),
        hit_position=_ints([position for _, position in hits]),
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


# --------------------------------------------------------------------------- pool table


@dataclass(frozen=True)
class PoolTable:
    """A pool in columns, in the order of :func:`depth_pool` (qid, best position, docid).

    Entry ``i`` is query ``qids[entry_qid[i]]`` and document ``docids[i]``; the runs that
    pooled it are ``run_names[hit_run[h]]``, at ``hit_position[h]``, for ``h`` from
    ``hit_start[i]`` to ``hit_start[i + 1]`` (in name order, as depth_pool lists them).
    ``qids`` holds the pooled queries in string order.
    """

    run_names: tuple[str, ...]
    depth: int
    qids: tuple[str, ...]
    entry_qid: Ints
    docids: tuple[str, ...]
    hit_start: Ints
    hit_run: Ints
    hit_position: Ints

    def __len__(self) -> int:
        return len(self.docids)

    def entries(self) -> list[PoolEntry]:
        names, runs, positions = self.run_names, self.hit_run.tolist(), self.hit_position.tolist()
        bounds = self.hit_start.tolist()
        return [
            PoolEntry(self.qids[q], docid, {names[runs[h]]: positions[h] for h in range(a, b)})
            for q, docid, a, b in zip(
                self.entry_qid.tolist(), self.docids, bounds[:-1], bounds[1:], strict=True
            )
        ]

    def stats(self, names: Sequence[str] | None = None) -> PoolStats:
        """The pool's :class:`PoolStats`, reporting the runs ``names`` (by default all)."""
        n_runs = len(self.run_names)
        index = {name: i for i, name in enumerate(self.run_names)}
        chosen = [index[name] for name in (self.run_names if names is None else names)]
        sizes = np.bincount(self.entry_qid, minlength=len(self.qids)).tolist()
        contributed = np.bincount(self.hit_run, minlength=n_runs).tolist()
        alone = np.repeat(np.diff(self.hit_start) == 1, np.diff(self.hit_start))
        unique = np.bincount(self.hit_run[alone], minlength=n_runs).tolist()
        both = self._shared_counts()
        return pool_summary(
            dict(zip(self.qids, sizes, strict=True)),
            [(self.run_names[i], contributed[i], unique[i]) for i in chosen],
            {
                (self.run_names[a], self.run_names[b]): int(both[a, b])
                for a, b in combinations(chosen, 2)
            },
        )

    def _shared_counts(self, rows: int = 1 << 16) -> npt.NDArray[np.float64]:
        """Pairs pooled by both runs ``a`` and ``b``, as an (n_runs, n_runs) matrix.

        The product of the entry-by-run membership matrix with itself, a slice of entries
        at a time so that memory stays small; float64 counts are exact far beyond any pool.
        """
        n_runs = len(self.run_names)
        entry = np.repeat(np.arange(len(self)), np.diff(self.hit_start))
        counts = np.zeros((n_runs, n_runs))
        for low in range(0, len(self), rows):
            hits = slice(self.hit_start[low], self.hit_start[min(low + rows, len(self))])
            member = np.zeros((min(rows, len(self) - low), n_runs))
            member[entry[hits] - low, self.hit_run[hits]] = 1.0
            counts += member.T @ member
        return counts


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
