"""Database-vendor code: what Croniq asks of its database that PostgreSQL and
SQLite answer differently, in one place.

The apps ask questions (`on_postgres`), take locks (`advisory_xact_lock`,
`skip_locked`) and send hints (`notify`); which SQL that is, and what
SQLite does instead, is decided here. A branch left in an app is a
behaviour that differs by design, and says why where it stands.

Nothing here keeps session state on a pooled connection: locks are
transaction-level, and a NOTIFY is sent inside the caller's transaction or
as a statement of its own, so the connection behind a transaction-mode
pooler (PgBouncer) can go to another client between transactions. LISTEN
needs a session of its own: `listen_connection` makes it, the only place
that does (`core.wakeups` holds it), on CRONIQ_LISTEN_DATABASE_URL's
direct connection when one is set.
"""

import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast


def on_postgres(using: str = "default") -> bool:
    """Whether the database is PostgreSQL (else SQLite)."""
    return connections[using].vendor == "postgresql"


def on_sqlite(using: str = "default") -> bool:
    return connections[using].vendor == "sqlite"


def vendor(using: str = "default") -> str:
    """ "postgresql" or "sqlite": the key of the per-vendor SQL tables some
    apps hold next to their queries."""
    return connections[using].vendor


def advisory_xact_lock(key: int) -> None:
    """Wait for the transaction-level lock `key` (an int) until the current
    transaction ends. SQLite needs none: a write transaction holds the
    whole database from BEGIN (IMMEDIATE, croniq_project.sqlite), and
    reads see one snapshot."""
    if not on_postgres():
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def skip_locked(queryset: QuerySet) -> QuerySet:
    """`queryset` locking its rows FOR UPDATE SKIP LOCKED where the database
    can: rows another transaction holds are left to it. SQLite has no row
    locks; its writers take turns on the whole database."""
    if connection.features.has_select_for_update_skip_locked:
        return queryset.select_for_update(skip_locked=True)
    return queryset


def for_update(queryset: QuerySet, **options: Any) -> QuerySet:
    """`queryset` locking its rows FOR UPDATE where the database can."""
    if connection.features.has_select_for_update:
        return queryset.select_for_update(**options)
    return queryset


def notify(channel: str, using: str = "default") -> None:
    """NOTIFY `channel` on PostgreSQL: inside a transaction it leaves at the
    commit (and never on a rollback), so the hint goes with the
    transaction's own round trips. SQLite has no NOTIFY: its listeners see
    other connections' commits (`core.commits`)."""
    conn = connections[using]
    if conn.vendor != "postgresql":
        return
    with conn.cursor() as cursor:
        cursor.execute(f"NOTIFY {channel}")


@contextmanager
def snapshot() -> Iterator[None]:
    """Reads that all see the database as of the first one, holding no lock
    a writer waits for (`croniq-admin export`: one consistent picture).
    PostgreSQL: a REPEATABLE READ, READ ONLY transaction. SQLite: a DEFERRED
    transaction, whose first read fixes what it sees (WAL mode), not the
    IMMEDIATE one writes begin with, which would hold the write lock and
    keep the loop's tick waiting. Inside a transaction already, the reads
    are that transaction's."""
    if connection.in_atomic_block:
        yield
        return
    if on_postgres():
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
        return
    connection.ensure_connection()  # connecting sets the mode the settings give
    mode = connection.transaction_mode
    connection.transaction_mode = "DEFERRED"
    try:
        with transaction.atomic():
            yield
    finally:
        connection.transaction_mode = mode


def skip_locked_sql() -> str:
    """What ends a hand-written SELECT that `skip_locked` would lock: " FOR
    UPDATE SKIP LOCKED" where the database has row locks, else nothing."""
    if connection.features.has_select_for_update_skip_locked:
        return " FOR UPDATE SKIP LOCKED"
    return ""


def in_ids(column: str, ids: Collection[int]) -> tuple[str, list[Any]]:
    """(SQL, parameters) of "`column` is one of `ids`" for a hand-written
    statement. PostgreSQL takes one array parameter: a thousand parameters
    cost it about 3 ms a statement to bind and plan, an array a tenth of
    that. SQLite has no arrays: one parameter per id."""
    if on_postgres():
        return f"{column} = ANY(%s)", [list(ids)]
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)


def list_holds(queryset: QuerySet, field: str, value: str) -> QuerySet:
    """The rows of `queryset` whose JSON list `field` holds the string
    `value`. PostgreSQL tests JSON containment; SQLite has no such lookup,
    but stores the list as the JSON text Django wrote, where an element is
    exactly its JSON-quoted self."""
    if on_postgres():
        return queryset.filter(**{f"{field}__contains": [value]})
    text = Cast(field, output_field=TextField())
    return queryset.annotate(**{f"{field}_text": text}).filter(
        **{f"{field}_text__contains": json.dumps(value)}
    )


# How the LISTEN connection names itself in pg_stat_activity.
LISTEN_APPLICATION = "croniq wakeups"


def listen_params() -> dict[str, Any]:
    """psycopg connection parameters of the one connection of a process
    that LISTENs (`listen_connection`): CRONIQ_LISTEN_DATABASE_URL's, a
    direct one when DATABASE_URL goes through a transaction-mode pooler,
    else the default database's."""
    db = settings.CRONIQ_LISTEN_DATABASE or settings.DATABASES["default"]
    params = {
        "dbname": db.get("NAME"),
        "user": db.get("USER"),
        "password": db.get("PASSWORD"),
        "host": db.get("HOST"),
        "port": db.get("PORT"),
    }
    ignored = {"pool", "server_side_binding", "isolation_level", "assume_role", "context"}
    params.update({k: v for k, v in db.get("OPTIONS", {}).items() if k not in ignored})
    return {k: v for k, v in params.items() if v not in (None, "")}


def listen_connection() -> Any:
    """A new psycopg connection in autocommit for LISTEN, outside Django's
    connection handling and any pool: a session of its own, which LISTEN
    needs (through a transaction-mode pooler it would hear nothing: the
    server session that ran LISTEN goes to other clients between
    statements, so CRONIQ_LISTEN_DATABASE_URL names the server itself)."""
    import psycopg

    params = {"application_name": LISTEN_APPLICATION, **listen_params()}
    return psycopg.Connection.connect(**params, autocommit=True)
