"""The loop's step that notices silence (docs/design.md §12): up checks
past their due instant are late, up or late checks past their grace are
down (`check.down` into the outbox).

Each pass first asks, with two reads of the partial indexes `check_due`
and `check_down_due`, whether anything is overdue at all; only then does it
write. Going late is one set-based UPDATE (no event, no row read); going
down reads the overdue rows (skipping rows another loop holds, PostgreSQL),
moves them, and records one event for each row that moved.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
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
    rows = db.skip_locked(down_now(now).order_by("down_at"))
    overdue = list(rows.only("id", "name", "project", "labels", "last_ping_at")[:BATCH])
    if not overdue:
        return 0
    # The rows stay as read until the commit: locked on PostgreSQL, and on
    # SQLite the transaction holds the write lock from its BEGIN IMMEDIATE.
    Check.objects.filter(pk__in=[check.pk for check in overdue]).update(
        state=states.DOWN, down_at=None
    )
    for check in overdue:
        check.state = states.DOWN
    events.emit_many(states.CHECK_DOWN, overdue, now, "no ping within its grace")
    return len(overdue)
