"""Claims on work units: who holds which query, taken and given back safely.

A claim is taken with `select_for_update(skip_locked=True)` on a small batch of open units
(PostgreSQL) and a compare-and-set update of the unit's `claims_taken`, which alone keeps SQLite
correct too. Idle claims expire lazily, when someone next claims in the same pool.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Project, Role
from assay.db import aware, placeholders
from pooling.models import Pool

from .assignment import Candidate, gold_due, gold_order, gold_query, pick
from .models import HOLDING, Claim, ClaimState, JudgingPolicy, WorkItem, WorkUnit

BATCH = 8  # open units locked per claim attempt: enough to choose a rotating pair from
CLAIM_ATTEMPTS = 20  # waits add up to under a second when every open unit is being claimed
# An answer refreshes its claim's `touched_at` at most this often (one write a minute keeps a
# claim alive as well as one per answer), so `touched_at` may lag the last answer by this much.
TOUCH_EVERY = timedelta(minutes=1)


class JudgingError(Exception):
    """A request the judging rules refuse; the message says why, in the annotator's words."""


class BadAnswer(JudgingError, ValueError):
    """The answer itself is malformed (HTTP 400)."""


class NotYours(JudgingError):
    """The item is not in the annotator's active claim, or the key was used elsewhere (409)."""


class NoSuchItem(JudgingError):
    """The item is not part of this pool (HTTP 404)."""


def policy_of(project: Project) -> JudgingPolicy:
    """The project's judging settings (the defaults when none were saved)."""
    return JudgingPolicy.objects.filter(project=project).first() or JudgingPolicy(project=project)


# --- claims --------------------------------------------------------------------------------


def claims_lock(*, pool: Pool, user: User) -> None:
    """Lock the person's claims in the pool until the transaction ends (PostgreSQL).

    An undo reads which answer is the latest before it writes: two undos of the same person
    at once (different keys, a double press, two tabs) would otherwise both read the same
    answer and both undo it. Locked, the second reads once the first has committed, and
    undoes the answer before.
    """
    if connection.features.has_select_for_update:  # SQLite has no row locks
        # Waiting (no SKIP LOCKED), in one order of ids so that two undos cannot deadlock.
        _rows(_CLAIM_IDS + " ORDER BY c.id FOR UPDATE", [pool.pk, user.pk])


def claim_active(*, pool: Pool, user: User) -> Claim | None:
    rows = _rows(
        _CLAIM + " WHERE c.pool_id = %s AND c.user_id = %s AND c.state = %s",
        [pool.pk, user.pk, ClaimState.ACTIVE.value],
    )
    return _claim(rows[0]) if rows else None


def claim_next(*, pool: Pool, user: User) -> Claim | None:
    """The user's active claim, or a newly taken one; None when nothing is open to them."""
    active = claim_active(pool=pool, user=user)
    if active is not None:
        return active
    try:
        return _claim_take(pool=pool, user=user)
    except IntegrityError:
        # Another request of the same person (a second tab) claimed first: use that claim.
        return claim_active(pool=pool, user=user)


@transaction.atomic
def _claim_take(*, pool: Pool, user: User) -> Claim | None:
    now = timezone.now()
    claims_expire(pool=pool, now=now)
    assigned = _take_assigned(pool, user, now)
    if assigned is not None:
        return assigned
    gold = _take_gold(pool, user, now)
    if gold is not None:
        return gold
    for attempt in range(CLAIM_ATTEMPTS):
        batch = _open_units(pool, user)
        if batch is None:
            return None
        if not batch:
            # Every open unit is locked by someone else's claim, which commits within
            # milliseconds: wait a little and look again rather than say "nothing left".
            time.sleep(min(0.002 * 2**attempt, 0.05))
            continue
        for unit in _in_rotation_order(batch, pool, user):
            if place_take(unit):
                return claim_hold(unit, user, now)
    return None


def _take_assigned(pool: Pool, user: User, now: datetime) -> Claim | None:
    """The oldest query a lead assigned to the user, made active. The rows are not locked, so
    one a lead released meanwhile (its place already given back) is left as it is."""
    where = " WHERE c.pool_id = %s AND c.user_id = %s AND c.state = %s"
    rows = _rows(
        _CLAIM + where + " ORDER BY c.claimed_at, c.id",
        [pool.pk, user.pk, ClaimState.ASSIGNED.value],
    )
    for row in rows:
        assigned = _claim(row)
        if claim_state_set(assigned, ClaimState.ACTIVE, now):
            return assigned
    return None


def _open_units(pool: Pool, user: User) -> list[WorkUnit] | None:
    """A batch of units with room, locked: the user's own expired ones first (resume their
    work), then units they never held, then units they released (back only when nothing else
    is left). None when there is nothing for them; [] when all of it is locked right now."""
    contended = False
    params = [pool.pk, user.pk, user.pk, pool.pk, user.pk]
    for tier in _TIERS:
        batch = _rows(_OPEN_UNITS.format(tier=tier) + _locked(), params)
        if batch:
            return [WorkUnit.from_db(connection.alias, _UNIT_FIELDS, row) for row in batch]
        contended = contended or bool(_rows(_ANY_UNIT.format(tier=tier), params))
    return [] if contended else None


# Plain SQL (PostgreSQL and SQLite): a claim runs these up to six times, and building them
# through the ORM cost several times what running them does.
_UNIT_FIELDS = ["id", "pool_id", "query_id", "position", "stratum", "judges_needed", "claims_taken"]
_MINE = "SELECT c.unit_id FROM judging_claim c WHERE c.pool_id = %s AND c.user_id = %s"
_TIERS = (
    f"u.id IN ({_MINE} AND c.state = '{ClaimState.EXPIRED.value}')",
    f"u.id NOT IN ({_MINE})",
    f"u.id IN ({_MINE} AND c.state = '{ClaimState.RELEASED.value}')",
)
# Someone else's gold check is nobody's work but theirs; and a query the person has had as a
# gold check never comes back to them as work (they have answered its gold pairs already).
_OPEN = (
    "FROM judging_workunit u WHERE u.pool_id = %s AND u.claims_taken < u.judges_needed"
    " AND (u.gold_for_id = %s OR u.gold_for_id IS NULL AND u.query_id NOT IN ("
    "SELECT g.query_id FROM judging_workunit g WHERE g.gold_for_id = %s))"
)
_OPEN_UNITS = (
    f"SELECT {', '.join('u.' + f for f in _UNIT_FIELDS)} {_OPEN} AND {{tier}}"
    f" ORDER BY u.position LIMIT {BATCH}"
)
_ANY_UNIT = f"SELECT 1 {_OPEN} AND {{tier}} LIMIT 1"


_CLAIM_IDS = "SELECT c.id FROM judging_claim c WHERE c.pool_id = %s AND c.user_id = %s"
_CLAIM_FIELDS = ["id", "pool_id", "unit_id", "user_id", "state", "claimed_at", "touched_at"]
_CLAIM = (
    f"SELECT {', '.join('c.' + f for f in _CLAIM_FIELDS)}, c.finished_at,"
    f" {', '.join('u.' + f for f in _UNIT_FIELDS)}"
    " FROM judging_claim c JOIN judging_workunit u ON u.id = c.unit_id"
)
_CLAIM_INSERT = (
    "INSERT INTO judging_claim (pool_id, unit_id, user_id, state, claimed_at, touched_at)"
    " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id"
)
_PLACE_TAKE = (
    "UPDATE judging_workunit SET claims_taken = claims_taken + 1"
    " WHERE id = %s AND claims_taken < judges_needed"
)
_IDLE_MINUTES = "SELECT claim_idle_minutes FROM judging_judgingpolicy WHERE project_id = %s"
IDLE_MINUTES = JudgingPolicy._meta.get_field("claim_idle_minutes").get_default()
_STALE = (
    "SELECT c.id, c.unit_id FROM judging_claim c"
    " WHERE c.pool_id = %s AND c.state = %s AND c.touched_at < %s"
)


def _claim(row: tuple[Any, ...]) -> Claim:
    """A claim row read by `_CLAIM`, with its unit."""
    width = len(_CLAIM_FIELDS) + 1
    values = [aware(value) for value in row[:width]]
    claim = Claim.from_db(connection.alias, [*_CLAIM_FIELDS, "finished_at"], values)
    claim.unit = WorkUnit.from_db(connection.alias, _UNIT_FIELDS, row[width:])
    return claim


def _locked(table: str = "u") -> str:
    # Lock only those rows (SQLite has no row locks: the compare-and-set keeps it correct).
    return (
        f" FOR UPDATE OF {table} SKIP LOCKED" if connection.features.has_select_for_update else ""
    )


def _rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _in_rotation_order(batch: list[WorkUnit], pool: Pool, user: User) -> list[WorkUnit]:
    half_held = [u.pk for u in batch if u.is_double and u.claims_taken > 0]
    if not half_held:
        return batch
    holders: dict[int, list[int]] = defaultdict(list)
    sql = _HOLDERS.format(units=placeholders(len(half_held)))
    for unit_id, other in _rows(sql, [*half_held, *_HOLDING_STATES, user.pk]):
        holders[unit_id].append(other)
    candidates = [Candidate(u.pk, u.position, tuple(holders.get(u.pk, ()))) for u in batch]
    by_id = {u.pk: u for u in batch}
    return [by_id[c.unit_id] for c in pick(candidates, _pairings(pool, user, holders))]


def _pairings(pool: Pool, user: User, holders: dict[int, list[int]]) -> dict[int, int]:
    """How many double units of the pool `user` shares with each of the other judges."""
    others = sorted({other for users in holders.values() for other in users})
    if not others:
        return {}
    sql = _PAIRINGS.format(others=placeholders(len(others)))
    params = [pool.pk, user.pk, *_HOLDING_STATES, *others, *_HOLDING_STATES]
    return {other: int(n) for other, n in _rows(sql, params)}


# Plain SQL, as `_rows`: a claim of a query someone already judges once runs both, and the ORM
# spent several milliseconds building them, about half of such a claim's time.
_HOLDING_STATES = [state.value for state in HOLDING]
_HOLDING_IN = placeholders(len(_HOLDING_STATES))
_HOLDERS = (
    "SELECT c.unit_id, c.user_id FROM judging_claim c WHERE c.unit_id IN ({units})"
    f" AND c.state IN ({_HOLDING_IN}) AND c.user_id <> %s"
)
_PAIRINGS = (
    "SELECT o.user_id, count(*) FROM judging_claim o WHERE o.unit_id IN ("
    "SELECT m.unit_id FROM judging_claim m WHERE m.pool_id = %s AND m.user_id = %s"
    f" AND m.state IN ({_HOLDING_IN})) AND o.user_id IN ({{others}})"
    f" AND o.state IN ({_HOLDING_IN}) GROUP BY o.user_id"
)


def place_take(unit: WorkUnit) -> bool:
    """Compare-and-set: take one place on the unit if one is still free."""
    with connection.cursor() as cursor:  # plain SQL, as `_rows`
        cursor.execute(_PLACE_TAKE, [unit.pk])
        return cursor.rowcount == 1


def place_free(unit_id: int) -> None:
    WorkUnit.objects.filter(pk=unit_id, claims_taken__gt=0).update(
        claims_taken=F("claims_taken") - 1
    )


def claim_hold(unit: WorkUnit, user: User, now: datetime, state: str = ClaimState.ACTIVE) -> Claim:
    rows = _rows(_CLAIM + " WHERE c.unit_id = %s AND c.user_id = %s", [unit.pk, user.pk])
    claim = _claim(rows[0]) if rows else None
    if claim is None:
        at = connection.ops.adapt_datetimefield_value(now)
        created = _rows(_CLAIM_INSERT, [unit.pool_id, unit.pk, user.pk, state, at, at])
        values = [created[0][0], unit.pool_id, unit.pk, user.pk, state, now, now, None]
        claim = Claim.from_db(connection.alias, [*_CLAIM_FIELDS, "finished_at"], values)
        claim.unit = unit
        return claim
    claim.claimed_at = now
    if not claim_state_set(claim, state, now):
        # Another request moved this row since it was read (as the insert above fails when
        # another request created it): the caller's transaction must not go on.
        raise IntegrityError(f"claim {claim.pk} changed while being taken")
    return claim


def claim_state_set(claim: Claim, state: str, now: datetime) -> bool:
    """Compare-and-set: move the claim from the state it was read in to `state`.

    False, and nothing written, when another request has changed its state since: a lead's
    release or an expiry must never be overwritten by a late answer (the query would be held
    twice, or `claims_taken` would count one place too few).
    """
    finished = now if state == ClaimState.DONE else None
    changed = Claim.objects.filter(pk=claim.pk, state=claim.state).update(
        state=state, claimed_at=claim.claimed_at, touched_at=now, finished_at=finished
    )
    if changed:
        claim.state, claim.touched_at, claim.finished_at = state, now, finished
    return changed == 1


@transaction.atomic
def claims_expire(*, pool: Pool, now: datetime | None = None) -> int:
    """Active claims idle for longer than the project's limit go back to the pool.

    "Idle" counts from the last answer, which may be up to TOUCH_EVERY later than the claim's
    `touched_at` (an answer refreshes it at most that often): a claim expires only once it has
    gone the limit plus TOUCH_EVERY without a touch, so that nobody who is still answering
    loses their query.
    """
    now = now or timezone.now()
    minutes = _rows(_IDLE_MINUTES, [pool.project_id])
    idle = timedelta(minutes=minutes[0][0] if minutes else IDLE_MINUTES)
    cutoff = now - idle - TOUCH_EVERY
    params = [pool.pk, ClaimState.ACTIVE.value, connection.ops.adapt_datetimefield_value(cutoff)]
    stale = _rows(_STALE + _locked("c"), params)
    expired = 0
    for pk, unit_id in stale:
        if Claim.objects.filter(pk=pk, state=ClaimState.ACTIVE).update(state=ClaimState.EXPIRED):
            place_free(unit_id)
            expired += 1
    return expired


@transaction.atomic
def claim_release(*, claim: Claim) -> Claim:
    """Give a query back (by its annotator or a lead); the judgments made on it stay."""
    claim = Claim.objects.select_for_update().get(pk=claim.pk)
    held = claim.state in (ClaimState.ACTIVE, ClaimState.ASSIGNED)
    if not (held and claim_state_set(claim, ClaimState.RELEASED, timezone.now())):
        raise JudgingError("only a query being worked on, or assigned, can be released")
    place_free(claim.unit_id)
    return claim


@transaction.atomic
def claim_reassign(*, claim: Claim, to: User) -> Claim:
    """Move a claim to another member: it becomes theirs, active at once if they hold no other
    active claim in the pool, else next in their queue. The first holder's judgments stay."""
    claim = Claim.objects.select_for_update().select_related("unit").get(pk=claim.pk)
    if claim.state not in (ClaimState.ACTIVE, ClaimState.ASSIGNED, ClaimState.EXPIRED):
        raise JudgingError("only a query being worked on, assigned or expired can be reassigned")
    if claim.unit.gold_for_id is not None:
        raise JudgingError("a gold check is its annotator's alone: it cannot be reassigned")
    if claim.user_id == to.pk:
        raise JudgingError(f"{to.username} already holds this query")
    theirs = Claim.objects.filter(unit=claim.unit, user=to).first()
    had_gold = WorkUnit.objects.filter(query_id=claim.unit.query_id, gold_for=to).exists()
    if had_gold or (theirs is not None and theirs.state in HOLDING):
        raise JudgingError(f"{to.username} has already judged or holds this query")
    now = timezone.now()
    if claim.state == ClaimState.EXPIRED and not place_take(claim.unit):
        raise JudgingError("this query has been taken by someone else since it expired")
    if claim.state != ClaimState.EXPIRED and not claim_state_set(claim, ClaimState.RELEASED, now):
        raise JudgingError("this query has changed hands meanwhile: reload the page")
    busy = Claim.objects.filter(pool_id=claim.pool_id, user=to, state=ClaimState.ACTIVE)
    state = ClaimState.ASSIGNED if busy.exists() else ClaimState.ACTIVE
    return claim_hold(claim.unit, to, now, state=state)


# --- gold checks ---------------------------------------------------------------------------
# A gold check is a query the person never judged, holding its gold pairs, made for them alone
# in the current pool when their share of gold falls behind (`assignment.gold_due`), and shown
# like any other query. Ordinary claims pay one cheap read for it (`_GOLD_GATE`); the counts
# are read only in projects with gold items, for annotators; the rest only when one is due.

GOLD_SHARE = JudgingPolicy._meta.get_field("gold_share").get_default()
_GOLD_GATE = (
    "SELECT COALESCE((SELECT y.gold_share FROM judging_judgingpolicy y WHERE y.project_id = %s),"
    " %s), EXISTS (SELECT 1 FROM annotation_membership m WHERE m.project_id = %s"
    " AND m.user_id = %s AND m.role = %s), EXISTS (SELECT 1 FROM judging_golditem g"
    " JOIN pooling_pair p ON p.id = g.pair_id JOIN annotation_query q ON q.id = p.query_id"
    " WHERE q.project_id = %s AND g.retired_at IS NULL)"
)
# Items received: the distinct pairs of every unit, in any pool of the project, the person
# holds or has held a claim on (whatever became of the claim); gold ones, those of gold units
# made for them. Distinct pairs, so that a query carried to a newer pool counts once.
_RECEIVED = (
    "SELECT c.user_id, count(DISTINCT CASE WHEN u.gold_for_id = c.user_id THEN w.pair_id END),"
    " count(DISTINCT w.pair_id) FROM judging_claim c JOIN pooling_pool pl ON pl.id = c.pool_id"
    " JOIN judging_workunit u ON u.id = c.unit_id JOIN judging_workitem w ON w.unit_id = u.id"
    " WHERE pl.project_id = %s{user} GROUP BY c.user_id"
)
# The person's own gold units of the pool with a free place (released, expired, or dropped by
# an undo): given back before a new one is made.
_OWN_GOLD = (
    f"SELECT {', '.join('u.' + f for f in _UNIT_FIELDS)} FROM judging_workunit u"
    " WHERE u.pool_id = %s AND u.gold_for_id = %s AND u.claims_taken < u.judges_needed"
    " ORDER BY u.position LIMIT 1"
)
# Active gold pairs of the queries the person has no judgment on, no claim on and no gold
# check of: every candidate query of a gold check, with its stratum and its gold pairs.
_GOLD_CANDIDATES = (
    "SELECT p.query_id, q.stratum, g.pair_id FROM judging_golditem g"
    " JOIN pooling_pair p ON p.id = g.pair_id JOIN annotation_query q ON q.id = p.query_id"
    " WHERE q.project_id = %s AND g.retired_at IS NULL"
    " AND NOT EXISTS (SELECT 1 FROM judging_judgment j JOIN pooling_pair jp ON jp.id = j.pair_id"
    "  WHERE jp.query_id = p.query_id AND j.user_id = %s)"
    " AND NOT EXISTS (SELECT 1 FROM judging_claim c JOIN judging_workunit cu ON cu.id = c.unit_id"
    "  WHERE cu.query_id = p.query_id AND c.user_id = %s)"
    " AND NOT EXISTS (SELECT 1 FROM judging_workunit gu"
    "  WHERE gu.query_id = p.query_id AND gu.gold_for_id = %s)"
)
_NEXT_POSITION = (
    "SELECT COALESCE(max(u.position), -1) + 1 FROM judging_workunit u WHERE u.pool_id = %s"
)


def gold_received(*, project_id: int, user_id: int | None = None) -> dict[int, tuple[int, int]]:
    """Per person (or only `user_id`): (gold items received, all items received) in the
    project's pools, as `assignment.gold_due` weighs them."""
    sql = _RECEIVED.format(user=" AND c.user_id = %s" if user_id is not None else "")
    params = [project_id] if user_id is None else [project_id, user_id]
    return {user: (int(gold), int(every)) for user, gold, every in _rows(sql, params)}


def _take_gold(pool: Pool, user: User, now: datetime) -> Claim | None:
    """A gold check claimed for `user` when one is due; None otherwise (or when no query is
    left that they could be checked on)."""
    project_id = pool.project_id
    gate = [project_id, GOLD_SHARE, project_id, user.pk, Role.ANNOTATOR.value, project_id]
    share, annotator, any_gold = _rows(_GOLD_GATE, gate)[0]
    if not (annotator and any_gold and share > 0):
        return None
    gold, received = gold_received(project_id=project_id, user_id=user.pk).get(user.pk, (0, 0))
    if not gold_due(gold=gold, received=received, share=share):
        return None
    own = _rows(_OWN_GOLD + _locked(), [pool.pk, user.pk])
    if own:
        mine = WorkUnit.from_db(connection.alias, _UNIT_FIELDS, own[0])
        return claim_hold(mine, user, now) if place_take(mine) else None
    made = _gold_unit_create(pool, user, gold)
    return claim_hold(made, user, now) if made is not None else None


def _gold_unit_create(pool: Pool, user: User, gold: int) -> WorkUnit | None:
    """A new gold unit for `user` in the pool, its place already taken; None when no query is
    left to check them on."""
    rows = _rows(_GOLD_CANDIDATES, [pool.project_id, user.pk, user.pk, user.pk])
    pairs: dict[int, list[int]] = defaultdict(list)
    strata: dict[int, str] = {}
    for query_id, stratum, pair_id in rows:
        pairs[query_id].append(pair_id)
        strata[query_id] = stratum or ""
    if not pairs:
        return None
    query_id = gold_query(list(pairs), user_id=user.pk, gold=gold)
    if connection.features.has_select_for_update:
        # Gold units are the only ones made after a pool is built: two made at once in the
        # same pool would take the same position. Not FOR UPDATE: that would also wait for
        # every claim being inserted in the pool (their foreign key checks lock the pool row).
        _rows("SELECT id FROM pooling_pool WHERE id = %s FOR NO KEY UPDATE", [pool.pk])
    position = int(_rows(_NEXT_POSITION, [pool.pk])[0][0])
    unit = WorkUnit.objects.create(
        pool=pool,
        query_id=query_id,
        position=position,
        stratum=strata[query_id],
        judges_needed=1,
        claims_taken=1,
        gold_for=user,
    )
    order = gold_order(pairs[query_id], user_id=user.pk, query_id=query_id)
    WorkItem.objects.bulk_create(
        WorkItem(unit=unit, pair_id=pair_id, position=i) for i, pair_id in enumerate(order)
    )
    return unit
