"""Fast bulk inserts for large, append-only tables (run lines, pool items, documents).

`bulk_create` builds one model instance and compiles SQL for every row, which dominates the
time of a 100,000-row import. For plain rows we insert straight through the connection: COPY on
PostgreSQL, a prepared `executemany` elsewhere. It runs inside the caller's transaction, so an
import stays all or nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import connection, models

BATCH_SIZE = 10_000


def bulk_insert(
    model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Insert `rows` (tuples in the order of the column names `columns`) into the table.

    JSON columns take already-serialised JSON text. Returns the number of rows inserted.
    """
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    if connection.vendor == "postgresql":
        return _copy(table, names, rows)
    sql = f"INSERT INTO {table} ({names}) VALUES ({placeholders(len(columns))})"
    count = 0
    iterator = iter(rows)
    with connection.cursor() as cursor:
        while batch := list(islice(iterator, BATCH_SIZE)):
            cursor.executemany(sql, batch)
            count += len(batch)
    return count


def _copy(table: str, names: str, rows: Iterable[Sequence[Any]]) -> int:
    count = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        with raw.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def max_length(model: type[models.Model], name: str) -> int:
    """The declared length of a character column: what PostgreSQL enforces (SQLite does not)."""
    field = model._meta.get_field(name)
    length = getattr(field, "max_length", None)
    if not isinstance(length, int):
        raise TypeError(f"{model.__name__}.{name} has no max_length")
    return length


def placeholders(count: int) -> str:
    """``%s, %s, ...``: one parameter mark per value of an IN list or a row."""
    return ", ".join(["%s"] * count)


def lock_parent(instance: models.Model) -> None:
    """Check that `instance`'s row exists and keep it from being deleted until commit.

    Bulk-loaded children (a corpus's documents) have no foreign-key constraint on their single
    parent; this one lock gives what the constraint's check would have given once per row. On
    SQLite the writing transaction locks the whole database anyway.
    """
    meta = instance._meta
    table = connection.ops.quote_name(meta.db_table)
    column = connection.ops.quote_name(meta.pk.column if meta.pk and meta.pk.column else "id")
    lock = " FOR KEY SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table} WHERE {column} = %s{lock}", [instance.pk])
        if cursor.fetchone() is None:
            raise ObjectDoesNotExist(f"{meta.label} {instance.pk} no longer exists")
