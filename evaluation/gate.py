"""The paired comparison report and the regression gate (seed, chapters 5 and 7). Pure core.

Two runs are scored on the same queries under one metric contract; the per-query differences
(candidate minus baseline) give the paired mean, its interval and the wins, losses and ties.
The gate fails when the whole interval lies below zero, or when a must-never-break query has
its gold document below rank 3 in the candidate, whatever the average says: "an average can
absorb a catastrophe on one query; a business cannot."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from formats.trec import FormatError, RunRow, open_text

from .stats import Comparison, bootstrap_interval, compare_summary, paired_summary

MUST_NEVER_BREAK_RANK = 3
SECONDARY = ("recall@100", "hit@5")


@dataclass(frozen=True)
class Violation:
    qid: str
    docid: str
    rank: int | None  # None: the candidate did not retrieve the gold document at all

    def as_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "docid": self.docid, "rank": self.rank}


@dataclass(frozen=True)
class Secondary:
    metric: str
    mean_diff: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class GateReport:
    metric: str
    qids: tuple[str, ...]
    baseline: np.ndarray
    candidate: np.ndarray
    comparison: Comparison
    ci: tuple[float, float]
    ci_method: str
    secondary: tuple[Secondary, ...] = ()
    violations: tuple[Violation, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        lo, hi = self.ci
        if hi < 0:
            return "regression"
        return "improvement" if lo > 0 else "inconclusive"

    @property
    def exit_code(self) -> int:
        """1 on a significant regression or a must-never-break violation, else 0."""
        return 1 if self.verdict == "regression" or self.violations else 0

    def worst_query(self) -> dict[str, Any] | None:
        if not self.qids:
            return None
        diffs = self.candidate - self.baseline
        i = int(np.argmin(diffs))  # first of the most negative: stable for ties
        return {
            "qid": self.qids[i],
            "diff": float(diffs[i]),
            "baseline": float(self.baseline[i]),
            "candidate": float(self.candidate[i]),
        }

    def as_dict(self) -> dict[str, Any]:
        summary = self.comparison.summary
        return {
            "metric": self.metric,
            "n": summary.n,
            "mean_diff": summary.mean,
            "ci": list(self.ci),
            "ci_method": self.ci_method,
            "wins": summary.wins,
            "losses": summary.losses,
            "ties": summary.ties,
            "verdict": self.verdict,
            "worst_query": self.worst_query(),
            "must_never_break_violations": [v.as_dict() for v in self.violations],
            "secondary": {
                s.metric: {"mean_diff": s.mean_diff, "ci": list(s.ci)} for s in self.secondary
            },
            "statistics": self.comparison.as_dict(),
            **self.extra,
        }


def aligned(
    baseline: Mapping[str, Mapping[str, float]],
    candidate: Mapping[str, Mapping[str, float]],
    metric: str,
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Per-query values of `metric` for the queries both runs were scored on, sorted by qid.

    Both runs are scored against the same qrels under the same contract, so the scored query
    sets are the same; intersecting guards against a caller mixing contracts.
    """
    qids = tuple(sorted(baseline.keys() & candidate.keys()))
    a = np.array([baseline[q][metric] for q in qids], dtype=np.float64)
    b = np.array([candidate[q][metric] for q in qids], dtype=np.float64)
    return qids, a, b


def gate_report(
    baseline: Mapping[str, Mapping[str, float]],
    candidate: Mapping[str, Mapping[str, float]],
    *,
    metric: str,
    secondary: Sequence[str] = SECONDARY,
    bootstrap: int = 10_000,
    seed: int = 0,
    violations: Sequence[Violation] = (),
) -> GateReport:
    """Compare per-query scores (qid -> measure -> value) of a candidate with a baseline.

    The interval is the paired bootstrap percentile interval over queries when `bootstrap` > 0
    (assumption-free: per-query scores are lumpy), else the normal interval mean ± z·se.
    """
    qids, a, b = aligned(baseline, candidate, metric)
    if not qids:
        raise ValueError("no query was scored for both runs: check that they match the qrels")
    comparison = compare_summary(a, b, bootstrap=bootstrap, seed=seed)
    if comparison.bootstrap is not None:
        ci, method = (comparison.bootstrap.lo, comparison.bootstrap.hi), "bootstrap"
    else:
        ci, method = (comparison.summary.lo, comparison.summary.hi), "normal"
    extras = tuple(_secondary(baseline, candidate, name, bootstrap, seed) for name in secondary)
    return GateReport(metric, qids, a, b, comparison, ci, method, extras, tuple(violations))


def _secondary(
    baseline: Mapping[str, Mapping[str, float]],
    candidate: Mapping[str, Mapping[str, float]],
    metric: str,
    bootstrap: int,
    seed: int,
) -> Secondary:
    _, a, b = aligned(baseline, candidate, metric)
    d = b - a
    if bootstrap > 0:  # the same kind of interval as the headline metric's
        interval = bootstrap_interval(d, resamples=bootstrap, seed=seed)
        return Secondary(metric, float(d.mean()), (interval.lo, interval.hi))
    summary = paired_summary(d)
    return Secondary(metric, float(d.mean()), (summary.lo, summary.hi))


def read_must_never_break(path: str | Path) -> list[tuple[str, str]]:
    """`qid docid` lines (blank lines and `#` comments skipped): the gold document per case."""
    cases: list[tuple[str, str]] = []
    with open_text(path) as lines:
        for number, line in enumerate(lines, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split()
            if len(parts) != 2:
                raise FormatError(
                    path, number, f"expected 2 columns (qid docid), found {len(parts)}"
                )
            cases.append((parts[0], parts[1]))
    return cases


def must_never_break(
    cases: Sequence[tuple[str, str]], run: Mapping[str, Sequence[RunRow]]
) -> list[Violation]:
    """Cases whose gold document is below rank 3 (or absent) in the run's trec_eval order."""
    violations = []
    for qid, docid in cases:
        ranked = [row.docid for row in run.get(qid, ())]
        rank = ranked.index(docid) + 1 if docid in ranked else None
        if rank is None or rank > MUST_NEVER_BREAK_RANK:
            violations.append(Violation(qid, docid, rank))
    return violations
