"""Delivering the outbox (docs/design.md §9): due notifications, sent at least once.

A notification is delivered under a claim (a lease, `delivery_claims`):
`claimed_by` names the claim, `claimed_until` says when it lapses. Claims
are short database transactions; the sending happens outside any transaction, in a pool of
CRONIQ_NOTIFY_WORKERS threads, so several notifiers (loops on PostgreSQL,
or a web process sending a test) never deliver one notification at the same
time, and a slow receiver holds one thread and no lock. The result of a try
is written only while the claim is still held: a notifier that died
mid-send loses its claim when the lease lapses, and the next one sends the
same notification again, with the same `Croniq-Delivery` id (the one way a
receiver sees an id twice).

Each try is a Delivery row (the delivery log, `delivery_log`). A failed try is retried after
1 s, 2 s, 4 s ... (at most 10 minutes) until the notification is older than
CRONIQ_NOTIFY_GIVE_UP; then it is given up, audited and counted.
"""

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.utils import InterfaceError, OperationalError

import audit
from notifications import channels
from notifications.delivery_claims import (
    BATCH,
    Claim,
    claim,
    default_owner,
    due,
    lease_seconds,
)

# Importable from here, as the notifier and the tests ask: when work comes due.
from notifications.delivery_claims import LEASE_MARGIN as LEASE_MARGIN
from notifications.delivery_claims import next_due_at as next_due_at
from notifications.delivery_log import Tried, record_many
from notifications.models import Channel, Notification

log = logging.getLogger("croniq.notifications")

TEST_SUMMARY = "Test notification from Croniq"


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
