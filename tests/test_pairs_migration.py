"""Moving judgments from pool items to pairs loses and changes nothing.

The database is migrated back to before pairs existed and filled there with the historical
models: a project pooled twice (the second pool holding some of the first's pairs again), work
units, claims, and judgments of every kind (grades, an undo, a skip with its note, two people on
one pair, answers in both pools). Migrated forward, every judgment is found on the pair of the
item it was made on, with every other field as it was; each pair exists once; each unit's work
is the items it had; and the migration back restores the items.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from judging.models import Judgment, WorkItem, WorkUnit
from pooling.models import Pair, Pool, PoolItem

BEFORE = [
    ("judging", "0003_judgment_indexes_per_answer"),
    ("pooling", "0003_bulk_tables_constraints"),
]
FIELDS = ("id", "user_id", "kind", "grade", "note", "protocol_id", "seconds_spent", "created_at")


def migrate(targets: Sequence[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def before() -> list[tuple[str, str | None]]:
    """Every other app as it is now, judging and pooling before pairs; agreement and
    evaluation, whose tables point at pairs, before their first migration."""
    apps_after = ("judging", "pooling", "agreement", "evaluation")
    zero: list[tuple[str, str | None]] = [("agreement", None), ("evaluation", None)]
    return [leaf for leaf in latest() if leaf[0] not in apps_after] + [*BEFORE, *zero]


def _nodes(targets: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """The migrations a state is read at: an app migrated back to zero has none."""
    return [(app, name) for app, name in targets if name is not None]


def fill(apps: Any) -> dict[str, Any]:
    """Two pools over three documents of two queries, with judgments in both."""
    model = apps.get_model
    user = model("auth", "User")
    alice = user.objects.create(username="alice")
    bob = user.objects.create(username="bob")
    project = model("annotation", "Project").objects.create(slug="old", name="Old")
    protocol = model("annotation", "ProtocolVersion").objects.create(
        project=project, number=1, text="grades"
    )
    docs = [
        model("annotation", "Document").objects.create(project=project, docid=f"d{i}", text="t")
        for i in range(3)
    ]
    queries = [
        model("annotation", "Query").objects.create(project=project, qid=f"q{i}", text="q")
        for i in range(2)
    ]
    pool_model, item_model = model("pooling", "Pool"), model("pooling", "PoolItem")
    first = pool_model.objects.create(project=project, depth=2, seed=1)
    second = pool_model.objects.create(project=project, depth=3, seed=2)
    items: dict[tuple[int, int, int], Any] = {}
    position = 0
    for pool, depth in ((first, 2), (second, 3)):
        for q in queries:
            for d in docs[:depth]:
                items[(pool.pk, q.pk, d.pk)] = item_model.objects.create(
                    pool=pool, query=q, document=d, provenance={"r": 1}, best_rank=1,
                    position=position,
                )  # fmt: skip
                position += 1
    unit_model = model("judging", "WorkUnit")
    units = {
        (pool.pk, q.pk): unit_model.objects.create(pool=pool, query=q, position=n)
        for pool in (first, second)
        for n, q in enumerate(queries)
    }
    model("judging", "Claim").objects.create(
        pool=first, unit=units[(first.pk, queries[0].pk)], user=alice, state="done",
        claimed_at=timezone.now(), touched_at=timezone.now(),
    )  # fmt: skip
    judgment = model("judging", "Judgment")

    def judge(item: Any, who: Any, kind: str = "grade", grade: int | None = None) -> None:
        judgment.objects.create(
            pool_item=item, user=who, kind=kind, grade=grade, note=f"{kind} {grade}",
            protocol=protocol, seconds_spent=2.5, idempotency_key=uuid.uuid4(),
        )  # fmt: skip

    q0, q1 = queries
    judge(items[(first.pk, q0.pk, docs[0].pk)], alice, grade=3)
    judge(items[(first.pk, q0.pk, docs[0].pk)], bob, grade=1)
    judge(items[(first.pk, q0.pk, docs[1].pk)], alice, grade=2)
    judge(items[(first.pk, q0.pk, docs[1].pk)], alice, kind="undo")
    judge(items[(second.pk, q0.pk, docs[1].pk)], alice, grade=0)  # the same pair, pool 2
    judge(items[(second.pk, q1.pk, docs[2].pk)], bob, kind="skip")
    pair_of = {item.pk: key[1:] for key, item in items.items()}  # item -> (query, document)
    expected = {
        row["id"]: (pair_of[row["pool_item_id"]], tuple(row[f] for f in FIELDS))
        for row in judgment.objects.values("pool_item_id", *FIELDS)
    }
    return {"expected": expected, "items": len(items), "pools": (first.pk, second.pk)}


@pytest.mark.django_db(transaction=True)
def test_every_judgment_moves_to_its_pair_unchanged_and_back() -> None:
    executor = migrate(before())
    made = fill(executor.loader.project_state(_nodes(before())).apps)

    migrate(latest())

    judgments = {j.pk: j for j in Judgment.objects.select_related("pair")}
    assert set(judgments) == set(made["expected"])
    for pk, ((query_id, document_id), fields) in made["expected"].items():
        judgment = judgments[pk]
        assert (judgment.pair.query_id, judgment.pair.document_id) == (query_id, document_id)
        assert tuple(getattr(judgment, f) for f in FIELDS) == fields
    assert Pair.objects.count() == 2 * 3  # each (query, document) once, whatever the pools
    assert PoolItem.objects.count() == made["items"]
    first, second = (Pool.objects.get(pk=pk) for pk in made["pools"])
    assert (first.selected, first.added, second.selected, second.added) == (4, 4, 6, 2)
    for unit in WorkUnit.objects.all():
        work = set(WorkItem.objects.filter(unit=unit).values_list("pair_id", flat=True))
        held = set(unit.pool.items.filter(pair__query=unit.query).values_list("pair_id", flat=True))
        assert work == held  # until now, every item of a unit's query was its work

    executor = migrate(before())  # and back: every judgment on an item of its pair again
    old = executor.loader.project_state(_nodes(before())).apps
    rows = old.get_model("judging", "Judgment").objects.values(
        "pool_item__query_id", "pool_item__document_id", *FIELDS
    )
    back = {
        row["id"]: (
            (row["pool_item__query_id"], row["pool_item__document_id"]),
            tuple(row[f] for f in FIELDS),
        )
        for row in rows
    }
    assert back == made["expected"]
    migrate(latest())
