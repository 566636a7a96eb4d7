"""The scheduler loop: one tick of every due step, then a precise sleep.

The steps come from the apps (`scheduler.steps`): firing and server-side
timeouts from the scheduler, lease reaping and runner states from runners,
pruning from audit and the scheduler, each on its own cadence.

It sleeps until the earliest due `next_run_at` (capped by the interval) so a
job fires `ticks.FIRE_LEAD` before its instant (at the instant, a job with
an overlap policy whose run is open), and wakes early when a job is saved. A
database outage is logged and retried with backoff; any other error is
logged with its traceback and the loop carries on. Only a signal (stop())
ends it.
"""

import gc
import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.utils import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

from scheduler import job_edits, steps, ticks

log = logging.getLogger("croniq.scheduler")

MAX_OUTAGE_BACKOFF = 30.0
# Pause after an unexpected error outside any unit, so a bug cannot spin.
ERROR_PAUSE = 1.0
# How often a sleeping loop looks for edited jobs. It reads the jobs' edit
# marker (a MAX over the job table) only when a job may have been saved
# since its last look (`scheduler.job_edits`): at rest, almost never.
EDIT_CHECK_INTERVAL = 0.1
# How often an idle loop writes its heartbeat (`ticks.mark_tick`): every
# write wakes the processes that wait for commits (on SQLite, the notifier
# and each web process read what changed), so at rest once in a while, not
# every tick. A sixth of CRONIQ_STALL_GRACE at most, so the web processes'
# stall watch never takes a live loop for a dead one.
HEARTBEAT_AT_LEAST_EVERY = 5.0


def heartbeat_every():
    return min(HEARTBEAT_AT_LEAST_EVERY, settings.CRONIQ_STALL_GRACE / 6)


def drop_broken_connection():
    """The loop keeps its database connection from tick to tick: a new
    PostgreSQL session costs milliseconds, on every tick. One that a query
    found broken (the database restarted) is closed here, so this tick
    connects anew; run_forever closes it too when the error ends a tick."""
    if connection.connection is not None and connection.errors_occurred:
        if not connection.is_usable():
            connection.close()
        connection.errors_occurred = False


class SchedulerLoop:
    def __init__(self, interval=1.0, clock=timezone.now, fire_lead=ticks.FIRE_LEAD):
        self.interval = interval
        self.clock = clock
        self.fire_lead = fire_lead
        self.stopping = threading.Event()
        self.outage_backoff = 0.0
        self.last_job_edit = None
        self.edits = job_edits.watcher(connection)
        self.steps = steps.collect(self)
        self.last_run = {}  # step name -> when it last ran
        self.not_before = {}  # step name -> before then it has no work (Step.until)
        self.held = ticks.Held()  # jobs the last firing held back to their instant
        self.last_beat = None  # when the last tick wrote the heartbeat

    def stop(self):
        self.stopping.set()

    def units(self, now):
        """[(name, run)] of the steps due at `now`; each is marked as run."""
        return [(step.name, step.run) for step in self.steps if self.due(step, now)]

    def fire(self, now):
        return ticks.trigger_due(now, self.fire_lead, self.held)

    def due(self, step, now):
        later = self.not_before.get(step.name)
        if later is not None and now < later:
            return False
        last = self.last_run.get(step.name)
        if step.every and last is not None and (now - last).total_seconds() < step.every:
            return False
        # Every step runs on the first tick; after it, each housekeeping step
        # keeps a phase of its own, so they do not all come due on one tick
        # again (together 50-60 ms of CPU, bench/notifications.py --steps).
        self.last_run[step.name] = now + self.phase(step) if last is None else now
        return True

    def phase(self, step):
        """How much later than its `every` a housekeeping step runs the second
        time: the housekeeping steps spread evenly over their intervals."""
        housekeeping = [each.name for each in self.steps if each.every]
        if step.name not in housekeeping:
            return timedelta(0)
        return timedelta(seconds=step.every * housekeeping.index(step.name) / len(housekeeping))

    def tick(self, now):
        """Run every due step once; returns {step: count} for the steps that
        did work.

        A step that fails with anything but a database outage is logged and
        the steps after it still run.
        """
        done = {}
        untils = {step.name: step.until for step in self.steps if step.until}
        for name, unit in self.units(now):
            self.not_before.pop(name, None)
            try:
                count = unit(now)
                if name in untils:
                    self.not_before[name] = untils[name](now)
            except Exception as e:
                if not ticks.job_fault(e):
                    raise  # an outage: run_forever backs off
                log.exception("scheduler step %s failed; the other steps go on", name)
                continue
            if count:
                done[name] = count
        if done or self.heartbeat_due(now):
            ticks.mark_tick(now)
            self.last_beat = now
        return done

    def heartbeat_due(self, now):
        if self.last_beat is None or now < self.last_beat:
            return True
        return (now - self.last_beat).total_seconds() >= heartbeat_every()

    def run_once(self):
        drop_broken_connection()
        done = self.tick(self.clock())
        if done:
            log.info("tick: %s", " ".join(f"{k}={v}" for k, v in done.items()))
        return done

    def run_forever(self):
        log.info("scheduler loop started (interval %.2fs)", self.interval)
        # SQLite: the tick takes the write lock as soon as it is free, ahead
        # of the notifier's deliveries (croniq_project/sqlite). PostgreSQL
        # locks rows, not the database, and ignores it.
        connection.eager_write_lock = True
        # What is alive now (Django, the apps, their modules) lives as long
        # as the process: out of the collector's sight, a full collection
        # during a tick scans only what the loop made since (0.6 ms instead
        # of 40-50, bench/notifications.py --steps).
        gc.collect()
        gc.freeze()
        while not self.stopping.is_set():
            try:
                self.run_once()
                if self.outage_backoff:
                    log.info("database is back: scheduler loop resumed")
                self.outage_backoff = 0.0
                self.sleep_until_due()
            except (OperationalError, InterfaceError, DatabaseError) as e:
                self.outage_backoff = min(MAX_OUTAGE_BACKOFF, max(0.5, self.outage_backoff * 2))
                log.warning(
                    "database unavailable (%s); retrying in %.1fs",
                    str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__,
                    self.outage_backoff,
                )
                close_old_connections()
                self.stopping.wait(self.outage_backoff)
            except Exception:
                # A bug, not an outage: say where, and keep scheduling.
                log.exception("scheduler loop error; carrying on in %.1fs", ERROR_PAUSE)
                self.stopping.wait(ERROR_PAUSE)
        log.info("scheduler loop stopped")

    def sleep_until_due(self):
        """Sleep until the earliest due job, the interval, an edit, or a stop."""
        now = self.clock()
        earliest = ticks.earliest_due(now, self.fire_lead, self.held)
        seconds = self.interval
        if earliest is not None:
            seconds = min(seconds, max(0.0, (earliest - now).total_seconds()))
        deadline = time.monotonic() + seconds
        self.last_job_edit = self.last_job_edit or ticks.last_job_edit()
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.stopping.wait(min(left, EDIT_CHECK_INTERVAL)):
                return
            if not self.edits.moved():
                continue
            edit = ticks.last_job_edit()
            if edit != self.last_job_edit:
                self.last_job_edit = edit
                self.not_before.clear()  # an edit may bring a deadline forward
                return
