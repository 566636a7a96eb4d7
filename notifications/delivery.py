"""Delivering the outbox (docs/design.md §9): due notifications, sent at least once.

A notification is delivered under a claim (a lease): `claimed_by` names the
claim, `claimed_until` says when it lapses. Claims are short database
transactions; the sending happens outside any transaction, in a pool of
CRONIQ_NOTIFY_WORKERS threads, so several notifiers (loops on PostgreSQL,
or a web process sending a test) never deliver one notification at the same
time, and a slow receiver holds one thread and no lock. The result of a try
is written only while the claim is still held: a notifier that died
mid-send loses its claim when the lease lapses, and the next one sends the
same notification again, with the same `Croniq-Delivery` id (the one way a
receiver sees an id twice).

Each try is a Delivery row (the delivery log). A failed try is retried after
1 s, 2 s, 4 s ... (at most 10 minutes) until the notification is older than
CRONIQ_NOTIFY_GIVE_UP; then it is given up, audited and counted.
"""

import collections
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min, Q, QuerySet
from django.db.utils import InterfaceError, OperationalError

import audit
from notifications import channels
from notifications.models import Channel, Delivery, Notification

log = logging.getLogger("croniq.notifications")

# Beyond the channel's timeout, a lease covers reading the notification and
# writing the try's result.
LEASE_MARGIN = 5.0
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 600.0
DELIVERED, FAILED, GIVEN_UP = "delivered", "failed", "given_up"
TOTAL = "croniq_notifications_total"
LATENCY = "croniq_notification_delivery_seconds"
TEST_SUMMARY = "Test notification from Croniq"


@dataclass(frozen=True)
class Claim:
    """A notification this notifier may deliver until `until`."""

    id: uuid.UUID
    token: str  # the `claimed_by` value: the claim, not only its holder
    until: datetime
    # As read when claimed (with its channel); nobody else changes it meanwhile.
    notification: Notification | None = field(default=None, compare=False, repr=False)


def backoff(attempts: int) -> float:
    """Seconds to wait after `attempts` failed tries: 1, 2, 4 ... 600."""
    exponent = min(max(attempts, 1) - 1, 20)
    return min(MAX_BACKOFF, FIRST_BACKOFF * 2**exponent)


def default_owner() -> str:
    """Who claims: this host and process (written in `claimed_by`)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def due(now: datetime) -> QuerySet:
    """Pending notifications that may be tried at `now`, oldest first (the
    `notification_due` index; routing sets `next_attempt_at`)."""
    return (
        Notification.objects.filter(
            state=Notification.PENDING, next_attempt_at__lte=now, channel__enabled=True
        )
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lte=now))
        .order_by("next_attempt_at", "created_at")
    )


def next_due_at(now: datetime) -> datetime | None:
    """When the earliest pending notification comes due after `now`, or
    None: its next attempt, or the end of a claim on it (a notifier that
    died holding it: then anyone may take it)."""
    pending = Notification.objects.filter(state=Notification.PENDING)
    found = pending.aggregate(
        attempt=Min("next_attempt_at", filter=Q(next_attempt_at__gt=now)),
        claim=Min("claimed_until", filter=Q(claimed_until__gt=now)),
    )
    return min((at for at in found.values() if at is not None), default=None)


def lease_seconds(timeout: float) -> float:
    return timeout + LEASE_MARGIN


# A lane claims this many at a time (one transaction), then sends them in turn.
BATCH = 4


def claim(now: datetime, count: int = 1, owner: str | None = None) -> list[Claim]:
    """Claim up to `count` due notifications for one try each; [Claim].

    Another notifier's unexpired claim is skipped (on PostgreSQL without
    waiting for its lock); an expired one is taken over.
    """
    token = f"{(owner or default_owner())[:80]}/{uuid.uuid4().hex[:12]}"
    if connection.vendor != "postgresql":
        return claim_in_one_statement(now, count, token)
    candidates = due(now).select_related("channel")
    candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    with transaction.atomic():
        return write_claims(list(candidates[:count]), token, now)


def write_claims(notifications: list[Notification], token: str, now: datetime) -> list[Claim]:
    """Claim `notifications` (PostgreSQL, locked by the caller) to be sent
    one after another: each lease covers the tries before it.

    One UPDATE written in SQL: an ORM update per notification was about a
    sixth of a delivery lane's CPU (cProfile, 400 deliveries). The conditions
    of a claim are checked again, though the caller's lock upholds them."""
    if not notifications:
        return []
    leases = []
    until = now + timedelta(seconds=LEASE_MARGIN)
    for notification in notifications:
        until += timedelta(seconds=notification.channel.timeout)
        leases.append(until)
    rows = ", ".join(["(%s::uuid, %s::timestamptz)"] * len(notifications))
    pairs = zip((notification.pk for notification in notifications), leases, strict=True)
    params = [value for pair in pairs for value in pair]
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_LEASES.format(rows=rows), [token, *params, Notification.PENDING, now])
        claimed = {pk for (pk,) in cursor.fetchall()}
    return [
        Claim(notification.pk, token, lease, notification)
        for notification, lease in zip(notifications, leases, strict=True)
        if notification.pk in claimed
    ]


CLAIM_LEASES = f"""
    UPDATE {Notification._meta.db_table} notification
    SET claimed_until = lease.until, claimed_by = %s
    FROM (VALUES {{rows}}) AS lease (id, until)
    WHERE notification.id = lease.id AND notification.state = %s
      AND (notification.claimed_until IS NULL OR notification.claimed_until <= %s)
    RETURNING notification.id
"""


def claim_in_one_statement(now: datetime, count: int, token: str) -> list[Claim]:
    """SQLite: the claim is one UPDATE of the due rows, so the notifier holds
    the database's single write lock, which the scheduler loop's tick needs
    too, for one statement (a read and an update per row held it for 16 ms
    on average in a burst, bench/notifications.py). The claimed rows are
    read after the commit. One lease covers the tries of all of them, at
    the longest timeout of an enabled channel."""
    longest = Channel.objects.filter(enabled=True).aggregate(longest=Max("timeout"))["longest"]
    until = now + timedelta(seconds=LEASE_MARGIN + count * (longest or 0.0))
    oldest = due(now).values("pk")[:count]
    with transaction.atomic():
        Notification.objects.filter(pk__in=oldest).update(claimed_until=until, claimed_by=token)
    claimed = Notification.objects.filter(
        claimed_by=token, state=Notification.PENDING, next_attempt_at__lte=now
    ).select_related("channel")  # by the notification_due index
    return [Claim(n.pk, token, until, n) for n in claimed.order_by("next_attempt_at", "created_at")]


# -- one try -------------------------------------------------------------------


def deliver(claimed: Claim, now: datetime, retry: bool = True) -> channels.Result:
    """Try once to deliver a claimed notification and write the try; the
    Result (channels.Result).

    `retry=False` (a test message) gives up after one failed try instead of
    scheduling another.
    """
    tried = attempt(claimed, now, retry)
    write(tried)
    return tried.result


def attempt(claimed: Claim, now: datetime, retry: bool = True) -> "Tried":
    """Send a claimed notification once; the Tried, not written yet."""
    notification = claimed.notification
    if notification is None:
        notification = Notification.objects.select_related("channel").get(pk=claimed.id)
    result, sent = send(notification, notification.channel, now)
    return Tried(notification, claimed, result, now, retry, sent)


def write(*tries: "Tried") -> None:
    """record_many, saying which claims lapsed while they were tried."""
    for tried, outcome in zip(tries, record_many(tries), strict=True):
        if outcome is None:
            log.warning(
                "notification %s: the claim lapsed during the try; its new holder retries it",
                tried.notification.pk,
            )


def send(
    notification: Notification, channel: Channel, now: datetime
) -> tuple[channels.Result, bool]:
    """(Result, whether anything was sent). A bad config or an unset secret
    is a failed try with its message (it names the variable, never a value)."""
    try:
        result = channels.send(
            channel.kind, channel.config(), message_of(notification), now, timeout=channel.timeout
        )
        return result, True
    except ValueError as error:
        return channels.Result(False, None, f"configuration: {error}", 0.0), False
    except Exception as error:  # a bug must not keep the claim or stop the others
        log.exception("notification %s: delivery failed unexpectedly", notification.pk)
        return channels.Result(False, None, f"internal error: {type(error).__name__}", 0.0), False


def message_of(notification: Notification) -> dict[str, Any]:
    """The §9 body; its `id` is always the delivery id."""
    message = dict(notification.message)
    message["id"] = str(notification.pk)
    message.setdefault("event", notification.name)
    return message


@dataclass(frozen=True)
class Tried:
    """One try, sent and waiting to be written (`record_many`)."""

    notification: Notification
    claimed: Claim
    result: channels.Result
    at: datetime
    retry: bool = True  # False: a test message, given up after one failed try
    sent: bool = True  # something went out: its latency goes into the histogram


def record(
    notification: Notification,
    claimed: Claim,
    result: channels.Result,
    now: datetime,
    retry: bool = True,
    observe: bool = True,
) -> str | None:
    """Write the try and its consequence, if the claim still holds; the
    outcome (DELIVERED, FAILED or GIVEN_UP), or None when the claim was lost.
    `observe`: the try's latency goes into the histogram (something was sent)."""
    return record_many([Tried(notification, claimed, result, now, retry, observe)])[0]


def record_many(tries: list[Tried]) -> list[str | None]:
    """Write tries in one transaction; their outcomes in order (None where
    the claim was lost). A burst of deliveries then takes a few write
    transactions instead of one per try: on SQLite each one waits for the
    database's single writer, which the scheduler loop's tick needs too."""
    outcomes = []
    deliveries = []
    totals = collections.Counter()
    latencies = []
    with transaction.atomic():
        for tried in tries:
            outcome = write_try(tried)
            outcomes.append(outcome)
            if outcome is None:
                continue
            notification, result = tried.notification, tried.result
            deliveries.append(
                Delivery(
                    notification=notification,
                    attempt=notification.attempts + 1,
                    at=tried.at,
                    ok=result.ok,
                    status_code=result.status_code,
                    error=result.error[:2000],
                    latency=result.latency,
                )
            )
            series = (notification.channel.name, notification.name)
            totals[(*series, DELIVERED if result.ok else FAILED)] += 1
            if tried.sent:
                latencies.append(result.latency)
            if outcome == GIVEN_UP and tried.retry:
                give_up(notification, notification.attempts + 1, result, tried.at)
                totals[(*series, GIVEN_UP)] += 1
        Delivery.objects.bulk_create(deliveries)
        for (channel, event, outcome), amount in sorted(totals.items()):
            audit.increment(TOTAL, amount, channel=channel, event=event, outcome=outcome)
        audit.observe(LATENCY, *latencies)
    return outcomes


def write_try(tried: Tried) -> str | None:
    """The notification's new state after `tried`, written if the claim
    still holds; the outcome, or None."""
    notification, result, now = tried.notification, tried.result, tried.at
    fields = {
        "attempts": notification.attempts + 1,
        "claimed_until": None,
        "claimed_by": "",
        "last_status": result.status_code,
        "last_error": result.error[:2000],
    }
    if result.ok:
        outcome = DELIVERED
        fields.update(state=Notification.DELIVERED, delivered_at=now, next_attempt_at=None)
    elif not tried.retry or given_up(notification, now):
        outcome = GIVEN_UP
        fields.update(state=Notification.GIVEN_UP, next_attempt_at=None)
    else:
        outcome = FAILED
        fields["next_attempt_at"] = now + timedelta(seconds=backoff(notification.attempts + 1))
    with connection.cursor() as cursor:
        cursor.execute(
            WRITE_TRY,
            [
                *(prepared(name, fields.get(name)) for name in WRITTEN_BY_A_TRY),
                prepared("id", notification.pk),
                Notification.PENDING,
                tried.claimed.token,
            ],
        )
        held = cursor.rowcount
    return outcome if held else None


def prepared(name: str, value: Any) -> Any:
    """`value` for the notification's column `name`, as the ORM writes it."""
    return Notification._meta.get_field(name).get_db_prep_save(value, connection)


# What a try writes, in SQL written once: the ORM's UPDATE, compiled for
# every try, was about a tenth of the notifier's CPU in a burst (py-spy).
# A column a try leaves alone (the state when it failed, delivered_at
# unless delivered) keeps its value.
WRITTEN_BY_A_TRY = (
    "attempts", "claimed_until", "claimed_by", "last_status", "last_error", "state",
    "delivered_at", "next_attempt_at",
)  # fmt: skip
KEPT_UNLESS_GIVEN = ("state", "delivered_at")
WRITE_TRY = "UPDATE {} SET {} WHERE id = %s AND state = %s AND claimed_by = %s".format(
    Notification._meta.db_table,
    ", ".join(
        f"{name} = COALESCE(%s, {name})" if name in KEPT_UNLESS_GIVEN else f"{name} = %s"
        for name in WRITTEN_BY_A_TRY
    ),
)


def given_up(notification: Notification, now: datetime) -> bool:
    age = (now - notification.created_at).total_seconds()
    return age > settings.CRONIQ_NOTIFY_GIVE_UP


def give_up(
    notification: Notification, attempts: int, result: channels.Result, now: datetime
) -> None:
    audit.record(
        "notification.given_up",
        target=notification,
        at=now,
        data={
            "channel": notification.channel.name,
            "event": notification.name,
            "attempts": attempts,
            "last_status": result.status_code,
            "last_error": result.error[:500],
        },
    )


# -- many at once ----------------------------------------------------------------


class Budget:
    """How many more notifications the lanes of one round may claim."""

    def __init__(self, limit) -> None:
        self.left = limit
        self.lock = threading.Lock()

    def take(self, wanted: int) -> int:
        """Up to `wanted` of what is left (0 when spent)."""
        with self.lock:
            granted = max(0, min(wanted, self.left))
            self.left -= granted
            return granted

    def give_back(self, unused: int) -> None:
        with self.lock:
            self.left += unused


def lane(
    clock: Callable[[], datetime],
    owner: str,
    budget: Budget,
    stopping: threading.Event | None = None,
    recorder: "Recorder | None" = None,
    keep_connection: bool = False,
    batch: int = BATCH,
) -> int:
    """One worker: claim a few due notifications (BATCH), deliver them one
    after another, repeat until none is due, the budget is spent or
    `stopping` is set; how many it tried.

    Runs in a pool thread. With `keep_connection` (a long-lived pool) the
    thread's database connection stays open for its next lane, so a
    notification does not wait for a new connection (several milliseconds
    on PostgreSQL); after an error it is closed either way.
    """
    try:
        tried = deliver_in_turn(clock, owner, budget, stopping, recorder, batch)
    except BaseException:
        connection.close()
        raise
    if not keep_connection:
        connection.close()
    return tried


def deliver_in_turn(
    clock: Callable[[], datetime],
    owner: str,
    budget: Budget,
    stopping: threading.Event | None = None,
    recorder: "Recorder | None" = None,
    batch: int = BATCH,
) -> int:
    """The lane's work, claiming `batch` at a time; with a `recorder` the
    tries are written by it (a batch per transaction), otherwise one by one."""
    tried = 0
    while stopping is None or not stopping.is_set():
        granted = budget.take(batch)
        if not granted:
            break
        claims = claim(clock(), granted, owner)
        budget.give_back(granted - len(claims))
        if not claims:
            break
        for n, claimed in enumerate(claims):
            if stopping is not None and stopping.is_set():
                release(claims[n:])
                break
            if recorder is None:
                deliver(claimed, clock())
            else:
                recorder.put(attempt(claimed, clock()))
            tried += 1
    return tried


# A transaction writes at most this many tries. On SQLite it holds the one
# write lock, which the loop's tick waits for: 200 tries held it 15 to 30 ms
# in a burst, 32 about 4 (bench/notifications.py --only burst --steps).
MOST_PER_WRITE = 32
# Pauses before writing a batch again when the database is unavailable; after
# the last, the claims lapse and the notifications are sent again.
WRITE_RETRIES = (0.5, 2.0, 5.0)


class Recorder:
    """Writes the tries of every lane from one thread, all that have arrived
    in each transaction (a group commit): under a burst the lanes take a
    few write transactions a second, and a try alone is written at once.

    The claim's lease (LEASE_MARGIN beyond the channel's timeout) covers
    the wait in the queue.
    """

    def __init__(self, written=None) -> None:
        self.written = written  # called after each write (the notifier wakes)
        self.queue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self.run, name="croniq-record", daemon=True)

    def start(self) -> "Recorder":
        self.thread.start()
        return self

    def put(self, tried: Tried) -> None:
        self.queue.put(tried)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, then end (call once no lane puts any more)."""
        self.queue.put(None)
        self.thread.join(timeout)

    def run(self) -> None:
        try:
            while True:
                batch = self.take()
                closing = batch[-1] is None
                tries = [tried for tried in batch if tried is not None]
                if tries:
                    self.write(tries)
                if closing:
                    return
        finally:
            connection.close()

    def take(self) -> list[Tried]:
        """The next batch: waits for one try, then takes what else is queued."""
        batch = [self.queue.get()]
        while batch[-1] is not None and len(batch) < MOST_PER_WRITE:
            try:
                batch.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def write(self, tries: list[Tried]) -> None:
        for pause in (0.0, *WRITE_RETRIES):
            time.sleep(pause)
            try:
                write(*tries)
                break
            except (OperationalError, InterfaceError) as error:
                log.warning("notifier: writing %d tries failed (%s)", len(tries), error)
                connection.close()
            except Exception:
                log.exception("notifier: writing %d tries failed", len(tries))
                break
        else:
            log.warning(
                "notifier: %d tries not written; their claims lapse and they are sent again",
                len(tries),
            )
        if self.written is not None:
            self.written()


def release(claims: Iterable[Claim]) -> None:
    """Give back claims not tried (a stop): due again at once for anyone."""
    for claimed in claims:
        Notification.objects.filter(pk=claimed.id, claimed_by=claimed.token).update(
            claimed_until=None, claimed_by=""
        )


def lane_plan(now: datetime, workers: int) -> tuple[int, int]:
    """(lanes, batch): how many lanes are worth starting (no more than there
    is due work) and how many each claims at a time, so the due work is
    spread over them: four due and two free lanes make two lanes of two, not
    one lane holding all four behind a receiver that hangs."""
    waiting = due(now).values("pk")[: workers * BATCH].count()
    lanes = min(workers, waiting)
    if not lanes:
        return 0, BATCH
    return lanes, min(BATCH, -(-waiting // lanes))


def deliver_due(
    now: datetime, limit: int = 200, owner: str | None = None, workers: int | None = None
) -> int:
    """Deliver up to `limit` notifications due at `now`, each tried once, in
    up to CRONIQ_NOTIFY_WORKERS threads; how many were tried.

    Returns when every try has ended (each is bounded by its channel's
    timeout)."""
    workers = min(workers or settings.CRONIQ_NOTIFY_WORKERS, limit)
    starting, batch = lane_plan(now, workers)
    budget = Budget(limit)
    if starting <= 1:
        # One lane: in the caller's thread (and its transaction, in tests).
        return deliver_in_turn(lambda: now, owner, budget, batch=batch) if starting else 0
    with ThreadPoolExecutor(starting, thread_name_prefix="croniq-deliver") as pool:
        tries = [
            pool.submit(lane, lambda: now, owner, budget, batch=batch) for _ in range(starting)
        ]
    return sum(future.result() for future in tries)


# -- a test message --------------------------------------------------------------


def send_test(channel: Channel, now: datetime, actor: object) -> channels.Result:
    """Send "Test notification from Croniq" on `channel` now, through the
    delivery log (a Notification named "test"); the Result. Audited."""
    token = f"{default_owner()[:80]}/test-{uuid.uuid4().hex[:8]}"
    notification = Notification(
        name="test",
        channel=channel,
        state=Notification.PENDING,
        created_at=now,
        next_attempt_at=now,
        # Claimed from the start: no notifier sends it beside us.
        claimed_by=token,
        claimed_until=now + timedelta(seconds=lease_seconds(channel.timeout)),
    )
    notification.message = {
        "id": str(notification.pk),
        "event": "test",
        "at": now.isoformat(),
        "summary": TEST_SUMMARY,
        "url": settings.CRONIQ_PUBLIC_URL + "/",
    }
    notification.save()
    claimed = Claim(notification.pk, token, notification.claimed_until, notification)
    result = deliver(claimed, now, retry=False)
    audit.record(
        "notification.test",
        target=channel,
        actor=actor,
        at=now,
        data={
            "notification": str(notification.pk),
            "ok": result.ok,
            "status_code": result.status_code,
            "error": result.error[:500],
        },
    )
    return result
