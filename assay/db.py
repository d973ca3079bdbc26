"""Bulk inserts for large, append-only tables (run lines, pool items, documents).

`bulk_create` builds one model instance and compiles SQL for every row, which dominates the
time of a 100,000-row import. For plain rows we insert straight through the connection: COPY on
PostgreSQL, a prepared `executemany` elsewhere. Both are plain inserts into the table, so every
constraint holds: the database checks each row's foreign keys (at commit, as Django declares
them deferrable) and its unique indexes. It runs inside the caller's transaction, so an import
stays all or nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from django.db import connection, models
from django.utils import timezone

BATCH_SIZE = 10_000
# Autovacuum analyzes a table once this many rows plus this share of it have changed.
ANALYZE_ROWS, ANALYZE_SHARE = 50, 0.1


def bulk_insert(
    model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Insert `rows` (tuples in the order of the column names `columns`) into the table.

    JSON columns take already-serialised JSON text. Returns the number of rows inserted.
    """
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    if connection.vendor == "postgresql":
        count = _copy(table, names, rows)
        _analyze_if_grown(model, columns, count)
        return count
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


def _analyze_if_grown(model: type[models.Model], columns: Sequence[str], count: int) -> None:
    """Refresh the planner's statistics of the loaded columns when the load outgrew them.

    Autovacuum would, but only after commit and up to a minute later: the reads that follow a
    load in the same pipeline (pooling joins the run lines it just stored with the documents)
    were planned for the table as it was, 100,000 index probes in a nested loop instead of one
    hash join (1.3 s against 0.3 s in the bulk benchmark). Free text and JSON are left out: no
    plan filters or joins on them, and their statistics are most of ANALYZE's cost. ANALYZE
    holds its lock until commit, so two such loads into one table finish one after the other.
    """
    table = model._meta.db_table
    free = (models.TextField, models.JSONField)
    fields = {field.column: field for field in model._meta.concrete_fields}
    keys = [connection.ops.quote_name(c) for c in columns if not isinstance(fields[c], free)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [table])
        known = max(float(cursor.fetchone()[0]), 0.0)
        if count > ANALYZE_ROWS + ANALYZE_SHARE * known:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(table)} ({', '.join(keys)})")


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


IN_CHUNK = 500  # ids per IN list: far below every backend's limit on parameters


def rows_for_ids(sql: str, ids: Iterable[int], params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of `sql`, whose ``{ids}`` is an IN list, for every id: run once per chunk of
    IN_CHUNK sorted ids, each chunk's ids the first parameters, `params` after them."""
    ordered = sorted(ids)
    rows: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), IN_CHUNK):
            chunk = ordered[start : start + IN_CHUNK]
            cursor.execute(sql.format(ids=placeholders(len(chunk))), [*chunk, *params])
            rows.extend(cursor.fetchall())
    return rows


def aware(value: Any) -> Any:
    """A timestamp read by plain SQL, made aware: SQLite hands them back naive (the ORM would
    add UTC); anything else passes through."""
    if isinstance(value, datetime) and timezone.is_naive(value):
        return timezone.make_aware(value, UTC)
    return value
