"""The geometry of the gold page's chart, accuracy per person per ISO week, as plain numbers:
the template draws it as inline SVG (no script, nothing to load). No Django here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

WIDTH, HEIGHT = 640, 220
# Margins: room for the y labels, and for the week labels centred on the ends.
LEFT, RIGHT, TOP, BOTTOM = 56, 40, 12, 36
# Distinguishable on white and for the common colour blindnesses (Okabe and Ito).
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    label: str  # what a hover shows: "alice 2026-W49: 4/5"


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    points: str  # the polyline's "x,y x,y ..."
    dots: tuple[Dot, ...]


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: float  # x of the plot's right edge
    top: int
    bottom: float  # y of the plot's bottom edge (accuracy 0)
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    series: tuple[Series, ...]


def accuracy_chart(
    people: Sequence[tuple[str, Mapping[str, tuple[int, int]]]],
) -> Chart | None:
    """One line per person through their weekly accuracy (correct / checks per ISO week), on a
    time axis (a week without checks keeps its place); None when nobody has a check yet."""
    weeks = sorted({week for _, by_week in people for week in by_week})
    if not weeks:
        return None
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    offset = {week: (_monday(week) - _monday(weeks[0])).days // 7 for week in weeks}
    span = offset[weeks[-1]]
    x_of = {
        week: LEFT + (offset[week] / span * (right - LEFT) if span else (right - LEFT) / 2)
        for week in weeks
    }

    def y_of(rate: float) -> float:
        return round(bottom - rate * (bottom - TOP), 1)

    series = []
    for n, (name, by_week) in enumerate(people):
        dots = tuple(
            Dot(round(x_of[w], 1), y_of(c / t), f"{name} {w}: {c}/{t}")
            for w, (c, t) in sorted(by_week.items())
            if t
        )
        points = " ".join(f"{d.x},{d.y}" for d in dots)
        series.append(Series(name, COLOURS[n % len(COLOURS)], points, dots))
    x_ticks = tuple(Tick(round(x_of[w], 1), w) for w in _thinned(weeks))
    y_ticks = tuple(Tick(y_of(r), f"{round(r * 100)} %") for r in (0.0, 0.25, 0.5, 0.75, 1.0))
    return Chart(WIDTH, HEIGHT, LEFT, right, TOP, bottom, x_ticks, y_ticks, tuple(series))


def _monday(week: str) -> date:
    """The Monday of an ISO week written ``2026-W49``."""
    year, number = week.split("-W")
    return date.fromisocalendar(int(year), int(number), 1)


def _thinned(weeks: Sequence[str], most: int = 8) -> list[str]:
    """At most `most` week labels, evenly picked, the last always among them."""
    if len(weeks) <= most:
        return list(weeks)
    every = -(-len(weeks) // most)
    return [w for i, w in enumerate(weeks) if i % every == 0 or i == len(weeks) - 1]
