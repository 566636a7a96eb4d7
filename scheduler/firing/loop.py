"""The scheduler loop: one tick of every due step, then a precise sleep.

The steps come from the apps (`scheduler.firing.steps`): firing and server-side
timeouts from the scheduler, lease reaping and runner states from runners,
pruning from audit and the scheduler, each on its own cadence.

It sleeps until the earliest due `next_run_at` (capped by the interval) so a
job fires `ticks.FIRE_LEAD` before its instant (at the instant, a job with
an overlap policy whose run is open), and wakes early when a job is saved.
It reads that earliest instant again only when it may have moved: a job
saved (`scheduler.firing.job_edits`), a tick that did something, and at the
latest every EARLIEST_REREAD_EVERY; at rest most ticks send no query. A
database outage is logged and retried with backoff; any other error is
logged with its traceback and the loop carries on. Only a signal (stop())
ends it.

`run_forever` ticks the steps that run on every tick (firing, timeouts,
reaping: what users wait for) on its own thread, and the housekeeping steps
(those with an `every`) on a thread of their own, so a tick never waits for
a detector or a retention pass (a missed-job check alone costs 10 to 25 ms,
bench/notifications.py --only burst --steps). `run_once` and `tick` run
them all.
"""

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.utils import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

from scheduler.firing import job_edits, steps, ticks
from scheduler.firing.long_lived import settle_the_collector, switch_threads_often
from scheduler.firing.steps import Step
from scheduler.housekeeping import vacuum

log = logging.getLogger("croniq.scheduler")

# The longest pause between two tries to reach the database in an outage.
# A try is one failed connection; a longer pause is time the loop sleeps
# after a failover's new primary takes writes (Patroni's take 10 to 30 s:
# with 30 s pauses the loop came back up to 30 s after the database did).
MAX_OUTAGE_BACKOFF = 5.0
# Pause after an unexpected error outside any unit, so a bug cannot spin.
ERROR_PAUSE = 1.0
# How often a sleeping loop looks for edited jobs where it cannot block
# until one may have been saved (SQLite off Linux, or a bare `tick`). It
# reads the jobs' edit marker (a MAX over the job table) only when a job may
# have been saved since its last look (`scheduler.firing.job_edits`): at rest,
# almost never.
EDIT_CHECK_INTERVAL = 0.1
# How often an idle loop writes its heartbeat (`ticks.mark_tick`): every
# write wakes the processes that wait for commits (on SQLite, the notifier
# and each web process read what changed), so at rest once in a while, not
# every tick. A sixth of CRONIQ_STALL_GRACE at most, so the web processes'
# stall watch never takes a live loop for a dead one.
HEARTBEAT_AT_LEAST_EVERY = 5.0
# How long the loop trusts its read of the earliest due job while no job
# was saved and no tick did anything. Every writer of a job's next instant
# in Croniq wakes the loop (`Job.save`, `scheduler.firing.job_edits`) or is the
# loop itself; this bounds what a writer that does not (SQL by hand) costs.
# Once a second, that read was most of an idle loop's queries; every 5 s
# instead of 30, an idle install took 1.03 to 1.09% of a core instead of
# 0.90 (bench/idle_cost.py, alternating runs).
EARLIEST_REREAD_EVERY = 30.0


# How long the housekeeping thread sleeps at most. A job edit, which may
# bring a step's deadline forward (`Step.until`), wakes it at once.
HOUSEKEEPING_NAP = 60.0
HOUSEKEEPING_JOIN_TIMEOUT = 30.0


def heartbeat_every() -> float:
    return min(HEARTBEAT_AT_LEAST_EVERY, settings.CRONIQ_STALL_GRACE / 6)


def outage_pause(previous: float) -> float:
    """The pause before the next try to reach the database, after a pause
    of `previous` seconds (0: the first failure): doubling from 0.5 s up
    to MAX_OUTAGE_BACKOFF."""
    return min(MAX_OUTAGE_BACKOFF, max(0.5, previous * 2))


def drop_broken_connection() -> bool:
    """The loop keeps its database connection from tick to tick: a new
    PostgreSQL session costs milliseconds, on every tick. One that a query
    found broken (the database restarted) is closed here, so this tick
    connects anew; run_forever closes it too when the error ends a tick."""
    if connection.connection is not None and connection.errors_occurred:
        connection.errors_occurred = False
        if not connection.is_usable():
            connection.close()
            return True
    return False


class SchedulerLoop:
    def __init__(
        self,
        interval: float = 1.0,
        clock: Callable[[], datetime] = timezone.now,
        fire_lead: timedelta = ticks.FIRE_LEAD,
    ) -> None:
        self.interval = interval
        self.clock = clock
        self.fire_lead = fire_lead
        self.stopping = threading.Event()
        # Set by a job edit and by stop(): the housekeeping thread looks again.
        self.housekeeping_wake = threading.Event()
        self.outage_backoff = 0.0
        self.last_job_edit = None
        self.edits = job_edits.watcher(connection)
        self.steps = steps.collect(self)
        # Set by `run_forever`: the housekeeping steps run on their own thread.
        self.housekeeping_apart = False
        self.housekeeping_death = None  # a BaseException that ended its thread
        self.last_run = {}  # step name -> when it last ran
        self.not_before = {}  # step name -> before then it has no work (Step.until)
        self.held = ticks.Held()  # jobs the last firing held back to their instant
        self.last_beat = None  # when the last tick wrote the heartbeat
        # The coming firings (ticks.Firing) as the fire step last read them,
        # if nothing since may have moved them; None: to be read.
        self.earliest_due = None
        self.earliest_read_at = 0.0  # time.monotonic() of that read
        # A sleep since that read watched for job edits and saw none, so the
        # next tick may trust it (a bare `tick` reads anew).
        self.watched = False
        # run_forever's pipe (read, write): stop() writes to it, so a sleep
        # blocked on the database's socket (PostgreSQL) ends at once. Its lock:
        # stop() comes from another thread and must not write to a pipe that
        # run_forever is closing (its descriptor may be reused at once).
        # Reentrant: under scheduler_loop, stop() is a signal handler of the
        # thread that may hold it.
        self.waker = None
        self.waker_lock = threading.RLock()

    def stop(self) -> None:
        self.stopping.set()
        self.housekeeping_wake.set()
        with self.waker_lock:
            if self.waker is not None:
                with contextlib.suppress(OSError):  # a stop never raises
                    os.write(self.waker[1], b"!")  # ends a wait on the database's socket

    @property
    def tick_steps(self) -> list[Step]:
        """What `tick` runs: every step, or only those that run on every tick
        while the housekeeping thread runs the others."""
        if self.housekeeping_apart:
            return [step for step in self.steps if not step.every]
        return self.steps

    @property
    def housekeeping(self) -> list[Step]:
        return [step for step in self.steps if step.every]

    def units(
        self, now: datetime, steps: list[Step] | None = None
    ) -> list[tuple[str, Callable[[datetime], int]]]:
        """[(name, run)] of the steps (default: the tick's) due at `now`;
        each is marked as run."""
        steps = self.tick_steps if steps is None else steps
        return [(step.name, step.run) for step in steps if self.due(step, now)]

    def fire(self, now: datetime) -> int:
        """The fire step. Most ticks fire nothing: they know so from the
        earliest due job as last read (`earliest`), which is also what the
        sleep after the tick waits for."""
        if not self.watched:
            self.earliest_due = None  # no sleep watched for job edits since the read
        self.watched = False
        earliest = self.earliest(now)
        if earliest is None or earliest > now:
            return 0
        ahead = self.earliest_due.ahead(now)
        self.earliest_due = None  # the firing moves it, and what is held
        return ticks.fire_due(now, self.fire_lead, self.held, ahead, self.clock)

    def earliest(self, now: datetime) -> datetime | None:
        """The earliest instant the fire step has work, read anew only when
        it may have moved (see the module's docstring)."""
        fresh = time.monotonic() - self.earliest_read_at < EARLIEST_REREAD_EVERY
        recheck = self.earliest_due and self.earliest_due.recheck
        if self.earliest_due is None or not fresh or (recheck and now >= recheck):
            self.earliest_due = ticks.next_firing(now, self.fire_lead, self.held)
            self.earliest_read_at = time.monotonic()
        return self.earliest_due.at

    @property
    def blocks_on_edits(self) -> bool:
        """Under run_forever, where it can: the sleep blocks until a NOTIFY
        (PostgreSQL: a job saved) or another connection's commit (SQLite on
        Linux: the edit marker tells whether it saved a job). Otherwise it
        looks for commits every EDIT_CHECK_INTERVAL."""
        return self.waker is not None and self.edits.blocks

    def job_saved(self) -> None:
        """A job was saved: its next instant may be sooner than the one
        known, and a step's deadline may have come forward."""
        self.earliest_due = None
        self.watched = False
        self.not_before.clear()
        self.housekeeping_wake.set()

    def due_at(self, step: Step) -> datetime | None:
        """When `step` comes due next: None when it is due now."""
        last = self.last_run.get(step.name)
        at = last + timedelta(seconds=step.every) if step.every and last is not None else None
        later = self.not_before.get(step.name)
        if later is not None and (at is None or later > at):
            at = later
        return at

    def due(self, step: Step, now: datetime) -> bool:
        at = self.due_at(step)
        if at is not None and now < at:
            return False
        last = self.last_run.get(step.name)
        # Every step runs on the first tick; after it, each housekeeping step
        # keeps a phase of its own, so they do not all come due on one tick
        # again (together 50-60 ms of CPU, bench/notifications.py --steps).
        self.last_run[step.name] = now + self.phase(step) if last is None else now
        return True

    def phase(self, step: Step) -> timedelta:
        """How much later than its `every` a housekeeping step runs the second
        time: the housekeeping steps spread evenly over their intervals."""
        housekeeping = [each.name for each in self.steps if each.every]
        if step.name not in housekeeping:
            return timedelta(0)
        return timedelta(seconds=step.every * housekeeping.index(step.name) / len(housekeeping))

    def tick(self, now: datetime) -> dict[str, int]:
        """Run every due step of the tick once; returns {step: count} for the
        steps that did work.

        A step that fails with anything but a database outage is logged and
        the steps after it still run.
        """
        done = self.run_units(now, self.units(now))
        if done or self.heartbeat_due(now):
            ticks.mark_tick(now)
            self.last_beat = now
        return done

    def run_units(
        self, now: datetime, units: list[tuple[str, Callable[[datetime], int]]]
    ) -> dict[str, int]:
        done = {}
        by_name = {step.name: step for step in self.steps}
        for name, unit in units:
            self.not_before.pop(name, None)
            step = by_name.get(name)
            try:
                count = unit(now)
                if step is not None and step.until:
                    self.not_before[name] = step.until(now)
                if step is not None and step.idle_every and not count:
                    self.rest(name, now + timedelta(seconds=step.idle_every))
            except Exception as e:
                if not ticks.job_fault(e):
                    raise  # an outage: run_forever backs off
                log.exception("scheduler step %s failed; the other steps go on", name)
                continue
            if count:
                done[name] = count
        return done

    def rest(self, name: str, until: datetime) -> None:
        """Skip step `name` until `until` (or its own `until`, if later)."""
        later = self.not_before.get(name)
        self.not_before[name] = until if later is None else max(later, until)

    def heartbeat_due(self, now: datetime) -> bool:
        if self.last_beat is None or now < self.last_beat:
            return True
        return (now - self.last_beat).total_seconds() >= heartbeat_every()

    def run_once(self) -> dict[str, int]:
        if drop_broken_connection():
            self.earliest_due = None  # what it missed meanwhile
        done = self.tick(self.clock())
        if done:
            self.earliest_due = None  # a step may have moved a job's next instant
            log.info("tick: %s", " ".join(f"{k}={v}" for k, v in done.items()))
        return done

    def run_forever(self) -> None:
        log.info("scheduler loop started (interval %.2fs)", self.interval)
        # SQLite: the tick takes the write lock as soon as it is free, ahead
        # of the notifier's deliveries (croniq_project/sqlite). PostgreSQL
        # locks rows, not the database, and ignores it.
        connection.eager_write_lock = True
        settle_the_collector()
        # Switching threads every 0.5 ms (`long_lived.SWITCH_INTERVAL`): a
        # tick waiting for the interpreter lock behind a housekeeping step
        # would otherwise wait up to 5 ms after each of its queries.
        switch_threads_often()
        self.waker = os.pipe()
        try:
            self.loop_forever()
        finally:
            with self.waker_lock:
                read, write = self.waker
                self.waker = None
            os.close(read)
            os.close(write)
            self.edits.close()  # its subscription to job edits

    def loop_forever(self) -> None:
        housekeeper = None
        while not self.stopping.is_set():
            try:
                self.run_once()
                if housekeeper is None and self.housekeeping:
                    # The first tick ran every step; from now on the
                    # housekeeping steps run on their own thread.
                    vacuum.warn_if_autovacuum_off()
                    housekeeper = self.start_housekeeping()
                if self.outage_backoff:
                    log.info("database is back: scheduler loop resumed")
                self.outage_backoff = 0.0
                self.sleep_until_due()
            except (OperationalError, InterfaceError, DatabaseError) as e:
                self.outage_backoff = outage_pause(self.outage_backoff)
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
        if housekeeper is not None:
            housekeeper.join(HOUSEKEEPING_JOIN_TIMEOUT)
        if self.housekeeping_death is not None:
            raise self.housekeeping_death  # the loop dies with it (scheduler.firing.serve)
        log.info("scheduler loop stopped")

    def start_housekeeping(self) -> threading.Thread:
        self.housekeeping_apart = True
        thread = threading.Thread(
            target=self.housekeep_forever, name="croniq-housekeeping", daemon=True
        )
        thread.start()
        return thread

    def housekeep_forever(self) -> None:
        """The housekeeping steps, on their own thread (and connection) until
        the loop stops; an outage or a bug here is handled as in the tick."""
        backoff = 0.0
        first_pass = True
        try:
            while not self.stopping.is_set():
                try:
                    drop_broken_connection()
                    now = self.clock()
                    done = self.run_units(now, self.units(now, self.housekeeping))
                    if first_pass:
                        first_pass = False
                        settle_the_collector()
                    if done:
                        log.info("housekeeping: %s", " ".join(f"{k}={v}" for k, v in done.items()))
                    backoff = 0.0
                    self.housekeeping_wake.wait(self.housekeeping_due_in(self.clock()))
                    self.housekeeping_wake.clear()
                except (OperationalError, InterfaceError, DatabaseError) as e:
                    backoff = outage_pause(backoff)
                    log.warning("housekeeping: database unavailable (%s)", type(e).__name__)
                    close_old_connections()
                    self.stopping.wait(backoff)
                except Exception:
                    log.exception("housekeeping error; carrying on in %.1fs", ERROR_PAUSE)
                    self.stopping.wait(ERROR_PAUSE)
        except BaseException as death:  # what would end the loop ends it
            self.housekeeping_death = death
            self.stop()
        finally:
            connection.close()

    def housekeeping_due_in(self, now: datetime) -> float:
        """Seconds until the next housekeeping step is due (at most
        HOUSEKEEPING_NAP)."""
        seconds = HOUSEKEEPING_NAP
        for step in self.housekeeping:
            at = self.due_at(step)
            seconds = min(seconds, 0.0 if at is None else (at - now).total_seconds())
        return max(0.0, seconds)

    def sleep_until_due(self) -> None:
        """Sleep until the earliest due job, the interval, an edit, or a stop."""
        now = self.clock()
        earliest = self.earliest(now)
        seconds = self.interval
        for at in (earliest, self.earliest_due.recheck):
            if at is not None:
                seconds = min(seconds, max(0.0, (at - now).total_seconds()))
        deadline = time.monotonic() + seconds
        # SQLite's first look at the jobs' edit marker: an edit made since
        # the earliest due job was read is already in it, so the next tick
        # reads that anew.
        first_look = self.last_job_edit is None and self.edits.reads_marker
        if first_look:
            self.last_job_edit = ticks.last_job_edit()
        first_block = True
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                self.watched = not first_look
                return
            if self.blocks_on_edits:
                if first_block:
                    # The tick's own commits (SQLite) would each wake it.
                    self.edits.forget_writes()
                    first_block = False
                if self.edits.wait(left, self.waker[0]) and self.job_edited():
                    return
                continue
            if self.stopping.wait(min(left, EDIT_CHECK_INTERVAL)) or not self.edits.moved():
                continue
            if self.job_edited():
                return

    def job_edited(self) -> bool:
        """After a NOTIFY or another connection's commit: whether a job was
        saved (then the loop reads the jobs anew)."""
        if self.edits.reads_marker:
            edit = ticks.last_job_edit()
            if edit == self.last_job_edit:
                return False
            self.last_job_edit = edit
        self.job_saved()
        return True
