"""Everyone's current answer on a pair: the latest row stands, undo empties, no gold checks."""

from __future__ import annotations

from datetime import datetime

from judging.answers import current_answers
from judging.models import Judgment, Kind, WorkItem, WorkUnit
from pooling.models import Pair

from .conftest import World


def _judge(world: World, user_name: str, pair: Pair, kind: str, grade: int | None = None) -> None:
    user = getattr(world, user_name)
    Judgment.objects.create(pair=pair, user=user, kind=kind, grade=grade, seconds_spent=3.0)


def test_it_reads_each_persons_latest_answer_and_leaves_gold_checks_out(world: World) -> None:
    first, second, third = Pair.objects.order_by("pk")[:3]
    _judge(world, "alice", first, Kind.GRADE, 1)
    _judge(world, "alice", first, Kind.GRADE, 3)  # changed her mind: 3 stands
    _judge(world, "bob", first, Kind.UNSURE)
    _judge(world, "alice", second, Kind.GRADE, 2)
    _judge(world, "alice", second, Kind.UNDO)  # undone: no current answer
    _judge(world, "bob", third, Kind.GRADE, 0)
    pool = first.pool_items.get().pool
    gold = WorkUnit.objects.create(
        pool=pool, query=third.query, position=999, gold_for=world.alice, claims_taken=1
    )
    WorkItem.objects.create(unit=gold, pair=third, position=0)
    _judge(world, "alice", third, Kind.GRADE, 3)  # a gold check: not a label

    rows = current_answers(project_id=world.project.pk)

    seen = [(r.pair_id, r.username, r.kind, r.grade) for r in rows]
    assert seen == [
        (first.pk, "alice", "grade", 3),
        (first.pk, "bob", "unsure", None),
        (third.pk, "bob", "grade", 0),
    ]
    assert all(isinstance(r.answered_at, datetime) and r.answered_at.tzinfo for r in rows)
    # The time comes as a number from the database, and back to the microsecond.
    latest = {(j.pair_id, j.user.username): j.created_at for j in Judgment.objects.order_by("pk")}
    assert [r.answered_at for r in rows] == [latest[r.pair_id, r.username] for r in rows]
    assert rows[0].qid == first.query.qid and rows[0].docid == first.document.docid
