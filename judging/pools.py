"""Growing the set: a new pool only adds, and only pairs nobody has graded become work.

A pool selects pairs (`pooling.services.pool_select`); judgments belong to the pairs, so every
pair selected again keeps its judgments. Opening a pool for judging makes its work units:

- a pair is work while fewer people have graded it than its query needs (two for a query judged
  blind by two people, one otherwise); grades are the people's current answers, so an undone
  grade does not count and an answer of "unsure" or "skip" leaves the pair for someone else;
- the work of the previous pool that is still undone comes along (the new pool becomes the one
  annotators work on, and nothing pooled before may fall out of reach), its claims with it: a
  query someone is working on stays theirs;
- the share of double-judged queries holds per stratum across pools: a query judged twice before
  stays so, and new queries (no grade yet) are drawn until each stratum has its share again.

`pool_plan` works all of this out without writing (what the lead's preview shows);
`pool_open` writes it, in one transaction.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from annotation.models import Project
from assay.db import bulk_insert, rows_for_ids
from jobs.models import Job
from jobs.services import job_create
from pooling.models import Pair, Pool, PoolScope, Run
from pooling.services import (
    POOL_BUILD,
    PoolingError,
    Selection,
    current_pool,
    display_order,
    existing_pairs,
    new_seed,
    pool_create,
    pool_select,
)

from .answers import gold_check_sql
from .assignment import derived_seed, double_count, draw_double
from .models import Claim, ClaimState, Judgment, Kind, WorkItem, WorkUnit
from .services_claims import claim_hold, claim_state_set, place_free, place_take, policy_of

Key = tuple[int, int]  # (query pk, document pk): a pair, whether or not it exists yet
SECONDS_IF_UNKNOWN = 30.0  # per judgment, for the estimate before anyone has judged


class PoolChanged(PoolingError):
    """Another pool was built since the preview the lead confirmed."""


@dataclass(frozen=True)
class PlannedUnit:
    query_id: int
    stratum: str
    judges_needed: int
    keys: list[Key]  # in display order
    carried: int  # how many of them were still work in the previous pool


@dataclass(frozen=True)
class PoolPlan:
    """What opening a pool would do, for the preview and for `pool_open`."""

    selection: Selection
    seed: int
    existing: dict[Key, int]  # pairs already held by some pool -> pair pk
    carried: dict[Key, int]  # the previous pool's unfinished work -> pair pk
    graders: dict[Key, int]  # people whose current answer is a grade, per graded pair
    units: list[PlannedUnit]
    previous: Pool | None
    double_before: int  # queries judged twice in earlier pools
    double_drawn: int  # new queries drawn to be judged twice
    seconds_per_judgment: float

    @property
    def selected(self) -> int:
        return len(self.selection.entries)

    @property
    def added(self) -> int:
        return sum(1 for key in self.selection.pair_keys() if key not in self.existing)

    @property
    def judged_before(self) -> int:
        return sum(1 for key in self.selection.pair_keys() if key in self.graders)

    @property
    def to_judge(self) -> int:
        return sum(len(unit.keys) for unit in self.units)

    @property
    def carried_count(self) -> int:
        return sum(unit.carried for unit in self.units)

    @property
    def judgments_needed(self) -> int:
        """Grades still to give: per work pair, the judges its query needs minus its graders."""
        return sum(
            unit.judges_needed - self.graders.get(key, 0)
            for unit in self.units
            for key in unit.keys
        )

    @property
    def hours(self) -> float:
        return self.judgments_needed * self.seconds_per_judgment / 3600

    @property
    def queries(self) -> int:
        return len(self.units)


def pool_plan(
    *,
    project: Project,
    runs: Sequence[Run],
    depth: int,
    seed: int,
    scope: str = PoolScope.ALL,
    skip_missing: bool = False,
) -> PoolPlan:
    """What a pool of `runs` at `depth` would add and make work, read but not written."""
    selection = pool_select(
        project=project, runs=runs, depth=depth, scope=scope, skip_missing=skip_missing
    )
    previous = current_pool(project)
    carried = _open_work(previous) if previous is not None else {}
    started = _started_queries(previous) if previous is not None else set()
    queries = set(selection.query_ids.values()) | {q for q, _ in carried}
    existing = existing_pairs(set(selection.query_ids.values()))
    graders = graders_of(queries)
    screened = screened_out(queries)
    strata = dict(project.queries.values_list("pk", "stratum"))
    double_before = _double_queries(project)
    work = _work(selection, seed, carried, started)
    drawn = _draw(project, selection, work, graders, double_before, strata, seed)
    double = double_before | drawn
    units = []
    for query, keys in work:
        # A pair is work while it has fewer graders than its query needs (known only now
        # that the doubles are drawn); a query left with no such pair gets no unit.
        needed = 2 if query in double else 1
        # A pair an LLM judge screened out (below the pre-filter threshold, not an audit
        # pair) is no human's work.
        kept = [key for key in keys if graders.get(key, 0) < needed and key not in screened]
        if kept:
            from_before = sum(1 for key in kept if key in carried)
            units.append(PlannedUnit(query, strata.get(query) or "", needed, kept, from_before))
    return PoolPlan(
        selection=selection,
        seed=seed,
        existing=existing,
        carried=carried,
        graders=graders,
        units=units,
        previous=previous,
        double_before=len(double_before),
        double_drawn=len(drawn),
        seconds_per_judgment=_seconds_per_judgment(project),
    )


def _open_work(pool: Pool) -> dict[Key, int]:
    """The work items of the pool's unfinished units (fewer finished claims than judges
    needed) as (query, document) -> their pair pk, in the pool's order. Finished units are
    left out unread: a large pool is mostly finished when the next one is built. Gold checks
    are nobody's work: their unanswered pairs lapse with the pool."""
    sql = (
        "SELECT p.query_id, p.document_id, p.id FROM judging_workitem w"
        " JOIN judging_workunit u ON u.id = w.unit_id JOIN pooling_pair p ON p.id = w.pair_id"
        " WHERE u.pool_id = %s AND u.gold_for_id IS NULL"
        " AND u.judges_needed > (SELECT count(*) FROM judging_claim c"
        " WHERE c.unit_id = u.id AND c.state = %s) ORDER BY u.position, w.position"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [pool.pk, ClaimState.DONE.value])
        return {(q, d): pk for q, d, pk in cursor.fetchall()}


# A grade counts while it is its judge's latest row on the pair (no later undo or other answer)
# and is not a gold check (which is no label: `answers.current_answers` leaves it out too).
_GRADERS = (
    "SELECT p.query_id, p.document_id, count(DISTINCT j.user_id)"
    " FROM judging_judgment j JOIN pooling_pair p ON p.id = j.pair_id"
    " WHERE p.query_id IN ({ids}) AND j.kind = %s AND NOT EXISTS ("
    "SELECT 1 FROM judging_judgment l WHERE l.user_id = j.user_id AND l.pair_id = j.pair_id"
    f" AND l.id > j.id) AND NOT {gold_check_sql('j')} GROUP BY p.query_id, p.document_id"
)


def graders_of(query_ids: Iterable[int]) -> dict[Key, int]:
    """For every pair of the queries that someone's current answer grades: how many people."""
    rows = rows_for_ids(_GRADERS, query_ids, [Kind.GRADE.value])
    return {(q, d): int(n) for q, d, n in rows}


_SCREENED = (
    "SELECT DISTINCT p.query_id, p.document_id FROM judging_screening s"
    " JOIN pooling_pair p ON p.id = s.pair_id WHERE p.query_id IN ({ids}) AND NOT s.audit"
)


def screened_out(query_ids: Iterable[int]) -> set[Key]:
    """The pairs of the queries that some LLM judge version screened out of human work."""
    return {(q, d) for q, d in rows_for_ids(_SCREENED, query_ids)}


def _double_queries(project: Project) -> set[int]:
    """Queries some earlier pool gave two judges."""
    units = WorkUnit.objects.filter(pool__project=project, judges_needed=2)
    return set(units.values_list("query_id", flat=True).distinct())


def _started_queries(pool: Pool) -> set[int]:
    """Queries of the pool somebody has claimed as work (whatever became of the claim)."""
    claims = Claim.objects.filter(pool=pool, unit__gold_for=None)
    return set(claims.values_list("unit__query_id", flat=True))


def _work(
    selection: Selection,
    seed: int,
    carried: dict[Key, int],
    started: set[int],
) -> list[tuple[int, list[Key]]]:
    """Per query the pool could make work of: (query, its pairs in display order), the
    previous pool's unfinished work and this pool's selection together.

    Queries someone started in the previous pool come first, in its order (started work is
    finished first); then the others, new and carried alike, in this pool's seeded order (the
    carried ones shuffled in among the new, so that neither kind waits behind the other).
    Which of the pairs are work is decided once the doubles are known (`pool_plan`).
    """
    q, d = selection.query_ids, selection.document_ids
    fresh: dict[int, list[Key]] = defaultdict(list)
    for entry in display_order(selection.entries, seed):
        fresh[q[entry.qid]].append((q[entry.qid], d[entry.docid]))
    old: dict[int, list[Key]] = defaultdict(list)
    for key in carried:
        old[key[0]].append(key)
    first = [query for query in old if query in started]
    untouched = [query for query in old if query not in started]
    rest = untouched + [query for query in fresh if query not in old]
    if untouched:  # they mix in among the new ones
        rest.sort()
        random.Random(derived_seed(seed, "units")).shuffle(rest)
    work = []
    for query in [*first, *rest]:
        keys = list(dict.fromkeys([*old.get(query, []), *fresh.get(query, [])]))
        if old.get(query) and fresh.get(query):
            # Mixed, the order would tell the new (deeper) documents apart: shuffle them.
            keys.sort()
            random.Random(derived_seed(seed, f"items/{query}")).shuffle(keys)
        work.append((query, keys))
    return work


def _draw(
    project: Project,
    selection: Selection,
    work: list[tuple[int, list[Key]]],
    graders: dict[Key, int],
    double_before: set[int],
    strata: dict[int, str],
    seed: int,
) -> set[int]:
    """New queries to judge twice, so that each stratum holds its share of double-judged queries
    over every query pooled so far (earlier doubles count). Only queries nobody has graded any
    pair of are drawn: a query's judged pairs are never reopened for a second judge."""
    share = policy_of(project).double_share
    pairs = Pair.objects.filter(query__project=project)
    pooled = set(pairs.values_list("query_id", flat=True).distinct())
    pooled |= set(selection.query_ids.values())
    graded_queries = {query for query, _ in graders}
    size: dict[str, int] = defaultdict(int)
    have: dict[str, int] = defaultdict(int)
    for query in pooled:
        size[strata.get(query) or ""] += 1
        have[strata.get(query) or ""] += query in double_before
    candidates: dict[str, list[int]] = defaultdict(list)
    for query, _keys in work:
        if query not in double_before and query not in graded_queries:
            candidates[strata.get(query) or ""].append(query)
    wanted = {s: max(0, double_count(size[s], share) - have[s]) for s in candidates}
    return draw_double(candidates, wanted, seed)


def _seconds_per_judgment(project: Project) -> float:
    spent = list(
        Judgment.objects.filter(pair__query__project=project, kind=Kind.GRADE)
        .order_by("-pk")
        .values_list("seconds_spent", flat=True)[:5000]
    )
    return statistics.median(spent) if spent else SECONDS_IF_UNKNOWN


# --- opening a pool ------------------------------------------------------------------------


@transaction.atomic
def pool_open(
    *,
    project: Project,
    runs: Sequence[Run],
    depth: int,
    seed: int | None = None,
    skip_missing: bool = False,
    scope: str = PoolScope.ALL,
    user: User | None = None,
) -> Pool:
    """Build a pool of `runs` and open it for judging (see the module's rules).

    The pool becomes the project's current one, so its work units are created in the same
    transaction: annotators never see a current pool with nothing to claim. The project row is
    locked first: two builds at once run one after the other, each planned on what the other
    built.
    """
    project_lock(project)
    seed = seed if seed is not None else new_seed()
    plan = pool_plan(
        project=project, runs=runs, depth=depth, seed=seed, scope=scope, skip_missing=skip_missing
    )
    return pool_write(plan, project=project, runs=runs, depth=depth, scope=scope, user=user)


def project_lock(project: Project) -> None:
    """Hold the project's row until the transaction ends (a no-op on SQLite)."""
    Project.objects.select_for_update().filter(pk=project.pk).exists()


@transaction.atomic
def pool_write(
    plan: PoolPlan,
    *,
    project: Project,
    runs: Sequence[Run],
    depth: int,
    scope: str,
    user: User | None,
) -> Pool:
    pool, pairs = pool_create(
        project=project,
        runs=runs,
        selection=plan.selection,
        depth=depth,
        seed=plan.seed,
        scope=scope,
        user=user,
        known=plan.existing,
    )
    units = _units_write(pool, plan, plan.carried | pairs)
    _claims_carry(pool, plan.previous, units)
    pool.selected, pool.added = plan.selected, plan.added
    pool.judged_before, pool.to_judge = plan.judged_before, plan.to_judge
    pool.save(update_fields=["selected", "added", "judged_before", "to_judge"])
    return pool


def _units_write(pool: Pool, plan: PoolPlan, pairs: dict[Key, int]) -> dict[int, WorkUnit]:
    """The plan's units and their items; returns query pk -> unit."""
    columns = ["pool_id", "query_id", "position", "stratum", "judges_needed", "claims_taken"]
    rows = [
        (pool.pk, u.query_id, position, u.stratum, u.judges_needed, 0)
        for position, u in enumerate(plan.units)
    ]
    bulk_insert(WorkUnit, columns, rows)
    units = {unit.query_id: unit for unit in WorkUnit.objects.filter(pool=pool)}
    items = (
        (units[u.query_id].pk, pairs[key], position)
        for position, (u, key) in enumerate((u, key) for u in plan.units for key in u.keys)
    )
    bulk_insert(WorkItem, ["unit_id", "pair_id", "position"], items)
    return units


def _claims_carry(pool: Pool, previous: Pool | None, units: dict[int, WorkUnit]) -> None:
    """Queries held in the previous pool (active or assigned) stay with their holders: the
    claim moves, in its state, to the query's unit in the new pool (a person holds at most one
    active claim per pool, so the new pool has one at most too). A query with no work left
    lets its claim go as well. A gold check is never carried: it stays as it is in the old
    pool, and its unanswered pairs lapse."""
    if previous is None:
        return
    # Locked in the order of their ids, as an undo locks a person's claims, so that the two
    # cannot deadlock; then moved oldest first.
    held = (ClaimState.ACTIVE, ClaimState.ASSIGNED)
    locked = list(
        Claim.objects.select_for_update(of=("self",))  # the claims only, not their units
        .select_related("unit", "user")
        .filter(pool=previous, state__in=held, unit__gold_for=None)
        .order_by("pk")
    )
    now = timezone.now()
    for claim in sorted(locked, key=lambda c: (c.claimed_at, c.pk)):
        state = claim.state
        if not claim_state_set(claim, ClaimState.MOVED, now):
            continue  # answered to the end, released or expired meanwhile: left as it is
        place_free(claim.unit_id)
        unit = units.get(claim.unit.query_id)
        if unit is not None and place_take(unit):
            claim_hold(unit, claim.user, now, state=state)


# --- building in the background -------------------------------------------------------------


def pool_build_create(
    *,
    project: Project,
    run_ids: Sequence[int],
    depth: int,
    seed: int,
    scope: str = PoolScope.ALL,
    skip_missing: bool = False,
    after: int | None = None,
    check_after: bool = False,
    user: User | None = None,
) -> Job:
    """The queued job that builds a pool and opens it (`judging.tasks.pool_build_job`);
    publish it with `jobs.services.job_enqueue` once committed. With `check_after`, `after` is
    the pool that was current when the lead saw the preview (None: no pool yet): if another has
    been built since, the job refuses."""
    params: dict[str, object] = {
        "run_ids": list(run_ids),
        "depth": depth,
        "seed": seed,
        "scope": scope,
        "skip_missing": skip_missing,
    }
    if check_after:
        params["after"] = after
    return job_create(
        project=project,
        kind=POOL_BUILD,
        handler="judging.tasks.pool_build_job",
        params=params,
        user=user,
    )


@transaction.atomic
def pool_open_once(
    *,
    project_id: int,
    run_ids: Sequence[int],
    depth: int,
    seed: int,
    scope: str = PoolScope.ALL,
    skip_missing: bool = False,
    after: int | None = None,
    user: User | None = None,
    check_after: bool = False,
) -> Pool:
    """`pool_open`, idempotent: a pool with the same project, depth, seed, scope and runs built
    after `after` is reused (a restarted pool-build job finds the pool its earlier attempt
    built).

    The project row is locked first, so that two builds at once run one after the other: the
    second then finds either its own pool (a redelivery) or another one newer than the preview
    it was confirmed on, and refuses (PoolChanged) rather than add to work it was not shown.
    """
    project = Project.objects.get(pk=project_id)
    project_lock(project)
    runs = list(Run.objects.filter(project=project, pk__in=run_ids).order_by("name"))
    if len(runs) != len(set(run_ids)):
        raise PoolingError("some of the runs asked for are not this project's")
    existing = project.pools.filter(depth=depth, seed=seed, scope=scope, pk__gt=after or 0)
    for pool in existing.order_by("pk").prefetch_related("runs"):
        if {r.pk for r in pool.runs.all()} == {r.pk for r in runs}:
            return pool
    latest = current_pool(project)
    if check_after and (latest.pk if latest else None) != after:
        assert latest is not None
        who = latest.created_by.username if latest.created_by else "someone"
        raise PoolChanged(
            f"{who} built pool #{latest.pk} after you looked at the preview; nothing was "
            "built: look at the new preview (it counts their pool) and confirm again"
        )
    return pool_open(
        project=project,
        runs=runs,
        depth=depth,
        seed=seed,
        scope=scope,
        skip_missing=skip_missing,
        user=user,
    )
