"""A strata definition from the options people type: the commands' flags and the upload form.

``sample_queries`` and ``import_log`` take ``--cuts``, ``--failures``,
``--reformulation-window`` and ``--mask-pii``; the upload form has the same four fields.
One parser for all three, so that the same text means the same definition everywhere.

Pure core: no Django.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from assay import options as bounded

from .strata import DefinitionError, FailureRule, StrataDefinition

__all__ = [
    "DEFINITION_OPTIONS",
    "FAILURE_KEYS",
    "add_definition_arguments",
    "definition_from_options",
    "describe_definition",
    "parse_cuts",
    "parse_failure_rule",
    "requested_definition",
]

FAILURE_KEYS = ("zero_result_rate", "reformulation_rate", "abandonment_rate", "min_frequency")
# The options that carry a value (``mask_pii`` is a switch).
DEFINITION_OPTIONS = ("cuts", "failures", "reformulation_window")


def add_statistics_argument(parser: argparse.ArgumentParser) -> None:
    """``--statistics``, for every command that reads a log or a statistics file."""
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="the file holds per-query statistics computed elsewhere (docs/warehouse.md), "
        "not raw log lines; a file with those columns is read as such even without it",
    )


def add_definition_arguments(parser: argparse.ArgumentParser) -> None:
    """The four definition flags, for every command that builds a strata definition."""
    parser.add_argument(
        "--cuts",
        help="head and torso cut points on the cumulative share of traffic, "
        "e.g. 0.5,0.8 or 50,80 (default: thirds)",
    )
    parser.add_argument(
        "--failures",
        help="known-failure thresholds, e.g. zero_result_rate=0.5,reformulation_rate=0.5,"
        "abandonment_rate=0.8,min_frequency=2 (a rate may be 'off')",
    )
    parser.add_argument(
        "--reformulation-window",
        type=bounded.real_number(0, 365 * 86_400),
        help="seconds within which the next query counts as a reformulation (default 300)",
    )
    parser.add_argument(
        "--mask-pii",
        action="store_true",
        help="mask personal data in queries instead of excluding those queries",
    )


def definition_from_options(
    *,
    cuts: str | None = None,
    failures: str | None = None,
    reformulation_window: float | str | None = None,
    mask_pii: bool = False,
) -> StrataDefinition:
    """The definition the options ask for; an option left out (None or blank) keeps its default.

    Raises :class:`DefinitionError` with a message naming the option at fault.
    """
    settings: dict[str, Any] = {"pii": "mask" if mask_pii else "exclude"}
    if cuts is not None and cuts.strip():
        settings["head_share"], settings["torso_share"] = parse_cuts(cuts)
    if failures is not None and failures.strip():
        settings["failures"] = parse_failure_rule(failures)
    if reformulation_window is not None and str(reformulation_window).strip():
        settings["reformulation_window"] = _seconds(reformulation_window)
    return StrataDefinition(**settings)


def requested_definition(
    *,
    cuts: str | None = None,
    failures: str | None = None,
    reformulation_window: float | str | None = None,
    mask_pii: bool = False,
) -> StrataDefinition | None:
    """As :func:`definition_from_options`, but None when the options ask for nothing at all
    (every one left out or blank): the project's definition, or the defaults, then apply."""
    values = (cuts, failures, reformulation_window)
    if not mask_pii and all(value is None or not str(value).strip() for value in values):
        return None
    return definition_from_options(
        cuts=cuts, failures=failures, reformulation_window=reformulation_window, mask_pii=mask_pii
    )


def parse_cuts(text: str) -> tuple[float, float]:
    """``0.5,0.8`` (fractions) or ``50,80`` (percentages) into (head_share, torso_share).

    Percentages are recognised by a value above 1; a value of 1 or less (other than 0) next
    to one is refused rather than guessed: "0.5,1.5" could mean 0.5% or 50%.
    """
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise DefinitionError(f"cuts must be two numbers (head, torso), got {text!r}") from None
    if len(values) != 2 or not all(math.isfinite(value) for value in values):
        raise DefinitionError(f"cuts must be two numbers (head, torso), got {text!r}")
    if any(value > 1 for value in values):
        if any(0 < value <= 1 for value in values):
            raise DefinitionError(
                f"cuts mix fractions and percentages ({text!r}): give both as fractions "
                "(0.5,0.8) or both as percentages (50,80)"
            )
        values = [value / 100 for value in values]
    return values[0], values[1]


def parse_failure_rule(text: str) -> FailureRule:
    """``zero_result_rate=0.5,abandonment_rate=off,min_frequency=3``; unnamed keys keep defaults."""
    settings: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in FAILURE_KEYS:
            raise DefinitionError(
                f"unknown failure setting {name!r}; use {', '.join(FAILURE_KEYS)}"
            )
        settings[name] = _failure_value(name, value.strip())
    return FailureRule(**settings)


def _failure_value(name: str, value: str) -> int | float | None:
    try:
        if name == "min_frequency":
            return int(value)
        return None if value == "off" else float(value)
    except ValueError:
        raise DefinitionError(f"failure setting {name} needs a number, got {value!r}") from None


def _seconds(value: float | str) -> float:
    try:
        return float(value)
    except ValueError:
        raise DefinitionError(
            f"reformulation_window must be a number of seconds, got {value!r}"
        ) from None


def describe_definition(definition: StrataDefinition) -> str:
    """One sentence a person can check a definition by (pages and command output)."""
    rule = definition.failures
    signals = [
        f"{label} >= {value:g}"
        for label, value in (
            ("zero results", rule.zero_result_rate),
            ("reformulated", rule.reformulation_rate),
            ("abandoned", rule.abandonment_rate),
        )
        if value is not None
    ]
    failures = " or ".join(signals) if signals else "off"
    return (
        f"head <= {definition.head_share:.1%} and head+torso <= {definition.torso_share:.1%} "
        f"of traffic; known failures: {failures} (seen at least {rule.min_frequency} times); "
        f"reformulation window {definition.reformulation_window:g} s; personal data "
        f"{'masked' if definition.pii == 'mask' else 'excluded'}"
    )
