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
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

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


def record(ping: Received) -> str:
    """Record `ping`; FOUND, NOT_FOUND (no check has the token) or LIMITED."""
    pings, window = limit()
    current = int(ping.at.timestamp()) // window
    with transaction.atomic():
        check = db.for_update(Check.objects.filter(token=ping.token)).first()
        if check is None:
            return NOT_FOUND
        counted = check.rate_count + 1 if check.rate_window == current else 1
        if counted > pings:
            return LIMITED
        before = check.state
        outcome = states.on_ping(
            check.timing(), check.status(), ping.kind, ping.at, ping.exit_status
        )
        check.set_status(outcome.status)
        check.n_pings += 1
        check.rate_window, check.rate_count = current, counted
        Check.objects.filter(pk=check.pk).update(**row_values(check))
        text, truncated = body_text(ping.body)
        Ping.objects.create(
            subject=check,
            n=check.n_pings,
            kind=ping.kind,
            exit_status=ping.exit_status,
            received_at=ping.at,
            body=text,
            body_truncated=truncated,
            remote_addr=ping.remote_addr[:45],
            user_agent=ping.user_agent[:200],
            duration=outcome.duration,
        )
        if outcome.event is not None:
            events.emit(outcome.event, check, ping.at, reason_of(ping, before))
    return FOUND


def row_values(check: Check) -> dict[str, Any]:
    """What a ping changes on the check row (an UPDATE of these, not a save:
    no other column is written back over an edit made meanwhile)."""
    return {
        "state": check.state,
        "last_ping_at": check.last_ping_at,
        "last_start_at": check.last_start_at,
        "next_expected_at": check.next_expected_at,
        "down_at": check.down_at,
        "n_pings": check.n_pings,
        "rate_window": check.rate_window,
        "rate_count": check.rate_count,
    }


def reason_of(ping: Received, before: str) -> str:
    if ping.kind == states.FAIL:
        return "a fail ping"
    if ping.kind == states.EXIT and ping.exit_status:
        return f"exit status {ping.exit_status}"
    return f"a success ping (was {before})"
