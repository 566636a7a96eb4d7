"""Recording a ping: one short transaction (docs/design.md §12).

Read the check by its token (one probe of the token's unique index, locked
on PostgreSQL), count the ping against the flood limit, move the state
machine (`checks.states`), write the check and the ping, and, only when
the check went down or came back up, the event into the notifications
outbox. Nothing else: no loop wake-up per ping (an event pokes the
notifier after commit, as every event does), no read of other checks.

The flood limit is a fixed window counted on the check's own row
(`rate_window`, `rate_count`), written in the same UPDATE as the ping: it
holds across any number of web processes because the database serialises
writers of one row (PostgreSQL's row lock, SQLite's write lock), and it
costs no table, cache or query of its own. A refused ping writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction

from checks import events, states
from checks.models import MAX_BODY, Check, Ping
from core import db

FOUND, NOT_FOUND, LIMITED = "ok", "not found", "limited"


@dataclass(frozen=True)
class Received:
    """A ping as the view read it."""

    token: str
    kind: str
    at: datetime
    exit_status: int | None = None
    body: bytes = b""
    remote_addr: str = ""
    user_agent: str = ""


def limit() -> tuple[int, int]:
    """(pings, window seconds) of the flood limit: CRONIQ_PING_LIMIT and
    CRONIQ_PING_WINDOW (docs/design.md §6), checked when the settings load."""
    return settings.CRONIQ_PING_LIMIT, settings.CRONIQ_PING_WINDOW


def body_text(raw: bytes) -> tuple[str, bool]:
    """(text, truncated): the first 100 KB of a body as text any database
    stores. Bytes that are not UTF-8 (and a character cut at the limit)
    become U+FFFD; NUL, which PostgreSQL refuses in text, too."""
    truncated = len(raw) > MAX_BODY
    text = raw[:MAX_BODY].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    return text, truncated


# The ping's three statements, written out: through the ORM the same work
# cost 0.89 ms of CPU a ping on SQLite, most of it building and compiling
# querysets (`.first()` alone 0.4 ms), which a ping, a thousand a second,
# need not pay. Column lists follow the models; tests/checks/test_pings.py
# checks them against a row written by the ORM.
CHECK_TABLE, PING_TABLE = Check._meta.db_table, Ping._meta.db_table
READ_CHECK = (
    "SELECT id, schedule, timezone, period, grace, name, state, last_ping_at, last_start_at,"
    " next_expected_at, down_at, n_pings, rate_window, rate_count"
    f" FROM {CHECK_TABLE} WHERE token = %s"
)
# PostgreSQL locks the row (two pings of one check queue); SQLite's
# BEGIN IMMEDIATE already holds the database's write lock.
FOR_UPDATE = {"postgresql": " FOR UPDATE"}
WRITE_CHECK = (
    f"UPDATE {CHECK_TABLE} SET state = %s, last_ping_at = %s, last_start_at = %s,"
    " next_expected_at = %s, down_at = %s, n_pings = %s, rate_window = %s, rate_count = %s"
    " WHERE id = %s"
)
WRITE_PING = (
    f"INSERT INTO {PING_TABLE} (subject_id, n, kind, exit_status, received_at, body,"
    " body_truncated, remote_addr, user_agent, duration)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
MOMENT = Ping._meta.get_field("received_at")
DURATION = Ping._meta.get_field("duration")


class Found(NamedTuple):
    """The check's row as READ_CHECK reads it."""

    id: int
    schedule: str
    timezone: str
    period: int | None
    grace: int
    name: str
    state: str
    last_ping_at: datetime | None
    last_start_at: datetime | None
    next_expected_at: datetime | None
    down_at: datetime | None
    n_pings: int
    rate_window: int
    rate_count: int

    def timing(self) -> states.Timing:
        return states.Timing(
            schedule=self.schedule,
            timezone=self.timezone,
            period=timedelta(seconds=self.period) if self.period is not None else None,
            grace=timedelta(seconds=self.grace),
            key=self.name,
        )

    def status(self) -> states.Status:
        return states.Status(
            state=self.state,
            last_ping_at=aware(self.last_ping_at),
            last_start_at=aware(self.last_start_at),
            next_expected_at=aware(self.next_expected_at),
            down_at=aware(self.down_at),
        )


def aware(moment: datetime | str | None) -> datetime | None:
    """A datetime column's value as the ORM would give it: SQLite's come
    back naive (UTC) or, without its converters, as text."""
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def moment(when: datetime | None) -> Any:
    """A datetime as the database takes it (SQLite: UTC text)."""
    return MOMENT.get_db_prep_value(when, connection)


def record(ping: Received) -> str:
    """Record `ping`; FOUND, NOT_FOUND (no check has the token) or LIMITED."""
    pings, window = limit()
    current = int(ping.at.timestamp()) // window
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(READ_CHECK + FOR_UPDATE.get(db.vendor(), ""), [ping.token])
        row = cursor.fetchone()
        if row is None:
            return NOT_FOUND
        found = Found(*row)
        counted = found.rate_count + 1 if found.rate_window == current else 1
        if counted > pings:
            return LIMITED
        outcome = states.on_ping(
            found.timing(), found.status(), ping.kind, ping.at, ping.exit_status
        )
        new, n = outcome.status, found.n_pings + 1
        cursor.execute(
            WRITE_CHECK,
            [
                new.state,
                *(moment(when) for when in (new.last_ping_at, new.last_start_at)),
                *(moment(when) for when in (new.next_expected_at, new.down_at)),
                n,
                current,
                counted,
                found.id,
            ],
        )
        text, truncated = body_text(ping.body)
        cursor.execute(
            WRITE_PING,
            [
                found.id,
                n,
                ping.kind,
                ping.exit_status,
                moment(ping.at),
                text,
                truncated,
                ping.remote_addr[:45],
                ping.user_agent[:200],
                DURATION.get_db_prep_value(outcome.duration, connection),
            ],
        )
        if outcome.event is not None:
            check = Check.objects.get(pk=found.id)  # its labels and project: rarely
            events.emit(outcome.event, check, ping.at, reason_of(ping, found.state))
    return FOUND


def reason_of(ping: Received, before: str) -> str:
    if ping.kind == states.FAIL:
        return "a fail ping"
    if ping.kind == states.EXIT and ping.exit_status:
        return f"exit status {ping.exit_status}"
    return f"a success ping (was {before})"
