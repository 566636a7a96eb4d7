"""Recording pings: one short transaction a batch (docs/design.md §12).

Read the pinged checks by their tokens (probes of the token's unique index,
locked on PostgreSQL), and for each ping in its order count it against the
flood limit and move the state machine (`checks.states`); then write the
checks and insert the pings, and, only for a check that went down or came
back up, the event into the notifications outbox. Nothing else: no loop
wake-up per ping (an event pokes the notifier after commit, as every event
does), no read of other checks. `checks.ping_batches` gathers the pings a
web process receives while a transaction writes into the next one.

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


# A batch of pings is three statements, written out: one read of the
# checks' rows, their writes and the pings' inserts each sent at once
# (executemany: psycopg pipelines them, one round trip). Through the ORM a
# ping's work cost 0.89 ms of CPU on SQLite, most of it building and
# compiling querysets (`.first()` alone 0.4 ms), which a ping, a thousand a
# second, need not pay. Column lists follow the models;
# tests/checks/test_ping_endpoints.py reads what they write through the ORM.
CHECK_TABLE, PING_TABLE = Check._meta.db_table, Ping._meta.db_table
READ_CHECKS = (
    "SELECT id, schedule, timezone, period, grace, name, state, last_ping_at, last_start_at,"
    " next_expected_at, down_at, n_pings, rate_window, rate_count, token"
    f" FROM {CHECK_TABLE} WHERE token IN ({{marks}}) ORDER BY token"
)
# PostgreSQL locks the rows, in the order of their tokens (two batches of
# pings never wait on each other in a circle); SQLite's BEGIN IMMEDIATE
# already holds the database's write lock.
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
    """A check's row as READ_CHECKS reads it, and as its pings so far in
    the batch left it."""

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
    token: str

    def timing(self) -> states.Timing:
        return states.timing_of(self.schedule, self.timezone, self.period, self.grace, self.name)

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
    return record_all([ping])[0]


def record_all(received: list[Received]) -> list[str]:
    """Record `received` in one transaction, each as `record` would, in
    their order (pings of one check move its state machine one after the
    other); their answers in the same order."""
    tokens = sorted({ping.token for ping in received})
    marks = ", ".join(["%s"] * len(tokens))
    answers = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(READ_CHECKS.format(marks=marks) + FOR_UPDATE.get(db.vendor(), ""), tokens)
        checks = {row[-1]: Found(*row) for row in cursor.fetchall()}
        changed: dict[str, Found] = {}
        inserts, transitions = [], []
        for ping in received:
            check = checks.get(ping.token)
            if check is None:
                answers.append(NOT_FOUND)
                continue
            answer, check, outcome = step(check, ping)
            answers.append(answer)
            if answer != FOUND:
                continue
            checks[ping.token] = changed[ping.token] = check
            inserts.append(ping_row(check, ping, outcome.duration))
            if outcome.event is not None:
                transitions.append((outcome.event, check, ping, reason_of(ping, outcome.before)))
        cursor.executemany(WRITE_CHECK, [check_row(check) for check in changed.values()])
        cursor.executemany(WRITE_PING, inserts)
        for name, check, ping, reason in transitions:
            row = Check.objects.get(pk=check.id)  # its labels and project: rarely
            events.emit(name, row, ping.at, reason)
    return answers


class Stepped(NamedTuple):
    """What a ping did to its check, beside the check's new row."""

    event: str | None
    duration: timedelta | None
    before: str  # the check's state before the ping


def step(check: Found, ping: Received) -> tuple[str, Found, Stepped]:
    """(answer, the check after `ping`, what it did): LIMITED past the flood
    limit (the check unchanged), else FOUND."""
    pings, window = limit()
    current = int(ping.at.timestamp()) // window
    counted = check.rate_count + 1 if check.rate_window == current else 1
    if counted > pings:
        return LIMITED, check, Stepped(None, None, check.state)
    outcome = states.on_ping(check.timing(), check.status(), ping.kind, ping.at, ping.exit_status)
    new = outcome.status
    after = check._replace(
        state=new.state,
        last_ping_at=new.last_ping_at,
        last_start_at=new.last_start_at,
        next_expected_at=new.next_expected_at,
        down_at=new.down_at,
        n_pings=check.n_pings + 1,
        rate_window=current,
        rate_count=counted,
    )
    return FOUND, after, Stepped(outcome.event, outcome.duration, check.state)


def check_row(check: Found) -> list[Any]:
    """WRITE_CHECK's parameters."""
    status = check.status()
    return [
        status.state,
        *(moment(when) for when in (status.last_ping_at, status.last_start_at)),
        *(moment(when) for when in (status.next_expected_at, status.down_at)),
        check.n_pings,
        check.rate_window,
        check.rate_count,
        check.id,
    ]


def ping_row(check: Found, ping: Received, duration: timedelta | None) -> list[Any]:
    """WRITE_PING's parameters: the ping numbered as the check counted it."""
    text, truncated = body_text(ping.body)
    return [
        check.id,
        check.n_pings,
        ping.kind,
        ping.exit_status,
        moment(ping.at),
        text,
        truncated,
        ping.remote_addr[:45],
        ping.user_agent[:200],
        DURATION.get_db_prep_value(duration, connection),
    ]


def reason_of(ping: Received, before: str) -> str:
    if ping.kind == states.FAIL:
        return "a fail ping"
    if ping.kind == states.EXIT and ping.exit_status:
        return f"exit status {ping.exit_status}"
    return f"a success ping (was {before})"
