"""The noise floor that disagreement between judges puts under system comparisons.

Each run of the project is scored by nDCG@10 on the double-judged queries twice: under the
first judge's labels and under the second's (or A's and B's, as the agreement page is
filtered). For every two runs, the gap between them under A's labels and the same gap under
B's differ by as much as the choice of judge moves it; the largest such difference is the
floor: a gap between two systems smaller than it can flip with who judged.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.cache import cache

from agreement.dashboard import (
    CACHE_SECONDS,
    RELEVANCE_THRESHOLD,
    cache_key,
    double_judged_qrels,
    judgments_version,
)
from agreement.double import Filters
from agreement.kappa import Qrels
from annotation.models import Project
from formats.trec import RunRow
from pooling.models import Run
from pooling.services import runs_ranked

from .measures import Contract, evaluate

MEASURE = "ndcg@10"
DEPTH = 10  # nDCG@10 reads no deeper: only the top ten of each run is fetched


@dataclass(frozen=True)
class RunScore:
    name: str
    under_a: float  # mean nDCG@10 under A's labels (NaN: no query counted)
    under_b: float


@dataclass(frozen=True)
class Gap:
    """Two runs' difference (first minus second) under each judge's labels."""

    first: str
    second: str
    under_a: float
    under_b: float

    @property
    def moved(self) -> float:
        return abs(self.under_a - self.under_b)

    @property
    def flipped(self) -> bool:
        return self.under_a * self.under_b < 0


@dataclass(frozen=True)
class NoiseFloor:
    runs: int
    queries: int  # double-judged queries in view
    scores: tuple[RunScore, ...]
    gaps: tuple[Gap, ...]  # the largest move first
    contract: Contract

    @property
    def floor(self) -> float | None:
        return self.gaps[0].moved if self.gaps else None

    @property
    def flips(self) -> int:
        return sum(gap.flipped for gap in self.gaps)


def noise_floor(*, project: Project, filters: Filters) -> NoiseFloor:
    """Score the project's runs under both judges' labels of the double-judged pairs in view
    (cached like the agreement dashboard, and by the project's runs: runs are immutable, so
    their newest id and number say when they changed). With fewer than two runs, or no
    double-judged pair, there is nothing to compare: the floor is None. Raises
    `agreement.dashboard.DashboardError` for a person who graded nothing here."""
    version = judgments_version(project)
    runs = list(project.runs.order_by("name"))
    key = cache_key("noise", version, filters, sorted(run.pk for run in runs))
    found = cache.get(key)
    if isinstance(found, NoiseFloor):
        return found
    a_qrels, b_qrels = double_judged_qrels(project=project, filters=filters, version=version)
    floor = _floor(runs, a_qrels, b_qrels)
    cache.set(key, floor, CACHE_SECONDS)
    return floor


def _floor(runs: Sequence[Run], a_qrels: Qrels, b_qrels: Qrels) -> NoiseFloor:
    contract = Contract(rel_threshold=RELEVANCE_THRESHOLD)
    if len(runs) < 2 or not a_qrels:
        return NoiseFloor(len(runs), len(a_qrels), (), (), contract)
    ranked = runs_ranked(runs=runs, qids=sorted(a_qrels), depth=DEPTH)
    scores = tuple(
        RunScore(
            run.name,
            _mean(a_qrels, ranked[run.pk], contract),
            _mean(b_qrels, ranked[run.pk], contract),
        )
        for run in runs
    )
    gaps = [
        Gap(x.name, y.name, x.under_a - y.under_a, x.under_b - y.under_b)
        for x, y in itertools.combinations(scores, 2)
    ]
    defined = [gap for gap in gaps if not math.isnan(gap.moved)]
    defined.sort(key=lambda gap: gap.moved, reverse=True)
    return NoiseFloor(len(runs), len(a_qrels), scores, tuple(defined), contract)


def _mean(qrels: Qrels, rows: dict[str, list[RunRow]], contract: Contract) -> float:
    return evaluate(qrels, rows, [MEASURE], contract).mean[MEASURE]
