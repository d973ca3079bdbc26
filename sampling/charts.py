"""A rank-frequency chart on log-log axes as inline SVG. Pure: numbers in, markup out.

Server-rendered so that the page needs no chart library and works offline; every value written
into the markup is a number or a fixed label, never user text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

WIDTH, HEIGHT, PAD = 640, 280, 44


def _scale(value: float, low: float, high: float, start: float, end: float) -> float:
    if high <= low:
        return (start + end) / 2
    return start + (math.log10(value) - low) / (high - low) * (end - start)


def rank_frequency_svg(points: Sequence[Sequence[int]], cut_ranks: Sequence[int]) -> str:
    """Frequency against rank, both logarithmic, with the head/torso and torso/tail cuts."""
    if not points:
        return ""
    ranks = [max(int(p[0]), 1) for p in points]
    freqs = [max(int(p[1]), 1) for p in points]
    x0, x1 = 0.0, math.log10(max(ranks))
    y0, y1 = 0.0, math.log10(max(freqs))

    def xy(rank: int, freq: int) -> tuple[float, float]:
        x = _scale(rank, x0, x1, PAD, WIDTH - 12)
        y = _scale(freq, y0, y1, HEIGHT - PAD, 12)
        return x, y

    path = " ".join(
        f"{x:.1f},{y:.1f}" for x, y in (xy(r, f) for r, f in zip(ranks, freqs, strict=True))
    )
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="rank-frequency chart, log-log">',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - 12}" y2="{HEIGHT - PAD}" '
        'class="axis"/>',
        f'<line x1="{PAD}" y1="12" x2="{PAD}" y2="{HEIGHT - PAD}" class="axis"/>',
        f'<polyline points="{path}" class="series"/>',
    ]
    for label, rank in zip(("head | torso", "torso | tail"), cut_ranks, strict=False):
        if rank >= 1:
            x, _ = xy(rank, 1)
            parts.append(
                f'<line x1="{x:.1f}" y1="12" x2="{x:.1f}" y2="{HEIGHT - PAD}" class="cut"/>'
            )
            parts.append(
                f'<text x="{x + 4:.1f}" y="24" class="cut-label">{label} (rank {rank})</text>'
            )
    parts += [_ticks(x0, x1, True), _ticks(y0, y1, False)]
    parts.append(
        f'<text x="{WIDTH / 2:.0f}" y="{HEIGHT - 6}" class="axis-label">query rank (log)</text>'
    )
    parts.append(
        f'<text x="10" y="{HEIGHT / 2:.0f}" class="axis-label" '
        f'transform="rotate(-90 10 {HEIGHT / 2:.0f})">frequency (log)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _ticks(low: float, high: float, horizontal: bool) -> str:
    marks = []
    for power in range(math.floor(high) + 1):
        value = 10**power
        if horizontal:
            x = _scale(value, low, high, PAD, WIDTH - 12)
            marks.append(f'<text x="{x:.1f}" y="{HEIGHT - PAD + 14}" class="tick">{value:g}</text>')
        else:
            y = _scale(value, low, high, HEIGHT - PAD, 12)
            marks.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" class="tick y">{value:g}</text>')
    return "".join(marks)
