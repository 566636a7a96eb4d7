"""Croniq behind a transaction-mode connection pooler (PgBouncer,
docs/design.md §16): each transaction of a connection may run on another
server session, so nothing may outlive a transaction, and LISTEN, which
lives in a session, takes a direct connection of its own
(CRONIQ_LISTEN_DATABASE_URL).

What else holds no session state on a pooled connection: locks are
transaction-level (`core.db.advisory_xact_lock`), `SET` is only `SET LOCAL`
inside a transaction, and the `SET TIME ZONE` Django sends at connect (when
the server's TimeZone is not UTC) sets a parameter PgBouncer tracks per
client and sets again on whichever server connection the client gets.
`tests/core/test_pooler_safety.py` records what the hot paths send.
"""

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from croniq_project.database import database_from_url, redacted

POSTGRES = "django.db.backends.postgresql"
LISTEN_SETTING = "CRONIQ_LISTEN_DATABASE_URL"


def pooler_safe(config: dict[str, Any]) -> dict[str, Any]:
    """DATABASE_URL's entry, made to keep nothing in a server session."""
    if config.get("ENGINE") != POSTGRES:
        return config
    # QuerySet.iterator() would DECLARE a cursor WITH HOLD outside a
    # transaction (reading a log, scheduler.runs.log_chunks): it lives in the
    # server session, which the pooler may hand to another client before the
    # next FETCH. Without it, the rows come in one answer.
    config["DISABLE_SERVER_SIDE_CURSORS"] = True
    options = config.setdefault("OPTIONS", {})
    # Prepared statements live in the server session too. Django's psycopg 3
    # cursors bind on the client and prepare nothing, and Django leaves
    # prepare_threshold at None; `?server_side_binding=true&prepare_threshold=N`
    # in the URL would prepare every statement run N times.
    if options.get("prepare_threshold") is not None:
        raise ImproperlyConfigured(
            "DATABASE_URL: prepare_threshold is not supported: a prepared statement lives "
            "in a server session, which a transaction-mode pooler (PgBouncer) hands to others"
        )
    options["prepare_threshold"] = None
    return config


def listen_database(url: str | None, default: dict[str, Any]) -> dict[str, Any] | None:
    """The database entry of CRONIQ_LISTEN_DATABASE_URL (`url`), the direct
    connection a process LISTENs on (`core.db.listen_connection`); None
    when unset: the default database's (`default`, DATABASE_URL's entry)."""
    if url is None or not url.strip():
        return None
    if default.get("ENGINE") != POSTGRES:
        raise ImproperlyConfigured(
            f"{LISTEN_SETTING}: set, but DATABASE_URL is not PostgreSQL; "
            "SQLite has no LISTEN (unset it)"
        )
    config = database_from_url(url.strip(), setting=LISTEN_SETTING)
    if config.get("ENGINE") != POSTGRES:
        raise ImproperlyConfigured(
            f"{LISTEN_SETTING}: expected a postgres:// URL (a direct connection to the "
            f"database DATABASE_URL reaches), got {redacted(url.strip())!r}"
        )
    return config
