"""Submit + next in one SQL statement: the judging page's hot path, on PostgreSQL.

An annotator with no think time sends an answer every few hundred milliseconds, and every
answer needs the same reads and writes: is this person a member, which pool is current, is the
item in the query they hold, must a new protocol be acknowledged first; store the answer
(idempotent on its key), keep the claim alive, and read the next item with its document.
Through the ORM that is ten statements whose compilation alone costs more than running them.
Here it is one prepared statement and one round trip.

It only ever does the ordinary case. Whenever anything is unusual — not a member, no pool, an
item outside the active claim, an expired claim to resume, a protocol to acknowledge, a key
already used, an undo — it stores nothing and returns None, and the caller takes the general
path (`services.judgment_submit`), which decides and says why. The last answer of a query also
closes its claim; handing out the next query is the general path's (`services.screen_for`).
So the rules live in one place, and this statement only has to agree with them on the cases it
accepts.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from django.db import connection
from django.utils import timezone
from psycopg.types.numeric import Int8

from assay.auth import SessionUser
from pooling.models import PoolItem

from .models import Kind
from .services import SHOWN_ITEM_COLUMNS, TOUCH_EVERY, item_from_row

# Kinds this path stores: an undo needs the item's previous answer and goes the general way.
FAST_KINDS = (Kind.GRADE, Kind.UNSURE, Kind.SKIP)
# The largest id a bigint parameter holds: the URL accepts any run of digits, and a larger id
# (which names no item) cannot even be sent; the general path answers it with a 404.
MAX_ID = 2**63 - 1


def compact(sql: str) -> str:
    """The statement without its comments and runs of whitespace. psycopg converts a
    statement's placeholders once and caches the result only for statements of at most 4 KB;
    a longer one is converted again on every execution (~0.15 ms here, for each answer). The
    statements in this module hold no string literal with "--" or meaningful runs of spaces."""
    return re.sub(r"\s+", " ", re.sub(r"--[^\n]*", "", sql)).strip()


# The just-inserted row is invisible to the rest of the statement (one snapshot), so the
# answered item's current kind is taken from the parameters rather than read back.
SUBMIT_AND_NEXT = f"""
WITH who AS (
    -- The signed-in person as the session names them (assay.auth.session_user), confirmed in
    -- this statement's snapshot: still active, the same password hash (a changed password
    -- signs every session out), superuser or not as of now.
    SELECT u.is_superuser FROM auth_user u
    WHERE u.id = %(user)s AND u.is_active AND u.password = %(password)s
), project AS (
    SELECT p.id FROM annotation_project p, who
    WHERE p.slug = %(slug)s
      AND (who.is_superuser OR EXISTS (
          SELECT 1 FROM annotation_membership m
          WHERE m.project_id = p.id AND m.user_id = %(user)s))
), pool AS (
    SELECT l.id FROM pooling_pool l JOIN project ON l.project_id = project.id
    ORDER BY l.created_at DESC, l.id DESC LIMIT 1
), item AS (
    SELECT i.id, i.pool_id, i.query_id FROM pooling_poolitem i JOIN pool ON i.pool_id = pool.id
    WHERE i.id = %(item)s
), claim AS (
    -- Not locked, as in the general path: an answer racing a lead's release of the query by
    -- a few milliseconds is kept like the answers before it (but closes nothing: see
    -- touched). A row lock here would write to the claim's page on every answer, and the
    -- claims of everyone judging share few pages.
    SELECT c.id, c.touched_at FROM judging_claim c
    JOIN item ON c.pool_id = item.pool_id
    JOIN judging_workunit w ON w.id = c.unit_id AND w.query_id = item.query_id
    WHERE c.user_id = %(user)s AND c.state = 'active'
), protocol AS (
    SELECT v.id, v.number, v.content -> 'grades' AS grades
    FROM annotation_protocolversion v JOIN project ON v.project_id = project.id
    ORDER BY v.number DESC LIMIT 1
), blocked AS (
    -- as services.protocol_change_for: a newer version, not acknowledged, after judging
    SELECT 1 FROM protocol v
    WHERE v.number > 1
      AND NOT EXISTS (
          SELECT 1 FROM annotation_protocolack a
          WHERE a.version_id = v.id AND a.user_id = %(user)s)
      AND EXISTS (
          SELECT 1 FROM judging_judgment j
          JOIN annotation_protocolversion e ON e.id = j.protocol_id
          WHERE j.user_id = %(user)s AND e.project_id = (SELECT id FROM project)
            AND e.number < v.number)
), added AS (
    INSERT INTO judging_judgment (pool_item_id, user_id, kind, grade, note, protocol_id,
                                  seconds_spent, idempotency_key, created_at)
    SELECT item.id, %(user)s, %(kind)s, %(grade)s::smallint, %(note)s,
           (SELECT id FROM protocol), %(seconds)s, %(key)s, %(now)s
    FROM item, claim
    WHERE NOT EXISTS (SELECT 1 FROM blocked)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, pool_item_id
), answers AS (
    SELECT i.id, i.position,
           CASE WHEN i.id = added.pool_item_id THEN %(kind)s ELSE (
               SELECT j.kind FROM judging_judgment j
               WHERE j.pool_item_id = i.id AND j.user_id = %(user)s
               ORDER BY j.id DESC LIMIT 1) END AS kind
    FROM added, item
    JOIN pooling_poolitem i ON i.pool_id = item.pool_id AND i.query_id = item.query_id
), upnext AS (
    SELECT a.id FROM answers a
    WHERE a.kind IS NULL OR a.kind NOT IN ('grade', 'unsure', 'skip')
    ORDER BY a.position LIMIT 1
), touched AS (
    -- One update of the claim: keep it alive (once a minute is enough: idle expiry counts in
    -- minutes), and close it when this was the last item, as services._finish_if_complete.
    -- Only while it is still active: a release or expiry committed since this statement's
    -- snapshot is re-checked here (the row is re-read after its lock), and stays as it is.
    UPDATE judging_claim SET
        touched_at = %(now)s,
        state = CASE WHEN EXISTS (SELECT 1 FROM upnext) THEN state ELSE 'done' END,
        finished_at = CASE WHEN EXISTS (SELECT 1 FROM upnext) THEN finished_at ELSE %(now)s END
    WHERE id = (SELECT claim.id FROM claim) AND state = 'active'
      AND EXISTS (SELECT 1 FROM added)
      AND (NOT EXISTS (SELECT 1 FROM upnext) OR (SELECT touched_at FROM claim) <= %(stale)s)
)
SELECT
    (SELECT id FROM project), (SELECT pool_id FROM item),
    (SELECT count(*) FROM answers WHERE kind IN ('grade', 'unsure', 'skip')),
    (SELECT count(*) FROM answers),
    (SELECT count(*) FROM judging_claim c JOIN item ON c.pool_id = item.pool_id
     WHERE c.user_id = %(user)s AND c.state = 'done'),
    protocol.id, protocol.number, protocol.grades,
    {SHOWN_ITEM_COLUMNS}
FROM added
LEFT JOIN protocol ON true
LEFT JOIN upnext ON true
LEFT JOIN pooling_poolitem i ON i.id = upnext.id
LEFT JOIN annotation_query q ON q.id = i.query_id
LEFT JOIN annotation_document d ON d.id = i.document_id
"""
SUBMIT_AND_NEXT = compact(SUBMIT_AND_NEXT)


@dataclass(frozen=True)
class FastScreen:
    """The answer is stored; this is the panel that follows it (no item: the query is done,
    and its claim closed)."""

    project_id: int
    pool_id: int
    item: PoolItem | None  # with its query and document, as `services.shown_item`
    done_in_query: int
    total_in_query: int
    finished_queries: int
    protocol_id: int | None
    protocol_number: int | None
    grades: list[dict[str, Any]]  # the protocol's grade definitions, as stored


def enabled() -> bool:
    return connection.vendor == "postgresql"


def submit_and_next(
    *,
    slug: str,
    user: SessionUser,
    item_id: int,
    kind: str,
    grade: int | None,
    note: str,
    seconds: float,
    key: uuid.UUID,
    now: datetime | None = None,
) -> FastScreen | None:
    """Store the answer and read the next item in the same query, in one statement.

    None means nothing was stored: the general path must handle this request.
    """
    if kind not in FAST_KINDS or not enabled() or not 0 < item_id <= MAX_ID:
        return None
    now = now or timezone.now()
    params = {
        "slug": slug,
        "password": user.password,
        # Fixed parameter types: psycopg would send the smallest integer type that fits each
        # value, and every combination of types is a statement of its own to prepare.
        "user": Int8(user.pk),
        "item": Int8(item_id),
        "kind": kind,
        "grade": grade,
        "note": note,
        "seconds": seconds,
        "key": key,
        "now": now,
        "stale": now - TOUCH_EVERY,
    }
    row = _execute(SUBMIT_AND_NEXT, params)
    if row is None:
        return None
    project_id, pool_id, done, total, finished, protocol_id, number, grades = row[:8]
    return FastScreen(
        project_id=project_id,
        pool_id=pool_id,
        item=item_from_row(row[8:]) if row[8] is not None else None,
        done_in_query=done,
        total_in_query=total,
        finished_queries=finished,
        protocol_id=protocol_id,
        protocol_number=number,
        # Django's connection hands JSON back as text (its JSONField decodes it, not psycopg).
        grades=json.loads(grades) if isinstance(grades, str) else (grades or []),
    )


def _execute(sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run one statement as a prepared statement on Django's own connection (so inside its
    transaction, if any). Django's cursors bind parameters on the client, which rules out
    preparing, and planning this statement costs more than running it."""
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()
