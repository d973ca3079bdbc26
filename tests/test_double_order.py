"""Blind double-judging: the pool's order of queries must not tell which ones are judged twice.

Each pool is built through `pool_open`, as the web page and `build_pool` build it, with seeds
0..N-1; the positions of the double-judged queries in the display order are then pooled over
all the seeds. The seeds are fixed, so these tests cannot flake; the tolerances are several
standard deviations wide all the same, so that they hold for any other seeds too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from annotation.models import Project
from annotation.services import project_create
from formats.trec import RunRow
from judging.models import WorkUnit
from judging.services import pool_open
from pooling.models import Pair, Pool, Run
from pooling.services import run_create

pytestmark = pytest.mark.django_db


def project_of(strata: dict[str, int]) -> tuple[Project, list[Run]]:
    project = project_create(slug="blind", name="Blind")
    project.documents.create(docid="d0", title="T", text="text")
    qids: list[str] = []
    for stratum, size in strata.items():
        for _ in range(size):
            qid = f"q{len(qids):04d}"
            project.queries.create(qid=qid, text=f"query {qid}", stratum=stratum)
            qids.append(qid)
    ranked = {qid: [RunRow(qid, "d0", 1, 1.0, "r")] for qid in qids}
    return project, [run_create(project=project, name="r", ranked=ranked)]


def double_positions(pool: Pool) -> tuple[list[float], int]:
    """Where the doubles stand in the order, as fractions in [0, 1), and how many units."""
    units = list(WorkUnit.objects.filter(pool=pool).order_by("position"))
    n = len(units)
    return [u.position / n for u in units if u.judges_needed == 2], n


def spread_evenly(positions: Sequence[float]) -> bool:
    """Each fifth of the order holds 20 % of the doubles, within 5 standard deviations of a
    fifth's share over this many doubles (sqrt(0.2 x 0.8 / n): 1 point for 1,600 doubles)."""
    fifths = [0] * 5
    for position in positions:
        fifths[int(position * 5)] += 1
    tolerance = 5 * math.sqrt(0.2 * 0.8 / len(positions))
    return all(abs(count / len(positions) - 0.2) < tolerance for count in fifths)


def positions_over_seeds(strata: dict[str, int], seeds: int) -> list[float]:
    project, runs = project_of(strata)
    positions: list[float] = []
    for seed in range(seeds):
        # Pooled afresh each time: a second pool of the same runs would only add to the first.
        Pool.objects.filter(project=project).delete()
        Pair.objects.filter(query__project=project).delete()
        pool = pool_open(project=project, runs=runs, depth=1, seed=seed)
        found, n = double_positions(pool)
        assert len(found) == sum(round(0.2 * size + 0.01) for size in strata.values())
        assert n == sum(strata.values())
        positions += found
    return positions


def test_the_doubles_are_spread_through_the_order_of_one_stratum() -> None:
    # 200 seeds x 8 doubles of 40 queries. Before, the doubles were the last fifth of the
    # order in 200 of 200 seeds.
    assert spread_evenly(positions_over_seeds({"": 40}, seeds=200))


@pytest.mark.parametrize(
    "strata",
    [
        {"": 300},  # before: 73 % of the doubles in the last fifth
        {"head": 60, "torso": 90, "tail": 150},
    ],
)
def test_the_doubles_are_spread_through_the_order_of_many_queries(strata: dict[str, int]) -> None:
    # 20 seeds x 60 doubles of 300 queries.
    assert spread_evenly(positions_over_seeds(strata, seeds=20))


def test_the_same_seed_builds_the_same_pool_and_the_same_doubles() -> None:
    project, runs = project_of({"head": 10, "tail": 20})
    first = pool_open(project=project, runs=runs, depth=1, seed=11)
    again = pool_open(project=project, runs=runs, depth=1, seed=11)
    order = [
        list(p.items.order_by("position").values_list("pair__query_id", flat=True))
        for p in (first, again)
    ]
    doubles = [
        set(WorkUnit.objects.filter(pool=p, judges_needed=2).values_list("query_id", flat=True))
        for p in (first, again)
    ]
    assert order[0] == order[1] and doubles[0] == doubles[1]
    assert len(doubles[0]) == 2 + 4
