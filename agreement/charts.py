"""Geometry of the agreement page's two charts, drawn as inline SVG by templates.

Pure: numbers and labels in, coordinates out. The templates write the markup, so that every
label (a person's name, a stratum) goes through Django's escaping; nothing here builds markup.
No chart library and no network: the page works offline and under the strict CSP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# --------------------------------------------------------------------------- heatmap

HEAT_MARGIN = 34  # room for the grade labels on the left and at the top
SMALL_MARGIN = 18
SMALL_CELL = 30


@dataclass(frozen=True)
class HeatCell:
    x: float
    y: float
    cx: float  # the centre, where the count is written
    cy: float
    row: int  # A's grade
    column: int  # B's grade
    count: int
    share: float  # of all pairs in the table
    opacity: float  # colour strength: the share, relative to the largest cell
    dark: bool  # a dark cell takes light text
    on_diagonal: bool


@dataclass(frozen=True)
class Heatmap:
    size: float  # one cell's side
    margin: float  # room for the grade labels, left and top
    width: float
    height: float
    cells: tuple[HeatCell, ...]
    labels: tuple[tuple[float, int], ...]  # (centre offset, grade) for both axes
    total: int
    counts_written: bool


def heatmap(confusion: Sequence[Sequence[int]], labels: Sequence[int], cell: float = 44) -> Heatmap:
    """A confusion table as coloured squares: rows are A's grades, columns B's; colour by the
    cell's share of all pairs (scaled to the largest cell, so a small table still shows its
    shape). Cells under 30 units are drawn small: no counts written in them."""
    margin = HEAT_MARGIN if cell >= SMALL_CELL else SMALL_MARGIN
    total = sum(sum(row) for row in confusion)
    largest = max((v for row in confusion for v in row), default=0) or 1
    cells = []
    for i, row in enumerate(confusion):
        for j, count in enumerate(row):
            opacity = count / largest
            cells.append(
                HeatCell(
                    x=margin + j * cell,
                    y=margin + i * cell,
                    cx=margin + (j + 0.5) * cell,
                    cy=margin + (i + 0.5) * cell,
                    row=labels[i],
                    column=labels[j],
                    count=count,
                    share=count / total if total else 0.0,
                    opacity=round(0.08 + 0.92 * opacity, 3) if count else 0.0,
                    dark=opacity > 0.55,
                    on_diagonal=i == j,
                )
            )
    side = margin + len(labels) * cell
    centres = tuple((margin + (k + 0.5) * cell, label) for k, label in enumerate(labels))
    return Heatmap(
        cell, margin, side + 2, side + 2, tuple(cells), centres, total, cell >= SMALL_CELL
    )


# --------------------------------------------------------------------------- kappa plot

PLOT_WIDTH = 720
LABEL_WIDTH = 190  # the row labels on the left
RIGHT = 20
ROW_HEIGHT = 22
TOP = 30  # the axis ticks above the rows
BOTTOM = 14


@dataclass(frozen=True)
class PlotInput:
    """One row to plot: its group (overall, stratum, protocol, week), label, kappa (NaN when
    undefined), interval (None without one) and n."""

    group: str
    label: str
    kappa: float
    ci: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class PlotRow:
    y: float
    group: str
    label: str
    n: int
    kappa: float
    ci: tuple[float, float] | None
    x: float | None  # None: kappa undefined
    lo: float | None
    hi: float | None
    first_of_group: bool


@dataclass(frozen=True)
class KappaPlot:
    width: int
    height: float
    left: float
    right: float
    top: float
    bottom: float
    rows: tuple[PlotRow, ...]
    zero: float
    threshold: float
    threshold_x: float
    ticks: tuple[tuple[float, str], ...]


def kappa_plot(rows: Sequence[PlotInput], threshold: float) -> KappaPlot:
    """Kappa with its interval, one row each, on a shared axis from the lowest value shown
    (at most 0) to 1, with lines at 0 and at the flag threshold."""
    lows = [r.ci[0] for r in rows if r.ci] + [r.kappa for r in rows if not math.isnan(r.kappa)]
    low = min([0.0, threshold, *lows])
    low = max(-1.0, math.floor(low * 5) / 5)  # a tick (multiple of 0.2) at or below
    left, right = float(LABEL_WIDTH), float(PLOT_WIDTH - RIGHT)

    def x(value: float) -> float:
        return round(left + (value - low) / (1.0 - low) * (right - left), 1)

    plotted = []
    previous = None
    for k, r in enumerate(rows):
        defined = not math.isnan(r.kappa)
        plotted.append(
            PlotRow(
                y=TOP + (k + 0.5) * ROW_HEIGHT,
                group=r.group,
                label=r.label,
                n=r.n,
                kappa=r.kappa,
                ci=r.ci,
                x=x(r.kappa) if defined else None,
                lo=x(r.ci[0]) if r.ci else None,
                hi=x(r.ci[1]) if r.ci else None,
                first_of_group=r.group != previous,
            )
        )
        previous = r.group
    steps = round((1.0 - low) / 0.2)
    ticks = tuple((x(low + 0.2 * i), f"{low + 0.2 * i:.1f}") for i in range(steps + 1))
    bottom = TOP + len(rows) * ROW_HEIGHT
    return KappaPlot(
        width=PLOT_WIDTH,
        height=bottom + BOTTOM,
        left=left,
        right=right,
        top=TOP - 6,
        bottom=bottom,
        rows=tuple(plotted),
        zero=x(0.0),
        threshold=threshold,
        threshold_x=x(threshold),
        ticks=ticks,
    )
