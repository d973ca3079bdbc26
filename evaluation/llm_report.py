"""A stored calibration report (the `llm_judge calibrate --format json` dict) as the lines of
its page: the verdict in plain words, the gate's conditions, the kappa comparison to plot.

Pure: a dict in, records out. The report is read with `.get` throughout, because reports
stored by an earlier release may lack a key a later one adds; a missing figure reads "not
measured", never an error. Nothing here builds markup: the template escapes every string.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agreement.charts import PlotInput

# What a lead can do about each failed condition, by its code (the `reasons` of the JSON).
ADVICE = {
    "too_few": "Have more pairs judged by two people (raise the double-judged share of the "
    "judging settings and build a pool), then calibrate again.",
    "ceiling": "The judge agrees with a person less well than a second person does: improve "
    "the prompt or the protocol's definitions, or try a stronger model.",
    "floor": "The judge's agreement is too low to trust whatever the humans' own agreement: "
    "improve the prompt or try a stronger model.",
    "leniency": "The judge grades systematically higher or lower than the humans: tighten the "
    "grade definitions in the prompt, or use the judge only to pre-filter.",
    "recall": "The judge misses too many relevant pairs: as a pre-filter it would hide them "
    "from the humans; improve the prompt before relying on it.",
    "parse_failures": "Too many answers could not be read: check that the endpoint supports "
    "structured output (a JSON schema), or raise the timeout.",
    "ranking": "Under the judge's labels the systems rank differently than under the humans': "
    "its labels would change which system wins.",
}

CONDITION_WORDS = {
    "too_few": "enough calibrated pairs",
    "ceiling": "κ(LLM, humans) near the humans' own κ",
    "floor": "κ(LLM, humans) above the floor",
    "leniency": "no more lenient or strict than the humans",
    "recall": "recall of the relevant grades",
    "parse_failures": "answers that could be read",
    "ranking": "systems ranked as under the humans' labels (Kendall's τ)",
}


# The report's keys as people read them (a key not listed is shown with spaces for "_").
NAMES = {
    "mean_diff": "mean grade difference (judge − humans)",
    "positive_rate_llm": "the judge's positive rate",
    "positive_rate_human": "the humans' positive rate",
    "ratio": "positive rate ratio (judge / humans)",
    "pairs": "pairs",
    "n": "comparisons",
    "kappa": "κ",
    "kappa_linear": "κ, linear weights",
    "kappa_quadratic": "κ, quadratic weights",
    "kappa_binary": "κ, binary",
}


@dataclass(frozen=True)
class Condition:
    code: str
    label: str
    value: str
    bound: str
    passed: bool
    measured: bool
    advice: str


@dataclass(frozen=True)
class Figure:
    """One named figure of the report, formatted."""

    name: str
    value: str


@dataclass(frozen=True)
class ReportView:
    passed: bool
    n: int | None
    conditions: tuple[Condition, ...]
    failed: tuple[Condition, ...]
    plot_rows: tuple[PlotInput, ...]
    bar: float | None  # the kappa the judge had to reach (ceiling or floor, the higher)
    kappas: tuple[Figure, ...]
    leniency: tuple[Figure, ...]
    recall: tuple[Figure, ...]
    parse_failures: tuple[Figure, ...]
    retest: tuple[Figure, ...]
    human_only: tuple[Figure, ...]
    ranking: tuple[tuple[str, str, str], ...]  # run, score under the humans', under the judge's
    tau: str
    confusion: list[list[int]] | None
    labels: tuple[int, ...]
    notes: tuple[str, ...]


def report_view(report: Mapping[str, Any]) -> ReportView:
    conditions = tuple(_condition(row) for row in report.get("conditions") or ())
    if not conditions:  # an older report: only the codes of what failed
        conditions = tuple(_from_code(code) for code in report.get("reasons") or ())
    confusion = report.get("confusion")
    labels = tuple(int(label) for label in report.get("labels") or (0, 1, 2, 3))
    return ReportView(
        passed=bool(report.get("passed")),
        n=report.get("n"),
        conditions=conditions,
        # a condition that could not be measured fails too (the ranking alone is exempt,
        # and is then reported passed): the gate never licenses on a missing figure
        failed=tuple(c for c in conditions if not c.passed),
        plot_rows=_plot_rows(report),
        bar=_bar(report),
        kappas=_kappas(report),
        leniency=figures(report.get("leniency")),
        recall=_recall(report.get("per_grade_recall"), report.get("recall"), report),
        parse_failures=figures(report.get("parse_failures"), name="share"),
        retest=_retest(report),
        human_only=figures(report.get("human_only")),
        ranking=_ranking(report.get("ranking")),
        tau=number(report.get("tau")),
        confusion=confusion if _is_table(confusion, len(labels)) else None,
        labels=labels,
        notes=tuple(str(note) for note in report.get("notes") or ()),
    )


def _condition(row: Mapping[str, Any]) -> Condition:
    code = str(row.get("code", ""))
    measured = bool(row.get("measured", row.get("value") is not None))
    return Condition(
        code=code,
        label=str(row.get("label") or CONDITION_WORDS.get(code, code)),
        value=number(row.get("value")) if measured else "not measured",
        bound=number(row.get("bound")),
        passed=bool(row.get("passed")),
        measured=measured,
        advice=ADVICE.get(code, ""),
    )


def _from_code(code: str) -> Condition:
    return Condition(
        code, CONDITION_WORDS.get(code, code), "", "", False, True, ADVICE.get(code, "")
    )


def _plot_rows(report: Mapping[str, Any]) -> tuple[PlotInput, ...]:
    """The judge against the humans, each person, the consensus; then the humans against
    each other (the ceiling the judge is measured by)."""
    ci = report.get("ci") or {}
    n = int(report.get("n") or 0)
    rows = [PlotInput("LLM", "vs humans", _kappa(report.get("kappa")), _ci(ci, "kappa"), n)]
    consensus = report.get("consensus")
    if isinstance(consensus, Mapping) and "kappa" in consensus:
        rows.append(_row("LLM", "vs consensus", consensus, n))
    for name, entry in _people(report.get("per_human")):
        rows.append(_row("LLM", f"vs {name}", entry, n))
    rows.append(
        PlotInput(
            "humans",
            "ceiling: each other",
            _kappa(report.get("human_kappa")),
            _ci(ci, "human_kappa"),
            n,
        )
    )
    return tuple(rows)


def _row(group: str, label: str, entry: Mapping[str, Any], n: int) -> PlotInput:
    ci = entry.get("ci")
    if isinstance(ci, Mapping):
        ci = ci.get("kappa")
    return PlotInput(group, label, _kappa(entry.get("kappa")), _pair(ci), int(entry.get("n") or n))


def _people(per_human: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """per_human as (name, figures): a mapping by name, or a list of rows naming the person."""
    if isinstance(per_human, Mapping):
        return [(str(k), v) for k, v in per_human.items() if isinstance(v, Mapping)]
    if isinstance(per_human, Sequence) and not isinstance(per_human, str):
        return [
            (str(row.get("name") or row.get("user") or row.get("username") or "?"), row)
            for row in per_human
            if isinstance(row, Mapping)
        ]
    return []


def _bar(report: Mapping[str, Any]) -> float | None:
    """The kappa the judge had to reach: the humans' kappa less the margin, or the floor,
    whichever is higher (the floor alone when the humans' kappa is unknown)."""
    thresholds = report.get("thresholds") or {}
    floor, margin = thresholds.get("kappa_floor"), thresholds.get("ceiling_margin")
    human = report.get("human_kappa")
    bars = [v for v in (floor,) if isinstance(v, int | float)]
    if isinstance(human, int | float) and isinstance(margin, int | float):
        bars.append(human - margin)
    return float(max(bars)) if bars else None


def _kappas(report: Mapping[str, Any]) -> tuple[Figure, ...]:
    names = (
        ("kappa", "Cohen's κ, four grades"),
        ("kappa_linear", "κ, linear weights"),
        ("kappa_quadratic", "κ, quadratic weights"),
        ("kappa_binary", "κ, binary at the relevance threshold"),
        ("human_kappa", "the humans' κ on the same pairs"),
    )
    ci = report.get("ci") or {}
    return tuple(Figure(name, _with_ci(report.get(key), _ci(ci, key))) for key, name in names)


def _recall(value: Any, relevant: Any, report: Mapping[str, Any]) -> tuple[Figure, ...]:
    found: list[Figure] = []
    if relevant is not None:
        threshold = report.get(
            "threshold", (report.get("thresholds") or {}).get("relevance_threshold")
        )
        found.append(Figure(f"the relevant class (grade ≥ {threshold})", number(relevant)))
    if isinstance(value, Mapping):
        found += [Figure(f"grade {k}", number(v)) for k, v in sorted(value.items())]
    elif isinstance(value, Sequence) and not isinstance(value, str):
        found += [Figure(f"grade {k}", number(v)) for k, v in enumerate(value)]
    return tuple(found)


def _retest(report: Mapping[str, Any]) -> tuple[Figure, ...]:
    value = report.get("retest")
    if isinstance(value, Mapping):
        return figures(value)
    if value is None:
        return ()
    return (Figure(f"κ of the same {report.get('retest_n', '')} pairs asked twice", number(value)),)


def _ranking(value: Any) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(value, Mapping):
        return ()
    human, llm = value.get("human") or {}, value.get("llm") or {}
    return tuple((str(run), number(score), number(llm.get(run))) for run, score in human.items())


def figures(value: Any, name: str = "value") -> tuple[Figure, ...]:
    """A figure, or a flat mapping of figures, as named lines (nested values written out)."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple(Figure(_name(k), number(v)) for k, v in value.items())
    return (Figure(name, number(value)),)


def _name(key: Any) -> str:
    return NAMES.get(str(key), str(key).replace("_", " "))


def number(value: Any, digits: int = 3) -> str:
    """A figure for people: floats to ``digits`` decimals, "not measured" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ", ".join(number(v, digits) for v in value) + "]"
    if isinstance(value, Mapping):
        return ", ".join(f"{_name(k)} {number(v, digits)}" for k, v in value.items())
    return str(value)


def _kappa(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _ci(ci: Any, key: str) -> tuple[float, float] | None:
    return _pair(ci.get(key)) if isinstance(ci, Mapping) else None


def _pair(value: Any) -> tuple[float, float] | None:
    if (
        isinstance(value, Sequence)
        and len(value) == 2
        and all(isinstance(v, int | float) and not math.isnan(v) for v in value)
    ):
        return (float(value[0]), float(value[1]))
    return None


def _with_ci(value: Any, ci: tuple[float, float] | None) -> str:
    text = number(value)
    return f"{text} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and value is not None else text


def _is_table(value: Any, size: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == size
        and all(isinstance(row, list) and len(row) == size for row in value)
    )
