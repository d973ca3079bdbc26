"""Numbers on the agreement page: an undefined kappa reads "undefined", never "nan"."""

from __future__ import annotations

import math

from django import template

register = template.Library()


@register.filter
def stat(value: float | None, digits: int = 3) -> str:
    """A statistic to ``digits`` decimals; "undefined" for None or NaN."""
    if value is None or math.isnan(value):
        return "undefined"
    return f"{value:.{digits}f}"


@register.filter
def interval(ci: tuple[float, float] | list[float] | None, digits: int = 2) -> str:
    """ "[lo, hi]", or "" without an interval."""
    if not ci:
        return ""
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


@register.filter
def signed(value: float | None, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "—"
    return f"{value:+.{digits}f}"


@register.filter
def percent(value: float | None, digits: int = 0) -> str:
    if value is None or math.isnan(value):
        return "—"
    return f"{value:.{digits}%}"


@register.filter
def subtract(value: float | None, other: float | None) -> float | None:
    if value is None or other is None:
        return None
    return value - other


@register.filter
def count(value: int | None) -> str:
    """A count with thousands separated: 50,000."""
    return "—" if value is None else f"{value:,}"
