"""scheduler.stalled: no scheduler tick for longer than a grace.

A dead loop cannot report itself, so the web processes, which outlive it,
watch its heartbeat (`audit.last_tick()`): each runs one daemon thread
(`start`, called when the ASGI application is built) that calls
`check_stall` every CHECK_EVERY seconds (CRONIQ_STALL_WATCH turns it off).
The web process of `serve` runs it too: there a loop thread that dies stops
the process, but one that hangs is reported like a dead loop.

Once across all web processes: the event's key names the last tick and the
grace (a later stall, after the loop ticked again, is a new key), and the
process that sees the stall first locks the tick's heartbeat row while it
records the event, so the others wait for it and find the event recorded.
Nobody else would deliver it (the notifier runs in the dead loop), so the
watch routes and delivers it itself (`deliver_now`), and goes on routing
and delivering what is due (retries, other events) at each look while the
stall lasts: the outbox's claims make that safe from several processes at
once, as they do for several loops.

Not reported: a stall ending (the loop's next tick says nothing more), and
an install whose loop never ticked (there is no last tick to name; the
`/metrics` heartbeat gauge shows it).
"""

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

import audit
from audit.models import Heartbeat
from audit.recording import SCHEDULER_TICK
from notifications.detection import number, thresholds
from notifications.models import Event
from scheduler.runs import events

log = logging.getLogger("croniq.notifications.stall_watch")

# Seconds between two looks at the heartbeat.
CHECK_EVERY = 10.0

_watch = None
_watch_lock = threading.Lock()


def check_stall(now: datetime) -> Event | None:
    """Record scheduler.stalled for each grace the last tick is older than,
    unless recorded already, and, the loop being stalled, route and deliver
    what is due. Returns the Event this call recorded (the smallest
    grace's), or None."""
    last = audit.last_tick()
    if last is None:
        return None
    passed = [g for g in stall_graces() if now - last > timedelta(seconds=g)]
    if not passed:
        return None
    recorded = []
    keys = [stall_key(last, grace) for grace in passed]
    if Event.objects.filter(key__in=keys).count() < len(keys):
        recorded = record_stall(now, passed)
    deliver_now(now)
    return recorded[0] if recorded else None


def stall_key(last: datetime, grace: float) -> str:
    return f"scheduler.stalled:{last.isoformat()}:{number(grace)}"


def stall_graces() -> list[float]:
    return thresholds("scheduler.stalled", "grace", settings.CRONIQ_STALL_GRACE)


def record_stall(now: datetime, graces: list[float]) -> list[Event]:
    """[Event] recorded by this call, under the heartbeat row's lock."""
    recorded = []
    with transaction.atomic():
        # Re-read under the lock: another web process may have recorded the
        # stall, or the loop ticked, while this one waited.
        last = (
            Heartbeat.objects.select_for_update()
            .filter(name=SCHEDULER_TICK)
            .values_list("at", flat=True)
            .first()
        )
        if last is None:
            return []
        for grace in graces:
            if now - last <= timedelta(seconds=grace):
                break
            key = stall_key(last, grace)
            if Event.objects.filter(key=key).exists():
                continue
            data = {
                "last_tick": last.isoformat(),
                "grace": grace,
                "stalled_for": round((now - last).total_seconds(), 3),
            }
            events.emit("scheduler.stalled", at=now, data=data, key=key)
            recorded.append(Event.objects.get(key=key))
    return recorded


def deliver_now(now: datetime) -> None:
    """Route the unrouted events and deliver what is due, here and now (the
    loop's notifier is not running). A failure is logged: the event stays
    recorded and unrouted, for the next look or the loop's return."""
    try:
        from notifications.delivery import deliver_due
        from notifications.routing import route_pending
    except ImportError:
        log.warning("no notification routing or delivery in this install: nothing delivered")
        return
    try:
        route_pending(now)
        deliver_due(now)
    except Exception:
        log.exception("delivering notifications during a scheduler stall failed")


class StallWatch(threading.Thread):
    """The web process's thread: `check_stall` every `every` seconds; a
    failing check (the database away) is logged and the next one tried."""

    def __init__(self, every=CHECK_EVERY, clock=timezone.now) -> None:
        super().__init__(name="croniq-stall-watch", daemon=True)
        self.every = every
        self.clock = clock
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.check_once()
            self.stopped.wait(self.every)

    def check_once(self) -> Event | None:
        try:
            event = check_stall(self.clock())
        except DatabaseError as error:
            # The database away, or not migrated yet (a web process may
            # start first): one line, not a traceback every few seconds.
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            log.warning("checking for a scheduler stall failed (%s); trying again", first_line)
            return None
        except Exception:
            log.exception("checking for a scheduler stall failed; trying again")
            return None
        finally:
            # This thread's connection: a fresh one for each look, none held
            # idle between them, none left broken by a database restart.
            connection.close()
        if event is not None:
            log.warning(
                "the scheduler has not ticked since %s: scheduler.stalled reported",
                event.data["last_tick"],
            )
        return event

    def stop(self) -> None:
        self.stopped.set()


def start() -> "StallWatch | None":
    """Start this process's watch once (unless CRONIQ_STALL_WATCH is off);
    returns it, or None."""
    global _watch
    if not settings.CRONIQ_STALL_WATCH:
        return None
    with _watch_lock:
        if _watch is None or not _watch.is_alive():
            _watch = StallWatch()
            _watch.start()
        return _watch
