"""The paired comparison as people read it: the report's lines, its JSON, the plots' geometry
and the sample size a pilot implies (seed, chapter 5). Pure core: no Django.

The numbers come from :mod:`evaluation.gate` and :mod:`evaluation.stats`; this module only
words and places them, so `compare`, the comparison page and the API print the same report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .gate import GateReport
from .measures import Contract, parse_measures
from .stats import min_detectable_difference, queries_needed

DEFAULT_EFFECT = 0.02  # two points of nDCG: the smallest gain teams usually act on


@dataclass(frozen=True)
class Side:
    """One run of a comparison: its per-query values (qid -> measure -> value) and counts."""

    name: str
    per_query: Mapping[str, Mapping[str, float]]
    missing_from_run: int
    no_relevant: int = 0


# ---------------------------------------------------------------------------------------------
# The report's lines and JSON
# ---------------------------------------------------------------------------------------------


def single_metric(text: str) -> str:
    """The verdict is on one measure: refuse a list rather than silently keep its first."""
    names = parse_measures(text)
    if len(names) != 1:
        raise ValueError(
            f"--metric takes one measure, not {len(names)} ({', '.join(names)}); "
            "recall@100 and hit@5 are reported beside it anyway"
        )
    return names[0]


def contract_text(report: GateReport, base: Side, cand: Side, contract: Contract) -> str:
    """The metric line: every choice that changes the numbers, and the queries scored 0
    because a run lacks them, counted for each run."""
    gain = "2^rel-1" if contract.gain == "exponential" else "rel"
    empty = "skipped" if contract.empty == "skip" else "scored 0"
    return (
        f"{report.metric} · gain {gain} · rel>={contract.rel_threshold} for binary · "
        f"{base.no_relevant} queries with no relevant docs {empty} · "
        f"{missing_text(base, cand)}"
    )


def missing_text(base: Side, cand: Side) -> str:
    return (
        f"missing from a run, scored 0: {base.missing_from_run} from the baseline, "
        f"{cand.missing_from_run} from the candidate"
    )


def interval_text(report: GateReport) -> str:
    lo, hi = report.ci
    mean = report.comparison.summary.mean
    return f"paired mean {mean:+.3f}  (95% CI {lo:+.3f} to {hi:+.3f}, {report.ci_method})"


def shape_text(report: GateReport) -> str:
    s = report.comparison.summary
    return f"wins {s.wins} / losses {s.losses} / ties {s.ties}"


def worst_text(report: GateReport) -> str:
    worst = report.worst_query()
    return f"worst query {worst['qid']} {worst['diff']:+.2f}" if worst else ""


def secondary_text(report: GateReport) -> str:
    return "  ·  ".join(
        f"{x.metric} {x.mean_diff:+.3f} (CI {x.ci[0]:+.3f} to {x.ci[1]:+.3f})"
        for x in report.secondary
    )


def verdict_text(report: GateReport) -> str:
    straddles = "  (the interval straddles zero)" if report.verdict == "inconclusive" else ""
    return f"{report.verdict}{straddles}"


def broken_lines(report: GateReport) -> list[str]:
    lines = []
    for v in report.violations:
        where = f"at rank {v.rank}" if v.rank else "not retrieved"
        lines.append(f"must-never-break {v.qid}: gold {v.docid} {where} (must be <= 3)")
    return lines


def text_report(
    report: GateReport, base: Side, cand: Side, contract: Contract, eval_set: str
) -> list[str]:
    """The five lines of chapter 5, then the verdict and any must-never-break violation."""
    n = report.comparison.summary.n
    lines = [
        f"candidate  {cand.name}  vs incumbent  {base.name}",
        f"eval       {eval_set} · {n} queries",
        f"metric     {contract_text(report, base, cand, contract)}",
        f"result     {interval_text(report)}  ·  {shape_text(report)}",
        f"secondary  {secondary_text(report)}  ·  {worst_text(report)}",
        f"verdict    {verdict_text(report)}",
    ]
    return lines + [f"BROKEN     {line}" for line in broken_lines(report)]


def report_json(report: GateReport, base: Side, cand: Side, contract: Contract) -> dict[str, Any]:
    """`compare --format json`: the gate's keys, the contract and each run's missing queries."""
    return report.as_dict() | {
        "contract": contract.as_dict(),
        "missing_from_run": {"baseline": base.missing_from_run, "candidate": cand.missing_from_run},
    }


# ---------------------------------------------------------------------------------------------
# Plots: an interval against zero, and the per-query differences
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntervalPlot:
    """x positions (in a plot `width` wide) of zero, the mean and the interval's ends."""

    width: int
    zero: float
    mean: float
    lo: float
    hi: float
    left_label: str
    right_label: str


def interval_plot(report: GateReport, *, width: int = 600, margin: int = 20) -> IntervalPlot:
    """The axis spans the interval and zero, symmetric around zero so that left is worse."""
    lo, hi = report.ci
    mean = report.comparison.summary.mean
    reach = max(abs(lo), abs(hi), abs(mean), 1e-9) * 1.15
    span = width - 2 * margin

    def x(value: float) -> float:
        return round(margin + (value + reach) / (2 * reach) * span, 2)

    return IntervalPlot(width, x(0.0), x(mean), x(lo), x(hi), f"{-reach:+.3f}", f"{reach:+.3f}")


@dataclass(frozen=True)
class Bar:
    lo: float
    hi: float
    count: int
    x: float
    y: float  # top of the bar in a plot 100 high
    width: float
    height: float


@dataclass(frozen=True)
class Histogram:
    bars: list[Bar]
    zero: float  # x of zero
    reach: float  # the axis runs from -reach to +reach


def difference_histogram(diffs: npt.ArrayLike, *, bins: int = 21, width: int = 600) -> Histogram:
    """Bars of the per-query differences on a range symmetric around zero, with an odd number
    of bins so that one is centred on zero (where the ties fall)."""
    d = np.asarray(diffs, dtype=np.float64)
    reach = max(float(np.abs(d).max()) if d.size else 0.0, 1e-9)
    counts, edges = np.histogram(d, bins=bins, range=(-reach, reach))
    top = max(int(counts.max()) if counts.size else 0, 1)
    step = width / bins
    bars = []
    for i, c in enumerate(counts.tolist()):
        height = round(100 * c / top, 2)
        bars.append(
            Bar(
                lo=float(edges[i]),
                hi=float(edges[i + 1]),
                count=c,
                x=round(i * step, 2),
                y=round(100 - height, 2),
                width=round(step - 1, 2),
                height=height,
            )
        )
    return Histogram(bars, width / 2, reach)


QueryRows = list[dict[str, Any]]


def extremes(report: GateReport, *, count: int = 5) -> tuple[QueryRows, QueryRows]:
    """The `count` worst and best queries by difference (ties kept in qid order)."""
    diffs = report.candidate - report.baseline
    order = np.argsort(diffs, kind="stable")
    rows = [
        {
            "qid": report.qids[i],
            "diff": float(diffs[i]),
            "baseline": float(report.baseline[i]),
            "candidate": float(report.candidate[i]),
        }
        for i in order.tolist()
    ]
    worst = [r for r in rows[:count] if r["diff"] < 0]
    best = [r for r in reversed(rows[-count:]) if r["diff"] > 0]
    return worst, best


# ---------------------------------------------------------------------------------------------
# Sample size from a pilot
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleSize:
    """How many queries detect `effect` at `power` (two-sided, level `alpha`), from the spread
    of a pilot's per-query differences; and what the pilot's own size can detect."""

    pilot_queries: int
    observed: float
    sd_diff: float
    effect: float
    effect_from: str  # "given", "observed" or "default"
    power: float
    alpha: float
    queries_needed: int
    detectable_now: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "pilot_queries": self.pilot_queries,
            "observed_mean_diff": self.observed,
            "sd_diff": self.sd_diff,
            "effect": self.effect,
            "effect_from": self.effect_from,
            "power": self.power,
            "alpha": self.alpha,
            "queries_needed": self.queries_needed,
            "min_detectable_difference": self.detectable_now,
        }


def sample_size(
    diffs: npt.ArrayLike,
    *,
    effect: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
) -> SampleSize:
    """`effect` defaults to the pilot's observed mean difference (its size), or to
    DEFAULT_EFFECT when the pilot saw none. Raises ValueError when the pilot cannot tell."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or d.size < 2:
        raise ValueError("a pilot needs at least 2 queries scored for both runs")
    sd = float(d.std(ddof=1))
    if not sd > 0:
        raise ValueError(
            "the two runs score the same difference on every pilot query: the spread is 0, "
            "so no sample size follows from it (compare two different runs)"
        )
    observed = float(d.mean())
    if effect is not None:
        size, source = abs(effect), "given"
    elif abs(observed) > 0:
        size, source = abs(observed), "observed"
    else:
        size, source = DEFAULT_EFFECT, "default"
    if not (size > 0 and math.isfinite(size)):
        raise ValueError("the effect must be a non-zero number")
    n = queries_needed(size, sd, alpha=alpha, power=power)
    detectable = min_detectable_difference(int(d.size), sd, alpha=alpha, power=power)
    return SampleSize(int(d.size), observed, sd, size, source, power, alpha, n, detectable)


def sample_size_lines(result: SampleSize, metric: str) -> list[str]:
    how = {"given": "given", "observed": "the pilot's mean difference", "default": "default"}
    return [
        f"pilot      {result.pilot_queries} queries · {metric} · mean difference "
        f"{result.observed:+.4f} · sd of the differences {result.sd_diff:.4f}",
        f"effect     {result.effect:.4f} ({how[result.effect_from]}) · power {result.power:g} · "
        f"alpha {result.alpha:g} (two-sided)",
        f"needed     {result.queries_needed} queries",
        f"now        {result.pilot_queries} queries detect a difference of "
        f"{result.detectable_now:.4f} at that power",
    ]
