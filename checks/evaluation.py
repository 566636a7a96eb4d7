"""The loop's step that notices silence (docs/design.md §12): up checks
past their due instant are late, up or late checks past their grace are
down (`check.down` into the outbox).

Each pass first asks, with two reads of the partial indexes `check_due`
and `check_down_due`, whether anything is overdue at all; only then does it
write. Going late is one set-based UPDATE (no event, no row read); going
down is one UPDATE ... RETURNING (skipping rows another loop holds,
PostgreSQL) and one INSERT of an event for each row that moved.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import QuerySet

from checks import events, states
from checks.models import Check
from core import db

# Checks moved down in one transaction (one event each); the rest wait for
# the next pass, a second later.
BATCH = 5000


def late_now(now: datetime) -> QuerySet[Check]:
    return Check.objects.filter(state=states.UP, next_expected_at__lte=now)


def down_now(now: datetime) -> QuerySet[Check]:
    return Check.objects.filter(state__in=[states.UP, states.LATE], down_at__lte=now)


def evaluate(now: datetime) -> int:
    """Move overdue checks at `now`; returns how many changed state."""
    if not (down_now(now).exists() or late_now(now).exists()):
        return 0  # the usual pass: two index probes, no transaction
    with transaction.atomic():
        moved = went_down(now)
        moved += late_now(now).update(state=states.LATE)
    return moved


def went_down(now: datetime) -> int:
    """Move up to BATCH overdue checks down in one statement that hands back
    what their events need; then their events in one more. Reading the rows,
    then updating them by 5,000 ids, then an INSERT per event spent three
    round trips' worth of time each (10,000 checks going down on PostgreSQL:
    7,500 a second)."""
    with connection.cursor() as cursor:
        cursor.execute(
            MOVE_DOWN.format(table=TABLE, lock=db.skip_locked_sql()),
            [states.UP, states.LATE, now, BATCH, states.DOWN],
        )
        # RETURNING comes in no set order; events go out in the checks'.
        moved = sorted(cursor.fetchall())
    if not moved:
        return 0
    reason = "no ping within its grace"
    datas = [
        events.payload_of(
            events.facts_of(name, project, states.DOWN, instant(last_ping_at)),
            json.loads(labels) if isinstance(labels, str) else labels,
            reason,
        )
        for _id, name, project, labels, last_ping_at in moved
    ]
    return events.emit_many(states.CHECK_DOWN, datas, now)


def instant(value: datetime | None) -> datetime | None:
    """A timestamp column read by a raw cursor: PostgreSQL's driver gives an
    aware datetime, SQLite's a naive one in UTC (Django stores UTC)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


TABLE = Check._meta.db_table
# One statement on both databases (SQLite has RETURNING since 3.35). The
# rows stay as moved until the commit: the CTE locks them on PostgreSQL
# (skipping rows another loop holds), and on SQLite the transaction holds
# the write lock from its BEGIN IMMEDIATE. It reads the partial index
# check_down_due.
MOVE_DOWN = """
WITH overdue AS (
    SELECT id FROM {table}
    WHERE state IN (%s, %s) AND down_at <= %s
    ORDER BY down_at LIMIT %s{lock}
)
UPDATE {table} SET state = %s, down_at = NULL
WHERE id IN (SELECT id FROM overdue)
RETURNING id, name, project, labels, last_ping_at
"""
