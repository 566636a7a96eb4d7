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
that does (`core.wakeups` holds it).
"""

from django.conf import settings
from django.db import connection, connections


def on_postgres(using="default"):
    """Whether the database is PostgreSQL (else SQLite)."""
    return connections[using].vendor == "postgresql"


def on_sqlite(using="default"):
    return connections[using].vendor == "sqlite"


def vendor(using="default"):
    """ "postgresql" or "sqlite": the key of the per-vendor SQL tables some
    apps hold next to their queries."""
    return connections[using].vendor


def advisory_xact_lock(key):
    """Wait for the transaction-level lock `key` (an int) until the current
    transaction ends. SQLite needs none: a write transaction holds the
    whole database from BEGIN (IMMEDIATE, croniq_project.sqlite), and
    reads see one snapshot."""
    if not on_postgres():
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def skip_locked(queryset):
    """`queryset` locking its rows FOR UPDATE SKIP LOCKED where the database
    can: rows another transaction holds are left to it. SQLite has no row
    locks; its writers take turns on the whole database."""
    if connection.features.has_select_for_update_skip_locked:
        return queryset.select_for_update(skip_locked=True)
    return queryset


def for_update(queryset, **options):
    """`queryset` locking its rows FOR UPDATE where the database can."""
    if connection.features.has_select_for_update:
        return queryset.select_for_update(**options)
    return queryset


def notify(channel, using="default"):
    """NOTIFY `channel` on PostgreSQL: inside a transaction it leaves at the
    commit (and never on a rollback), so the hint goes with the
    transaction's own round trips. SQLite has no NOTIFY: its listeners see
    other connections' commits (`core.commits`)."""
    conn = connections[using]
    if conn.vendor != "postgresql":
        return
    with conn.cursor() as cursor:
        cursor.execute(f"NOTIFY {channel}")


# How the LISTEN connection names itself in pg_stat_activity.
LISTEN_APPLICATION = "croniq wakeups"


def listen_params():
    """psycopg connection parameters of the default database, for the one
    connection of a process that LISTENs (`listen_connection`)."""
    db = settings.DATABASES["default"]
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


def listen_connection():
    """A new psycopg connection in autocommit for LISTEN, outside Django's
    connection handling and any pool: a session of its own, which LISTEN
    needs (a transaction-mode pooler would drop it between statements)."""
    import psycopg

    params = {"application_name": LISTEN_APPLICATION, **listen_params()}
    return psycopg.Connection.connect(**params, autocommit=True)
