"""Everyone's current answer on every pair of a project: what agreement, adjudication and the
final labels are computed from.

A person's current answer on a pair is their latest judgment row on it (an ``undo`` row makes the
pair unanswered again). Gold checks are left out: a gold check measures the person against a
known answer, it is not a label of the pair, and gold pairs were chosen for being hard, so they
would bias agreement. A gold check is an answer on a pair of a gold unit made for the person who
answered.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from .models import Judgment, Kind


def gold_check_sql(judgment: str) -> str:
    """SQL that is true when the judgment row aliased `judgment` is a gold check: an answer on
    a pair of a gold unit made for the person who answered. The one statement of the rule:
    plain SQL reads it as is, the ORM through `gold_check`."""
    return (
        "EXISTS (SELECT 1 FROM judging_workitem gw JOIN judging_workunit gu ON gu.id = gw.unit_id"
        f" WHERE gw.pair_id = {judgment}.pair_id AND gu.gold_for_id = {judgment}.user_id)"
    )


def gold_check() -> RawSQL:
    """`gold_check_sql` for a Judgment queryset: ``.exclude(gold_check())`` drops them."""
    table = Judgment._meta.db_table
    return RawSQL(gold_check_sql(table), [], output_field=BooleanField())


# One statement, plain SQL: the dashboard reads ~100,000 rows and model objects would cost more
# than the statistics. A row is its person's latest on the pair when no later row of theirs
# exists: an anti-join PostgreSQL runs through `judgment_latest` in half the time of grouping
# by (person, pair) for the newest id, which spilled to disk.
# The time of an answer comes as POSIX seconds, a number: the driver's timestamp loader (time
# zone and all) cost 0.3 s per 100,000 rows, a third of the whole read. SQLite stores UTC text
# ("2026-12-02 08:00:00.123456"): whole seconds by strftime, the fraction from position 20.
_EPOCH = {
    "postgresql": "EXTRACT(EPOCH FROM j.created_at)::float8",
    "sqlite": "(CAST(strftime('%%s', j.created_at) AS REAL)"
    " + CAST(substr(j.created_at, 20) AS REAL))",
}
_CURRENT = (
    "SELECT j.pair_id, q.qid, d.docid, q.stratum, j.user_id, u.username, j.kind, j.grade,"
    " v.number, {epoch}, j.seconds_spent, j.note"
    " FROM annotation_query q"
    " JOIN pooling_pair p ON p.query_id = q.id"
    " JOIN judging_judgment j ON j.pair_id = p.id"
    " JOIN annotation_document d ON d.id = p.document_id"
    " JOIN auth_user u ON u.id = j.user_id"
    " LEFT JOIN annotation_protocolversion v ON v.id = j.protocol_id"
    " WHERE q.project_id = %s{pair} AND j.kind <> %s AND NOT EXISTS (SELECT 1"
    "  FROM judging_judgment l WHERE l.user_id = j.user_id AND l.pair_id = j.pair_id"
    "  AND l.id > j.id)"
    " AND {gold}{check}"
    " ORDER BY {order}"
)


class CurrentAnswer(NamedTuple):
    """One person's current answer on one pair (``grade`` is None unless ``kind`` is grade).

    A named tuple, not a dataclass: 100,000 of them are made per read of a big project, and a
    tuple is made from its row at once."""

    pair_id: int
    qid: str
    docid: str
    stratum: str
    user_id: int
    username: str
    kind: str
    grade: int | None
    protocol: int | None
    at: float  # POSIX seconds
    seconds: float
    note: str

    @property
    def answered_at(self) -> datetime:
        return datetime.fromtimestamp(self.at, UTC)


def current_answers(
    *, project_id: int, pair_id: int | None = None, gold: bool = False
) -> list[CurrentAnswer]:
    """Every person's current answer on every pair of the project (or on the one pair
    `pair_id`), gold checks left out, by pair and then in the order they were given. Undone
    pairs have no current answer. With `gold`, the other way round: only the gold checks,
    oldest first."""
    one_pair = [] if pair_id is None else [pair_id]
    sql = current_sql(pair=" AND p.id = %s" if one_pair else "", gold=gold)
    with connection.cursor() as cursor:
        cursor.execute(sql, [project_id, *one_pair, Kind.UNDO.value])
        rows = cursor.fetchall()
    return list(map(CurrentAnswer._make, rows))


def current_sql(*, pair: str = "", gold: bool = False) -> str:
    """The statement of `current_answers` for this database (`pair`: an extra condition;
    `gold`: the gold checks instead of the labels)."""
    return _CURRENT.format(
        pair=pair,
        epoch=_EPOCH[connection.vendor],
        gold="" if gold else "NOT ",
        check=gold_check_sql("j"),
        order="j.created_at, j.id" if gold else "j.pair_id, j.id",
    )
