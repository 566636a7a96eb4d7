"""Wake-ups for waiting long-polls: the process's hub, and how it learns of new work.

A waiting poll holds neither a worker thread nor a database connection: it
awaits a `Waiter` in this process's `Hub`. The hub learns about new work
from the process's listener (`core.wakeups`): a NOTIFY on PostgreSQL, a
commit on SQLite (docs/design.md §4, "Long-poll"; `dispatch.hints`).

On a hint the hub claims, in one database transaction, the ready work for
its waiting polls, oldest execution first, dealt round the polls it fits. One
new execution costs one claim, not a thousand polls rushing to the
database, and a burst for a hundred polls is one transaction, not a hundred.

When the process is asked to stop, `stop_waiting` ends every wait at once:
no poll holds the stop for the rest of its `wait` (docs/design.md §4,
`stopping`; `croniq_project.lifespan` calls it on SIGTERM).
"""

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Count, Min
from django.utils import timezone

from core import db
from core.db_threads import now_at_start, run_db, run_hub
from dispatch import hints
from dispatch.claims import Handed, serve_waiters
from dispatch.identity import come_back
from dispatch.latency import record_latency
from runners.models import Runner
from scheduler.models import Execution

# Both backends: a full look at pending work this often while polls wait, in
# case a hint was lost (listener reconnecting, a writer that did not notify).
SAFETY_SCAN_INTERVAL = 1.0
# PostgreSQL, while this process's LISTEN connection is up: every writer of
# new work sends a NOTIFY (`dispatch.notify`), which reaches a connected
# listener, and the listener scans when it (re)connects. The full look is
# then a guard, not the path work takes, and once a second it was a third of
# an idle web process's CPU (bench/idle_cost.py). SQLite, while the listener
# blocks until the database is written: it sees every commit, and new or
# re-pended work in the work signature read then (`hints.work_signature`).
LISTENING_SAFETY_SCAN_INTERVAL = 5.0
# How long before an instant the hub claims the work that becomes ready
# then (created ahead by the loop, `scheduler.firing.ticks.FIRE_LEAD`): the claim's
# transaction is done before the instant, and the polls answer at it (an
# `early` poll at once: its agent starts the job's supervisor meanwhile,
# which needs 25 to 80 ms, so 100 ms left too little in one run of ten).
CLAIM_AHEAD = 0.15
# An instant of more than LARGE_INSTANT runs is claimed earlier, by
# CLAIM_AHEAD_PER_RUN for each run past it and at most MAX_CLAIM_AHEAD: a
# web process answers its polls one after the other, and at the top of an
# hour (2,000 runs, bench/top_of_band.py) the last answers left seconds
# after the claim. The loop fires such an instant earlier in proportion
# (`scheduler.firing.ticks.fire_lead_for`), with a margin to create the rows.
LARGE_INSTANT = 100
CLAIM_AHEAD_PER_RUN = 0.0015
MAX_CLAIM_AHEAD = 4.0
# The waiting polls one step serves at most, longest-waiting first; the
# others are served by the steps that follow at once. A step for 250 polls
# at the top of an hour claimed a thousand runs in one go, and an instant
# due meanwhile waited for it (a second, bench/top_of_band.py); between
# smaller steps the answers leave and the earlier instant goes first.
STEP_POLLS = 100
# The event loop's timers may wake a fraction of a millisecond early.
TIMER_SLACK = 0.002
# Dispatch latency is sampled on the event loop as each answer leaves, and
# the samples of this long are written to the database in one transaction
# (not one per answer, which would queue behind claims on SQLite's one
# thread). A process that dies loses at most this much of them.
LATENCY_FLUSH_DELAY = 0.5
log = logging.getLogger(__name__)


# -- reading pending work (runs in a database thread) -----------------------


def next_ready_at(now: datetime) -> datetime | None:
    """When the earliest pending execution not yet ready becomes ready (or None)."""
    upcoming = Execution.objects.filter(state=Execution.PENDING, run_after__gt=now)
    return upcoming.aggregate(at=Min("run_after"))["at"]


def claim_ahead(runs: int) -> float:
    """How many seconds before an instant of `runs` pending runs the hub claims them."""
    if runs <= LARGE_INSTANT:
        return CLAIM_AHEAD
    return min(CLAIM_AHEAD + (runs - LARGE_INSTANT) * CLAIM_AHEAD_PER_RUN, MAX_CLAIM_AHEAD)


def upcoming_work(until: datetime) -> list[tuple[datetime, int | None]]:
    """[(instant, runs)] of the pending work not ready by `until`: the
    earliest instant (runs None: not counted), and the instants within
    MAX_CLAIM_AHEAD of `until` with more than LARGE_INSTANT runs. Those
    are counted only when the earliest is that near: at rest, one query."""
    at = next_ready_at(until)
    if at is None:
        return []
    horizon = until + timedelta(seconds=MAX_CLAIM_AHEAD)
    if at > horizon:
        return [(at, None)]
    pending = Execution.objects.filter(
        state=Execution.PENDING, run_after__gt=until, run_after__lte=horizon
    )
    shared = pending.values("run_after").order_by().annotate(runs=Count("pk"))
    large = shared.filter(runs__gt=LARGE_INSTANT).values_list("run_after", "runs")
    return [(at, None), *large]


def touch_runners(runner_ids: Collection[int], now: datetime) -> None:
    """Waiting polls keep their runners' last_seen_at fresh, one query per interval."""
    waiting = Runner.objects.filter(pk__in=runner_ids)
    waiting.update(last_seen_at=now)
    come_back(waiting)


# -- the in-process hub ----------------------------------------------------


class Waiter:
    """One poll waiting for work its runner can run.

    `token`, `session`, `capacity` and `slots` (as the poll asked, or None)
    are what `dispatch.claims.serve_waiters` needs to claim for it.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        runner_id: int,
        token: Any,
        session: str,
        capacity: int | None,
        slots: int | None = None,
    ) -> None:
        self.runner_id = runner_id
        self.token = token
        self.session = session
        self.capacity = capacity
        self.slots = slots
        self.future = loop.create_future()
        # True while a database step that may claim for it is running.
        self.serving = False
        # Set when its poll stops waiting: no new step may claim for it.
        self.leaving = False
        self.step_done = asyncio.Event()


def serve(
    waiters: list[Waiter], now: datetime, until: datetime | None = None
) -> tuple[list[tuple[Waiter, Any]], list[tuple[datetime, int | None]]]:
    """One database step: claim the work ready by `until` (default `now`)
    for the waiters it fits.

    Returns ([(waiter, Handed or refusal)], `upcoming_work(until)`).
    """
    until = now if until is None else until
    return serve_waiters(waiters, now, until), upcoming_work(until)


def serve_from_start(
    waiters: list[Waiter], queued: datetime, until: datetime
) -> tuple[list[tuple[Waiter, Any]], list[tuple[datetime, int | None]]]:
    """`serve` as of the instant the step begins in the hub's thread: the
    scan read `queued` and `until` before the step waited for its thread,
    and both move on by that wait (`core.db_threads.now_at_start`: a lease
    stamped from `queued` would lose the wait)."""
    now = max(timezone.now(), queued)
    return serve(waiters, now, until + (now - queued))


class Hub:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # Insertion-ordered: the longest-waiting poll is served first.
        self.waiters = {}
        self.scan_requested = asyncio.Event()
        self.tasks = []
        self.spawned = set()  # strong references: the loop keeps only weak ones
        self.timer = None
        # The latest instant a scan claimed ahead for, early for its size
        # (`claim_ahead`): later scans claim up to it too, for the polls that
        # come back with room while its runs are still pending.
        self.claiming_to = None
        # Where the next scan's waiters start (STEP_POLLS): 0 but while a
        # scan goes through more waiters than one step serves.
        self.next_slice = 0
        # What the last scan read of the work to come (`upcoming_work`).
        self.upcoming = []
        # A scan found no poll waiting, so it did not look when the next
        # work becomes ready: the next poll to wait asks for a scan.
        self.timer_unknown = False
        self.last_touch = 0.0
        # PostgreSQL: the LISTEN connection is up; SQLite: the listener
        # blocks until the database is written, and so sees every commit.
        self.listening = False
        self.latencies = []  # seconds, not yet written (see `observe_latencies`)
        self.flush_due = False
        # Set by `stop`: ends the idle wait of polls that take nothing.
        self.stopped = asyncio.Event()

    # waiting

    def add(
        self,
        runner_id: int,
        token: Any,
        session: str,
        capacity: int | None,
        slots: int | None = None,
    ) -> Waiter:
        waiter = Waiter(self.loop, runner_id, token, session, capacity, slots)
        if _stopping:
            waiter.future.set_result(Handed([]))  # no poll waits in a stopping process
            return waiter
        self.start()
        self.waiters[waiter] = None
        if self.timer_unknown:
            # The loop's NOTIFY of new work may have come while no poll
            # waited here: without this scan, work due in a moment would
            # wait for the safety net (up to a second), or for another web
            # process's polls.
            self.signal()
        return waiter

    def remove(self, waiter: Waiter) -> None:
        self.waiters.pop(waiter, None)

    async def idle(self, seconds: float) -> None:
        """Sleep `seconds` (a poll that may take nothing), or until the
        process stops."""
        if _stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopped.wait(), seconds)

    def stop(self) -> None:
        """The process is stopping (`stop_waiting`): every waiting poll is
        answered now."""
        self.stopped.set()
        self.release_waiters()

    async def wind_down(self, timeout: float) -> None:
        """The process exits: write the latency samples held, and wait up to
        `timeout` for the background steps under way (a hand-back)."""
        if self.latencies:
            self.spawn(self.flush_latencies())
        if self.spawned:
            await asyncio.wait(list(self.spawned), timeout=timeout)

    def release_waiters(self) -> None:
        """End the wait of every poll no claim is under way for, with
        nothing. A poll a step is claiming for gets that step's outcome when
        it returns (`scan`): what it claimed is answered, never dropped."""
        for waiter in self.waiters:
            if not waiter.serving and not waiter.future.done():
                waiter.future.set_result(Handed([]))

    async def wait(
        self,
        waiter: Waiter,
        timeout: float | None,
        unanswered: Callable[[list[dict[str, Any]]], Awaitable[Any]],
    ) -> Handed:
        """What was claimed for `waiter` (a `Handed`, empty when `timeout`
        ran out).

        Raises what its claim raised (e.g. the session was superseded). If
        the poll is cancelled (its runner hung up), the assignments claimed
        for it, now or by a step under way, go to `unanswered`, a coroutine
        function, in the background.
        """
        try:
            await asyncio.wait([waiter.future], timeout=timeout)
            await self.last_step(waiter)
        except asyncio.CancelledError:
            self.spawn(self.hand_back_claims(waiter, unanswered))
            raise
        finally:
            self.remove(waiter)
        return waiter.future.result() if waiter.future.done() else Handed([])

    async def last_step(self, waiter: Waiter) -> None:
        """From here no new step takes `waiter`; wait for a step already
        under way, which may still claim for it: never drop what it gets.
        (Without `leaving`, the scanner could start its next step with this
        waiter between one step's end and its poll resuming, and claim work
        nobody would answer.)"""
        waiter.leaving = True
        while waiter.serving:
            await waiter.step_done.wait()

    async def hand_back_claims(
        self, waiter: Waiter, unanswered: Callable[[list[dict[str, Any]]], Awaitable[Any]]
    ) -> None:
        await self.last_step(waiter)
        future = waiter.future
        if future.done() and future.exception() is None:
            await unanswered(future.result().assignments)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run `coroutine` to its end in the background, whoever is cancelled."""
        task = self.loop.create_task(coroutine)
        self.spawned.add(task)
        task.add_done_callback(self.spawned_done)

    def spawned_done(self, task: asyncio.Task) -> None:
        self.spawned.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("croniq hub: background step failed", exc_info=task.exception())

    def observe_latencies(self, seconds: Iterable[float]) -> None:
        """Dispatch latency samples of answers that left just now: written
        to the database within LATENCY_FLUSH_DELAY, together with the others
        that come meanwhile."""
        self.latencies.extend(seconds)
        if self.latencies and not self.flush_due:
            self.flush_due = True
            self.loop.call_later(LATENCY_FLUSH_DELAY, lambda: self.spawn(self.flush_latencies()))

    async def flush_latencies(self) -> None:
        self.flush_due = False
        samples, self.latencies = self.latencies, []
        if not samples:
            return
        try:
            await run_db(record_latency, samples)
        except Exception as e:  # noqa: BLE001 - logged; kept for the next flush
            log.warning("croniq hub: cannot record dispatch latency: %s", e)
            self.observe_latencies(samples)

    def signal(self) -> None:
        """A hint that work may be ready; scans are coalesced."""
        self.scan_requested.set()

    # background tasks, started with the first waiting poll of this loop

    def start(self) -> None:
        if self.tasks:
            return
        self.tasks.append(self.loop.create_task(self.scanner()))
        self.tasks.append(self.loop.create_task(self.safety_net()))
        # By design: PostgreSQL's writers NOTIFY; SQLite's hub reads what commits changed.
        watch = self.listen if db.on_postgres() else self.watch
        self.tasks.append(self.loop.create_task(watch()))

    async def scanner(self) -> None:
        while True:
            await self.scan_requested.wait()
            self.scan_requested.clear()
            try:
                await self.scan()
            except DatabaseError as e:
                log.warning("croniq hub: cannot dispatch to waiting polls: %s", e)
                await self.after_failed_step()
            except Exception:
                # Never let one bad step end dispatching for this process.
                log.exception("croniq hub: dispatch step failed")
                await self.after_failed_step()

    async def after_failed_step(self) -> None:
        if _stopping:
            self.release_waiters()  # the failed step's polls, with nothing
        else:
            await asyncio.sleep(0.5)

    async def scan(self) -> None:
        waiters = [w for w in self.waiters if not w.future.done() and not w.leaving]
        start = self.next_slice if self.next_slice < len(waiters) else 0
        self.next_slice = start + STEP_POLLS if start + STEP_POLLS < len(waiters) else 0
        waiters = waiters[start : start + STEP_POLLS]
        if not waiters:
            self.timer_unknown = True
            return
        self.timer_unknown = False
        for waiter in waiters:
            waiter.serving = True
            waiter.step_done.clear()
        now = timezone.now()
        until = self.claim_until(now)
        try:
            served, upcoming = await run_hub(serve_from_start, waiters, now, until)
        finally:
            for waiter in waiters:
                waiter.serving = False
                waiter.step_done.set()
        for waiter, outcome in served:
            if waiter.future.done():
                continue
            if isinstance(outcome, BaseException):
                waiter.future.set_exception(outcome)
            else:
                waiter.future.set_result(outcome)
        if _stopping:
            # The process stopped during the step: the polls it claimed
            # nothing for are answered too, and no step follows.
            self.release_waiters()
            return
        if served or self.next_slice:
            # Work that came in during the step, or that fit none of the
            # waiters served (while others wait on), or waiters past this
            # step's STEP_POLLS: look once more.
            self.signal()
        self.wake_at(upcoming, timezone.now())

    def claim_until(self, now: datetime) -> datetime:
        """Up to which instant a scan at `now` claims: CLAIM_AHEAD from now,
        or a large instant whose earlier claim has begun."""
        until = now + timedelta(seconds=CLAIM_AHEAD)
        for instant, runs in self.upcoming:
            begins = instant - timedelta(seconds=claim_ahead(runs or 0) + TIMER_SLACK)
            if runs is not None and begins <= now:
                until = max(until, instant)
        if self.claiming_to is not None and self.claiming_to > now:
            until = max(until, self.claiming_to)
        self.claiming_to = until if until > now + timedelta(seconds=CLAIM_AHEAD) else None
        return until

    def wake_at(self, upcoming: list[tuple[datetime, int | None]], now: datetime) -> None:
        """Scan again when the claim of the work to come begins:
        CLAIM_AHEAD before the earliest not-yet-ready execution becomes ready,
        earlier for a large instant (`claim_ahead`). `upcoming` is
        `upcoming_work`'s answer."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.upcoming = upcoming
        if upcoming:
            delay = min(
                (at - now).total_seconds() - claim_ahead(runs or 0) for at, runs in upcoming
            )
            self.timer = self.loop.call_later(max(0.0, delay), self.signal)

    def safety_interval(self) -> float:
        """How long the safety net sleeps between full looks (and between
        looks whether the waiting runners are due a touch)."""
        interval = LISTENING_SAFETY_SCAN_INTERVAL if self.listening else SAFETY_SCAN_INTERVAL
        return min(interval, settings.CRONIQ_HEARTBEAT_INTERVAL)

    async def safety_net(self) -> None:
        heartbeat = settings.CRONIQ_HEARTBEAT_INTERVAL
        while True:
            await asyncio.sleep(self.safety_interval())
            if not self.waiters:
                continue
            self.signal()
            if time.monotonic() - self.last_touch >= heartbeat:
                self.last_touch = time.monotonic()
                ids = {w.runner_id for w in self.waiters}
                try:
                    await run_db(now_at_start(touch_runners, ids))
                except Exception as e:  # noqa: BLE001 - logged; the next round retries
                    log.warning("croniq hub: cannot touch waiting runners: %s", e)

    async def watch(self) -> None:
        """SQLite: wake the scanner when new work may have been committed
        (`dispatch.hints.watch`)."""
        await hints.watch(self)

    async def listen(self) -> None:
        """PostgreSQL: wake the scanner at each NOTIFY of new work
        (`dispatch.hints.listen`)."""
        await hints.listen(self)


_hubs = weakref.WeakKeyDictionary()
# Set once, when the process is asked to stop; never cleared (the process
# exits). A plain bool: it is set from a signal handler.
_stopping = False


def stopping() -> bool:
    """Whether this process is stopping: no poll waits, and each answer
    says so (docs/design.md §4, `stopping`)."""
    return _stopping


def stop_waiting() -> None:
    """The process is stopping: end every wait in its hubs now, and every
    wait that would begin from now on.

    A waiting poll is answered with no work (or with what a claim under way
    brings it) instead of holding the stop until its `wait` runs out, up to
    60 s. Safe from a signal handler and from any thread: it sets a flag
    and asks each hub's event loop to answer its polls.
    """
    global _stopping
    _stopping = True
    for loop, current in list(_hubs.items()):
        with contextlib.suppress(RuntimeError):  # that loop has closed
            loop.call_soon_threadsafe(current.stop)


def wake_local_hubs() -> None:
    """New work was committed in this process: wake its hubs now.

    A hint from elsewhere takes a round trip (PostgreSQL's NOTIFY) or up to
    `hints.WATCH_INTERVAL` (SQLite's watch); work made here (a trigger, a run-now, a
    retry) is handed to a poll waiting in this process at once. Safe from any
    thread: the hub's own loop runs the signal, after the commit.
    """
    from django.db import transaction

    if connection.in_atomic_block:
        transaction.on_commit(wake_local_hubs)
        return
    for loop, current in list(_hubs.items()):
        if current.waiters and not loop.is_closed():
            loop.call_soon_threadsafe(current.signal)


def hub() -> Hub:
    """The hub of the running event loop (one per web process under uvicorn)."""
    loop = asyncio.get_running_loop()
    current = _hubs.get(loop)
    if current is None:
        current = _hubs[loop] = Hub(loop)
    return current


async def wind_down(timeout: float) -> None:
    """The web server has stopped (every request has ended): let the hub of
    the running loop, if it has one, end its background steps
    (`Hub.wind_down`)."""
    current = _hubs.get(asyncio.get_running_loop())
    if current is not None:
        await current.wind_down(timeout)
