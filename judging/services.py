"""Judging: work units, recording answers, and what the judging page shows.

An annotator holds at most one active claim per pool (see `services_claims`): one query, whose
pooled documents they judge in the pool's random order. Finishing a query hands them the next
one. Answers are append-only rows, each with an idempotency key.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import (
    Case,
    Exists,
    Max,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.utils import timezone

from annotation.models import Project, ProtocolAck, ProtocolVersion
from annotation.protocol import DiffLine, diff
from pooling.models import Pool
from pooling.services import current_pool as current_pool  # judging's views read it here

from .models import Claim, ClaimState, JudgingPolicy, Judgment, Kind, WorkItem
from .pools import pool_build_create as pool_build_create  # re-exported: views, tests
from .pools import pool_open as pool_open
from .pools import pool_open_once as pool_open_once
from .reports import judging_summary as judging_summary  # the project page's table
from .services_claims import (
    TOUCH_EVERY,
    BadAnswer,
    JudgingError,
    NoSuchItem,
    NotYours,
    _rows,
    claim_active,
    claim_next,
    claim_state_set,
    claims_lock,
    place_free,
    place_take,
)

MAX_SECONDS = 3600.0
MAX_NOTE = 2000
# A year: the database column and the expiry's date arithmetic (now - limit) both break on
# limits far beyond it, and a claim can be released by hand long before.
MAX_IDLE_MINUTES = 365 * 24 * 60
HANDLED = (Kind.GRADE, Kind.UNSURE, Kind.SKIP)


class ProtocolChanged(JudgingError):
    """A new protocol version must be acknowledged before judging on (409)."""

    def __init__(self, change: ProtocolChange) -> None:
        super().__init__(
            f"protocol version {change.current.number} has been published: "
            "read what changed and acknowledge it before judging on"
        )
        self.change = change


# --- the state of one query for one annotator ----------------------------------------------


@dataclass(frozen=True)
class UnitState:
    """Where an annotator stands on their claimed query: its items (pair pks, the pairs the
    unit holds as work) in display order and their current answer kind on each (None: not
    judged yet, or undone), and how many queries of the pool they have finished."""

    claim: Claim
    items: list[tuple[int, str | None]]
    finished: int = 0

    @property
    def done(self) -> int:
        return sum(1 for _, kind in self.items if kind in HANDLED)

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def next_item_id(self) -> int | None:
        return next((pk for pk, kind in self.items if kind not in HANDLED), None)

    @property
    def item_ids(self) -> set[int]:
        return {pk for pk, _ in self.items}

    def kind_of(self, item_id: int) -> str | None:
        """The current answer on the item (None: none yet, or not an item of this query)."""
        return next((kind for pk, kind in self.items if pk == item_id), None)

    def answered(self, item_id: int, kind: str) -> UnitState:
        """The state once `kind` is stored for the item."""
        items = [(pk, kind if pk == item_id else now) for pk, now in self.items]
        return UnitState(self.claim, items, self.finished)


def unit_state(*, claim: Claim) -> UnitState:
    """The items of the claim's unit in display order with the holder's current answer on
    each (their latest row on the pair, in whichever pool it was made), and how many queries of
    the pool they finished: one statement."""
    params = [claim.pool_id, claim.user_id, claim.user_id, claim.unit_id]
    rows = _rows(_ITEMS, params)
    latest: dict[int, str | None] = {}
    for pk, kind, _finished in rows:
        latest[pk] = kind  # a dict keeps each item where it first came: in display order
    if not rows:  # a query without items: never built so, but counted all the same
        return UnitState(claim, [], finished_count(pool_id=claim.pool_id, user_id=claim.user_id))
    return UnitState(claim, list(latest.items()), int(rows[0][2]))


# Plain SQL, as the claim reads in `services_claims`: every answer runs this, and the ORM spent
# about 2 ms building and compiling it (a join through a FilteredRelation, and a separate
# count) against 0.2 ms to send it; it returns plain values, never model objects.
# A person's finished queries in a pool: their claims in the state "done".
_FINISHED = (
    "SELECT count(*) FROM judging_claim d"
    f" WHERE d.pool_id = %s AND d.user_id = %s AND d.state = '{ClaimState.DONE.value}'"
)
# One row per item and answer of the holder's (LEFT JOIN), oldest answer first: the last row of
# an item is its current answer. PostgreSQL reads a person's few rows through
# `judgment_latest`, or, once they have many, looks up each of the ~20 pairs by index.
_ITEMS = (
    f"SELECT w.pair_id, j.kind, ({_FINISHED}) FROM judging_workitem w"
    " LEFT JOIN judging_judgment j ON j.pair_id = w.pair_id AND j.user_id = %s"
    " WHERE w.unit_id = %s ORDER BY w.position, j.id"
)


def finished_count(*, pool_id: int, user_id: int) -> int:
    """How many queries of the pool the person has finished."""
    return int(_rows(_FINISHED, [pool_id, user_id])[0][0])


def _finish_if_complete(state: UnitState) -> bool:
    """Close the claim when its last item is answered, unless a lead released it or it expired
    since it was read: the answers stay, but the query is no longer this person's to close."""
    if state.next_item_id is not None or state.claim.state != ClaimState.ACTIVE:
        return False
    return claim_state_set(state.claim, ClaimState.DONE, timezone.now())


# --- protocol acknowledgement --------------------------------------------------------------


@dataclass(frozen=True)
class ProtocolChange:
    """A version the annotator has not acknowledged, and what changed since the last they saw."""

    seen: ProtocolVersion | None
    current: ProtocolVersion
    lines: list[DiffLine] = field(default_factory=list)


def protocol_gate(
    *, project: Project, user: User
) -> tuple[ProtocolVersion | None, ProtocolChange | None]:
    """The project's current protocol version, and the change `user` must acknowledge before
    judging on, if any.

    Only people who judged under an earlier version need to: a newcomer reads the whole
    current protocol anyway. Under the first version that is one read; after it, one more.
    """
    current = project.current_protocol()
    if current is None or current.number == 1 or not _must_acknowledge(current, user):
        return current, None
    return current, _change_since(project, user, current)


def _must_acknowledge(current: ProtocolVersion, user: User) -> bool:
    """Not acknowledged, and some of the user's judgments in the project are under an earlier
    version: one read (a CASE stops at the first check that settles it)."""
    acked = ProtocolAck.objects.filter(version=OuterRef("pk"), user=user)
    earlier = Judgment.objects.filter(
        user=user, protocol__project=OuterRef("project"), protocol__number__lt=OuterRef("number")
    )
    must = Case(When(Exists(acked), then=Value(False)), default=Exists(earlier))
    rows = ProtocolVersion.objects.filter(pk=current.pk).values_list(must, flat=True)
    return bool(rows[0]) if rows else False


def _change_since(project: Project, user: User, current: ProtocolVersion) -> ProtocolChange:
    """What changed since the last version `user` judged under or acknowledged."""
    earlier = Judgment.objects.filter(
        user=user, protocol__project=project, protocol__number__lt=current.number
    )
    acked = ProtocolAck.objects.filter(
        user=user, version__project=project, version__number__lt=current.number
    )
    numbers = list(
        earlier.order_by("-protocol__number").values_list("protocol__number", flat=True)[:1]
    )
    numbers += list(acked.values_list("version__number", flat=True))
    seen = project.protocols.filter(number=max(numbers)).first()
    return ProtocolChange(seen, current, diff(seen.text if seen else "", current.text))


# --- answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the annotator sent for one item."""

    kind: str
    grade: int | None = None
    note: str = ""
    seconds: float = 0.0

    @classmethod
    def parse(cls, kind: str, grade: str | int | None, note: str, seconds: str | float) -> Answer:
        """Validate raw form or API values; raises BadAnswer with a message to show."""
        if kind not in Kind.values:
            raise BadAnswer("kind must be grade, unsure, skip or undo")
        value = _grade(grade) if kind == Kind.GRADE else None
        note = (note or "").strip()
        if len(note) > MAX_NOTE:  # refused, not cut: the stored note is what was sent or nothing
            raise BadAnswer(f"the note is too long: at most {MAX_NOTE} characters")
        if "\x00" in note:  # PostgreSQL's text cannot hold it: refused, not a server error
            raise BadAnswer("the note cannot contain NUL characters")
        if kind == Kind.SKIP and not note:
            raise BadAnswer("say why you skip this item (for example: the document is broken)")
        return cls(kind=kind, grade=value, note=note, seconds=_seconds(seconds))


def _seconds(raw: str | float) -> float:
    try:
        value = float(raw or 0)
    except (TypeError, ValueError) as error:
        raise BadAnswer("seconds must be a number") from error
    # float() accepts "nan" and "inf": NaN would pass every comparison below (and the
    # database's check) and poison the leads' medians; neither is a time anyone spent.
    if not math.isfinite(value):
        raise BadAnswer("seconds must be a finite number")
    return min(max(value, 0.0), MAX_SECONDS)


def _grade(raw: str | int | None) -> int:
    try:
        value = int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        raise BadAnswer("grade must be 0, 1, 2 or 3") from error
    if value not in (0, 1, 2, 3):
        raise BadAnswer("grade must be 0, 1, 2 or 3")
    return value


@dataclass(frozen=True)
class Submitted:
    judgment: Judgment
    created: bool  # False: the key was already stored, nothing new was written
    # What the submission already read, so that the next screen need not read it again.
    protocol: ProtocolVersion | None = None
    state: UnitState | None = None


def judgment_submit(
    *, pool: Pool, user: User, item_id: int, answer: Answer, key: uuid.UUID
) -> Submitted:
    """Store one answer for an item of the user's active claim.

    The same key sent again for the same item (a double click, a retry, a flaky connection)
    returns the stored judgment and writes nothing, whatever the second request says. Raises
    NotYours when the item is not in the user's active claim or the key was used for another
    answer, and ProtocolChanged when a new protocol version must be acknowledged first.
    """
    if not 0 < item_id < 2**63:  # no row has such an id (and SQLite cannot even look it up)
        raise NoSuchItem("there is no such item in this pool")
    try:
        return _submit(pool=pool, user=user, item_id=item_id, answer=answer, key=key)
    except (NotYours, ProtocolChanged, IntegrityError):
        # The unique key makes a repeat fail; only then is it worth looking the key up (the
        # claim may have moved on since the first request, or the other copy won a race).
        stored = _stored(key, user, item_id=item_id, undo=answer.kind == Kind.UNDO)
        if stored is None:
            raise
        return Submitted(stored, False)


KEY_USED = "this submission key was already used for another answer; reload the page"


def _stored(key: uuid.UUID, user: User, *, item_id: int | None, undo: bool) -> Judgment | None:
    """The judgment this request repeats (same key, person, item and kind of answer); None
    when the key is new.

    A key already used for something else raises NotYours: answering with the stored row
    would tell the person their new answer was kept when nothing was. `item_id` is None for
    "undo my last answer", whose item the server chooses.
    """
    stored = Judgment.objects.filter(idempotency_key=key).first()
    if stored is None:
        return None
    if stored.user_id != user.pk:
        raise NotYours("this submission key has already been used")
    same_item = item_id is None or stored.pair_id == item_id
    if not same_item or (stored.kind == Kind.UNDO) != undo:
        raise NotYours(KEY_USED)
    return stored


@transaction.atomic
def _submit(*, pool: Pool, user: User, item_id: int, answer: Answer, key: uuid.UUID) -> Submitted:
    protocol = _protocol_gate(pool.project, user)
    before = _state_holding(pool, user, item_id)
    if answer.kind == Kind.UNDO and before.kind_of(item_id) in (None, Kind.UNDO):
        raise NotYours("this item has no answer of yours to undo")
    judgment = _record(item_id, user, answer, key, protocol)
    _touch(before.claim, judgment.created_at)
    state = before.answered(item_id, answer.kind)
    # Not closed if a lead released the query (or it expired) since it was read above; the
    # answer is kept all the same: it was given while the person held the query.
    _finish_if_complete(state)
    return Submitted(judgment, True, protocol, state)


def _state_holding(pool: Pool, user: User, item_id: int) -> UnitState:
    """Where the user stands on the query holding `item_id`, which must be their active
    claim's: read in the ordinary case with the active claim, its items and answers."""
    claim = claim_active(pool=pool, user=user)
    if claim is not None:
        state = unit_state(claim=claim)
        if item_id in state.item_ids:
            return state
    return unit_state(claim=_claim_for_item(pool, user, item_id))


def _touch(claim: Claim, now: datetime) -> None:
    # Idle expiry counts in minutes: one write a minute keeps the claim alive just as well
    # (services_claims.claims_expire allows for the lag).
    if now - claim.touched_at >= TOUCH_EVERY:
        claim.touched_at = now
        claim.save(update_fields=["touched_at"])


def _record(
    item_id: int, user: User, answer: Answer, key: uuid.UUID, protocol: ProtocolVersion | None
) -> Judgment:
    return Judgment.objects.create(
        pair_id=item_id,
        user=user,
        kind=answer.kind,
        grade=answer.grade,
        note=answer.note,
        seconds_spent=answer.seconds,
        protocol=protocol,
        idempotency_key=key,
    )


def _protocol_gate(project: Project, user: User) -> ProtocolVersion | None:
    current, change = protocol_gate(project=project, user=user)
    if change is not None:
        raise ProtocolChanged(change)
    return current


def _claim_for_item(pool: Pool, user: User, item_id: int) -> Claim:
    """The user's active claim holding `item_id`; an expired one is resumed if still free."""
    unit_id = WorkItem.objects.filter(pair_id=item_id, unit__pool=pool).values("unit_id")
    claim = (
        Claim.objects.select_related("unit")
        .filter(pool=pool, user=user, unit_id__in=Subquery(unit_id))
        .first()
    )
    if claim is not None and claim.state == ClaimState.ACTIVE:
        return claim
    if claim is not None and claim.state == ClaimState.EXPIRED and _resume(claim):
        return claim
    if not WorkItem.objects.filter(pair_id=item_id, unit__pool=pool).exists():
        raise NoSuchItem("there is no such item in this pool")
    raise NotYours(
        "this item is not in the query you are working on (it may have been released, "
        "reassigned or expired): carry on with the item shown now"
    )


def _resume(claim: Claim) -> bool:
    busy = Claim.objects.filter(pool_id=claim.pool_id, user_id=claim.user_id, state="active")
    if busy.exists() or not place_take(claim.unit):
        return False
    # Lost to a lead's reassignment meanwhile: the caller refuses the answer, and the place
    # just taken goes back with its transaction.
    return claim_state_set(claim, ClaimState.ACTIVE, timezone.now())


NOTHING_TO_UNDO = "there is nothing to undo"


def judgment_undo_last(*, pool: Pool, user: User, key: uuid.UUID) -> Submitted:
    """Undo the user's last answer: in the query they hold, or in the query they have just
    finished when they have answered nothing since (see `_reopen_just_finished`)."""
    stored = _stored(key, user, item_id=None, undo=True)
    if stored is not None:
        return Submitted(stored, False)
    try:
        return Submitted(_undo_last(pool=pool, user=user, key=key), True)
    except IntegrityError:
        stored = _stored(key, user, item_id=None, undo=True)
        if stored is None:
            raise
        return Submitted(stored, False)


@transaction.atomic
def _undo_last(*, pool: Pool, user: User, key: uuid.UUID) -> Judgment:
    # Raising anywhere below rolls back whatever `_reopen_just_finished` changed.
    claims_lock(pool=pool, user=user)
    protocol = _protocol_gate(pool.project, user)
    claim = claim_active(pool=pool, user=user)
    target = _last_answered(claim) if claim else None
    if target is None:
        claim = _reopen_just_finished(pool, user, claim)
        target = _last_answered(claim) if claim else None
    if target is None or claim is None:
        raise NotYours(NOTHING_TO_UNDO)
    _touch(claim, timezone.now())
    return _record(target, user, Answer(kind=Kind.UNDO), key, protocol)


def _last_answered(claim: Claim) -> int | None:
    """The item whose current answer is the user's most recent one in the claim's query."""
    rows = _own_rows(claim).order_by("-pk").values_list("pair_id", "kind")
    seen: set[int] = set()
    for item_id, kind in rows:
        if item_id not in seen and kind != Kind.UNDO:
            return item_id
        seen.add(item_id)
    return None


def _own_rows(claim: Claim) -> QuerySet[Judgment]:
    """The claim holder's judgments on the pairs of the claim's unit."""
    pairs = WorkItem.objects.filter(unit_id=claim.unit_id).values("pair_id")
    return Judgment.objects.filter(user_id=claim.user_id, pair_id__in=pairs)


def _reopen_just_finished(pool: Pool, user: User, held: Claim | None) -> Claim | None:
    """The query the user finished last, active again, if they have done nothing since.

    Nothing since: the claim they hold (if any) has no row of theirs at all — it is dropped,
    as if never taken — and their latest row in the pool is in that query. Anything else
    (an answer in a query they then released, or an answer undone in the query they hold)
    puts the finished query out of reach: None, and nothing changed.
    """
    if held is not None and _own_rows(held).exists():
        return None
    previous = (
        Claim.objects.select_related("unit")
        .filter(pool=pool, user=user, state=ClaimState.DONE)
        .order_by("-finished_at", "-pk")
        .first()
    )
    latest = (
        Judgment.objects.filter(user=user, pair__work_items__unit__pool=pool)
        .order_by("-pk")
        .values_list("pair__query_id", flat=True)
        .first()
    )
    if previous is None or latest != previous.unit.query_id:
        return None
    if held is not None:
        _drop(held)
    return previous if claim_state_set(previous, ClaimState.ACTIVE, timezone.now()) else None


def _drop(fresh: Claim) -> None:
    # Only while still active: a lead may have released it meanwhile, and its place with it.
    deleted, _ = Claim.objects.filter(pk=fresh.pk, state=ClaimState.ACTIVE).delete()
    if deleted:
        place_free(fresh.unit_id)


# --- what the judging page shows -----------------------------------------------------------


@dataclass(frozen=True)
class Screen:
    """Everything the judging panel needs, and nothing about other judges."""

    protocol: ProtocolVersion | None
    change: ProtocolChange | None = None
    item: ShownItem | None = None
    done_in_query: int = 0
    total_in_query: int = 0
    finished_queries: int = 0
    can_undo: bool = False
    # Read without claiming (take=False) while the person holds no query with an item left:
    # the page and the API say "none", and a POST claims one.
    unclaimed: bool = False


def screen_for(
    *, pool: Pool, user: User, after: Submitted | None = None, take: bool = True
) -> Screen:
    """What to show `user` now: an acknowledgement, their next item, or that nothing is left.

    `after`, the answer just stored, saves reading again what its submission already read.
    With `take` False nothing is written: the item of the query they hold, or `unclaimed`
    (GET requests never claim; the POST that follows does).
    """
    if after is not None and after.created and after.state is not None:
        protocol, state = after.protocol, after.state
        if state.claim.state == ClaimState.ACTIVE and state.next_item_id is not None:
            return _item_screen(protocol, state)
    else:
        protocol, change = protocol_gate(project=pool.project, user=user)
        if change is not None:
            return Screen(protocol, change=change)
    for _attempt in range(5):  # a finished query hands over to the next one
        claim = claim_next(pool=pool, user=user) if take else claim_active(pool=pool, user=user)
        if claim is None:
            break
        state = unit_state(claim=claim)
        if state.next_item_id is not None:
            return _item_screen(protocol, state)
        if not take:
            break  # closing the finished query and claiming the next are the POST's to do
        _finish(state)
    finished = finished_count(pool_id=pool.pk, user_id=user.pk)
    return Screen(protocol, finished_queries=finished, can_undo=finished > 0, unclaimed=not take)


def _item_screen(protocol: ProtocolVersion | None, state: UnitState) -> Screen:
    item_id = state.next_item_id
    assert item_id is not None  # callers only come here with an item left to judge
    return Screen(
        protocol,
        item=shown_item(item_id),
        done_in_query=state.done,
        total_in_query=state.total,
        finished_queries=state.finished,
        can_undo=True,
    )


@transaction.atomic
def _finish(state: UnitState) -> None:
    _finish_if_complete(state)


@dataclass(frozen=True)
class ShownItem:
    """What the panel shows of an item: its query and its document, never its provenance or
    best rank (which systems found it, and where), so that those cannot reach an annotator's
    page even by mistake: this object has nowhere to carry them."""

    pk: int
    qid: str
    query_text: str
    query_description: str
    docid: str
    title: str
    text: str


# Plain SQL, as `_ITEMS`: every answer shows a next item, and the ORM spent about 1 ms building
# a join of three tables with `only()` (and three model objects) against 0.2 ms to send it.
_SHOWN = (
    "SELECT p.id, q.qid, q.text, q.description, d.docid, d.title, d.text"
    " FROM pooling_pair p JOIN annotation_query q ON q.id = p.query_id"
    " JOIN annotation_document d ON d.id = p.document_id WHERE p.id = %s"
)


def shown_item(item_id: int) -> ShownItem:
    """The item with the query and document the panel shows, in one read."""
    rows = _rows(_SHOWN, [item_id])
    if not rows:
        raise NoSuchItem("there is no such item in this pool")
    return ShownItem(*rows[0])


@dataclass(frozen=True)
class JudgeProgress:
    """An annotator's own progress on a pool (never anything about other people)."""

    finished_queries: int
    answered_items: int
    in_query: tuple[int, int] | None  # done, total in the query being worked on


def progress_of(*, pool: Pool, user: User) -> JudgeProgress:
    claim = claim_active(pool=pool, user=user)
    state = unit_state(claim=claim) if claim else None
    # An item counts when its latest row is an answer: an undone item is not answered.
    latest = (
        Judgment.objects.filter(user=user, pair__work_items__unit__pool=pool)
        .values("pair_id")
        .annotate(last=Max("pk"))
        .values("last")
    )
    answered = Judgment.objects.filter(pk__in=latest, kind__in=HANDLED).count()
    return JudgeProgress(
        finished_queries=state.finished
        if state
        else finished_count(pool_id=pool.pk, user_id=user.pk),
        answered_items=answered,
        in_query=(state.done, state.total) if state else None,
    )


@transaction.atomic
def judging_policy_set(
    *, project: Project, claim_idle_minutes: int, double_share: float
) -> JudgingPolicy:
    """Change the idle limit (at once) and the double-judged share (for pools built later)."""
    if not 1 <= claim_idle_minutes <= MAX_IDLE_MINUTES or not 0.0 <= double_share <= 1.0:
        raise JudgingError(
            f"the idle limit must be 1 to {MAX_IDLE_MINUTES} minutes and the share within 0–1"
        )
    policy, _ = JudgingPolicy.objects.update_or_create(
        project=project,
        defaults={"claim_idle_minutes": claim_idle_minutes, "double_share": double_share},
    )
    return policy


MAX_GOLD_SHARE = 0.5  # the database's check too: beyond half, the queue would be mostly checks


@transaction.atomic
def gold_share_set(*, project: Project, share: float) -> JudgingPolicy:
    """Change the share of every annotator's items that are gold checks (from their next
    query on)."""
    if not (math.isfinite(share) and 0.0 <= share <= MAX_GOLD_SHARE):
        raise JudgingError(f"the gold share must be within 0–{MAX_GOLD_SHARE * 100:g} %")
    policy, _ = JudgingPolicy.objects.update_or_create(
        project=project, defaults={"gold_share": share}
    )
    return policy
