"""Statements over a batch of rows named by their ids, in plain SQL.

Retention deletes executions in batches of up to a couple of thousand, in
one transaction that on SQLite holds the database's write lock, and clears
what points at them first (several tables). The ORM prepares an `IN` of a
thousand ids in about 3 ms a statement (each id is checked against its
field, then compiled), more than most of those statements take to run: at
1,000 runs a batch, half the transaction (bench/prune.py). These write the
same statements directly. The ids are the callers' own integers, passed as
parameters.
"""

from collections.abc import Collection, Iterable, Sized
from typing import Any

from django.db import connection, models

from core import db


def ids_where(
    model: type[models.Model],
    field: str,
    ids: Collection[int],
    *,
    states: Iterable[str] | None = None,
    lock: bool = False,
) -> list[int]:
    """Ids of `model` rows whose `field` is one of `ids` (and, with `states`,
    whose state is one of them); with `lock`, locked, skipping rows another
    transaction holds where the database can (PostgreSQL)."""
    if not ids:
        return []
    sql, params = where_in(model, field, ids)
    sql = f"SELECT {quote(model._meta.pk.column)} FROM {table(model)} WHERE {sql}"
    if states:
        sql += f" AND {quote(model._meta.get_field('state').column)} IN ({marks(states)})"
        params += list(states)
    if lock:
        sql += db.skip_locked_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def delete_where(model: type[models.Model], field: str, ids: Collection[int]) -> int:
    """Delete the `model` rows whose `field` is one of `ids`; returns how many.
    No cascade runs: nothing may point at `model`'s rows."""
    if not ids:
        return 0
    sql, params = where_in(model, field, ids)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table(model)} WHERE {sql}", params)
        return cursor.rowcount


def clear_where(
    model: type[models.Model], field: str, ids: Collection[int], *, by: str | None = None
) -> int:
    """Set `field` to NULL where it (or the field `by`) is one of `ids`;
    returns how many rows."""
    if not ids:
        return 0
    sql, params = where_in(model, by or field, ids)
    column = quote(model._meta.get_field(field).column)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table(model)} SET {column} = NULL WHERE {sql}", params)
        return cursor.rowcount


def where_in(model: type[models.Model], field: str, ids: Collection[int]) -> tuple[str, list[Any]]:
    return db.in_ids(quote(model._meta.get_field(field).column), ids)


def marks(values: Sized) -> str:
    return ", ".join(["%s"] * len(values))


def table(model: type[models.Model]) -> str:
    return quote(model._meta.db_table)


def quote(name: str) -> str:
    return connection.ops.quote_name(name)
