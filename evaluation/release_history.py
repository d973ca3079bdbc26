"""Every run's scores under every release, for the history table: a run never changes, so
a move between two releases is the judgments'."""

from __future__ import annotations

from dataclasses import dataclass

from annotation.models import Project
from pooling.models import Run

from .models import Release, RunEvaluation
from .rescore import STORED_MEASURES


class HistoryError(ValueError):
    """A history that cannot be shown as asked."""


@dataclass(frozen=True)
class HistoryCell:
    value: float | None
    change: float | None  # from the previous release that scored the run
    beyond_noise: bool  # the change is wider than half the run's interval under this release


@dataclass(frozen=True)
class HistoryRow:
    run: Run
    cells: list[HistoryCell | None]  # one per release; None: not scored under it


@dataclass(frozen=True)
class History:
    """Each run's value of one measure under each release. A run never changes, so a move
    between two releases is the judgments'; when every run moves alike, the labels moved
    (suspect the harness), while a new system shows up as a new row."""

    metric: str
    releases: list[Release]
    rows: list[HistoryRow]
    mean_change: list[float | None]  # per release: the runs' mean change from the previous


def release_history(*, project: Project, metric: str = "ndcg@10") -> History:
    if metric not in STORED_MEASURES:
        raise HistoryError(f"metric must be one of {', '.join(STORED_MEASURES)}")
    releases = list(Release.objects.filter(project=project).order_by("number"))
    rows = RunEvaluation.objects.filter(release__project=project).values_list(
        "release_id", "run_id", "means", "intervals"
    )
    found = {
        (r, run): (means.get(metric), intervals.get(metric)) for r, run, means, intervals in rows
    }
    history_rows = []
    for run in Run.objects.filter(project=project).order_by("name"):
        cells: list[HistoryCell | None] = []
        previous: float | None = None
        for release in releases:
            if (release.pk, run.pk) not in found:
                cells.append(None)
                continue
            value, interval = found[(release.pk, run.pk)]
            change = None if value is None or previous is None else value - previous
            half = (interval[1] - interval[0]) / 2 if interval and None not in interval else None
            beyond = change is not None and half is not None and abs(change) > half
            cells.append(HistoryCell(value, change, beyond))
            previous = value if value is not None else previous
        history_rows.append(HistoryRow(run, cells))
    mean_change = []
    for i in range(len(releases)):
        cells = [row.cells[i] for row in history_rows]
        defined = [c.change for c in cells if c is not None and c.change is not None]
        mean_change.append(sum(defined) / len(defined) if defined else None)
    return History(metric, releases, history_rows, mean_change)
