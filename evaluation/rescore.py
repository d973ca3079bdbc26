"""Scoring many runs under one release at once: rows in, stored numbers out. Pure core, no
Django.

Every run of a release is scored over the same queries (the release's queries that count
under the contract), so one bootstrap draw serves them all: the resamples are those of
`stats.bootstrap_interval` (``rng.integers(0, n, size=(resamples, n))`` for the seed), kept
as how often each query is drawn in each resample, and every run's resampled means of every
measure are one matrix product. The intervals are `bootstrap_interval`'s to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from formats.trec import QrelsTable, pack_keys

from .measures import Contract, RankedRows, RunScores

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# The metric contract of every stored score (the product default), the measures stored, and
# the intervals' bootstrap: the pages print these above the numbers.
STORED_CONTRACT = Contract()
STORED_MEASURES = ["ndcg@10", "recall@100", "mrr", "map", "p@10", "hit@5", "hit@10", "judged@10"]
RESAMPLES = 10_000
SEED = 0

BLOCK_ROWS = 1_000  # resamples drawn at a time: numpy draws element by element, so blocks
# concatenate to the one big draw


@dataclass(frozen=True)
class Resamples:
    """How often each of n queries is drawn in each resample: (resamples, n) float64."""

    counts: F64
    seed: int

    @classmethod
    def draw(cls, n: int, *, resamples: int = 10_000, seed: int = 0) -> Resamples:
        rng = np.random.default_rng(seed)
        counts = np.zeros((resamples, n))
        for start in range(0, resamples, BLOCK_ROWS):
            stop = min(start + BLOCK_ROWS, resamples)
            idx = rng.integers(0, n, size=(stop - start, n))
            offsets = np.arange(stop - start)[:, None] * n
            drawn = np.bincount((idx + offsets).ravel(), minlength=(stop - start) * n)
            counts[start:stop] = drawn.reshape(stop - start, n)
        return cls(counts, seed)

    def intervals(self, values: F64, confidence: float = 0.95) -> list[tuple[float, float]]:
        """Percentile intervals of the mean of each column of ``values`` (n rows)."""
        if values.shape[0] == 0:
            return [(math.nan, math.nan)] * values.shape[1]
        means = self.counts @ values / values.shape[0]
        alpha = 1 - confidence
        lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
        return list(zip(lo.tolist(), hi.tolist(), strict=True))


def qrels_table(lines: Sequence[tuple[str, str, int]]) -> QrelsTable:
    """The release's qrels (qid, docid, grade in qrels order) as a table."""
    qids = tuple(dict.fromkeys(qid for qid, _, _ in lines))
    position = {qid: i for i, qid in enumerate(qids)}
    codes = np.array([position[qid] for qid, _, _ in lines], dtype=np.int32)
    keys = pack_keys([docid for _, docid, _ in lines])[0]
    grades = np.array([grade for _, _, grade in lines], dtype=np.int64)
    return QrelsTable(qids, codes, keys, grades)


@dataclass(frozen=True)
class ReleaseTable:
    """A release's labels as qrels, and where each label (by its row id) sits in them: the
    database returns a run's judged rows as label ids and ranks, integers only, and the
    documents' keys are taken from here."""

    table: QrelsTable
    ids: I64  # the label ids, sorted
    position: I64  # the row of the table of each of ``ids``

    @classmethod
    def build(cls, rows: Sequence[tuple[int, str, str, int]]) -> ReleaseTable:
        """From (label id, qid, docid, grade) rows in any order."""
        ordered = sorted(rows, key=lambda row: (row[1], row[2]))
        table = qrels_table([(qid, docid, grade) for _, qid, docid, grade in ordered])
        ids = np.array([row[0] for row in ordered], dtype=np.int64)
        order = np.argsort(ids)
        return cls(table, ids[order], order.astype(np.int64))

    def ranked(
        self, label_ids: Sequence[int], ranks: Sequence[int], retrieved: Sequence[tuple[str, int]]
    ) -> RankedRows:
        """A run as its judged rows (label id, rank) and its documents per query."""
        at = self.position[np.searchsorted(self.ids, np.asarray(label_ids, dtype=np.int64))]
        where = {qid: i for i, qid in enumerate(self.table.qids)}
        counts = np.zeros(len(self.table.qids), dtype=np.int64)
        for qid, count in retrieved:
            counts[where[qid]] = count
        return RankedRows(
            self.table.qids,
            self.table.qid_codes[at],
            self.table.doc_keys[at],
            np.asarray(ranks, dtype=np.int64),
            counts,
        )


@dataclass(frozen=True)
class Stored:
    """What a RunEvaluation keeps of one run's scores."""

    means: dict[str, float | None]
    intervals: dict[str, list[float | None]]
    per_query: dict[str, dict[str, float]]
    queries: dict[str, int]


def stored(scores: RunScores, resamples: Resamples) -> Stored:
    """The means (None for a measure no query defines), 95 % intervals, per-query values
    and query counts of one run, as plain JSON-ready data."""
    names = scores.measures
    qids = list(scores.per_query)
    values = np.array([[scores.per_query[q][m] for m in names] for q in qids]).reshape(
        len(qids), len(names)
    )
    bounds = resamples.intervals(values) if len(qids) else [(math.nan, math.nan)] * len(names)
    return Stored(
        means={m: _finite(v) for m, v in scores.mean.items()},
        intervals={
            m: [_finite(lo), _finite(hi)] for m, (lo, hi) in zip(names, bounds, strict=True)
        },
        per_query=scores.per_query,
        queries={
            "scored": scores.scored,
            "skipped_no_relevant": scores.skipped_no_relevant,
            "missing_from_run": scores.missing_from_run,
        },
    )


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)
