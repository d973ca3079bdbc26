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

from .measures import RankedRows, RunScores

F64 = npt.NDArray[np.float64]

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


def ranked_rows(
    judged: Sequence[tuple[str, str, int]], retrieved: Sequence[tuple[str, int]]
) -> RankedRows:
    """A run's judged rows (qid, docid, rank) and its documents retrieved per query."""
    qids = tuple(dict.fromkeys([*(qid for qid, _ in retrieved), *(q for q, _, _ in judged)]))
    position = {qid: i for i, qid in enumerate(qids)}
    counts = np.zeros(len(qids), dtype=np.int64)
    for qid, count in retrieved:
        counts[position[qid]] = count
    codes = np.array([position[qid] for qid, _, _ in judged], dtype=np.int32)
    keys = pack_keys([docid for _, docid, _ in judged])[0]
    ranks = np.array([rank for _, _, rank in judged], dtype=np.int64)
    return RankedRows(qids, codes, keys, ranks, counts)


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
