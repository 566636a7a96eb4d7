"""The long-poll: claim at once, or wait in the hub until work is claimed,
and hold the answer until its instant.

While a poll waits it holds no database connection and no thread: database
steps run in `core.db_threads`, the wait is an asyncio future in the
process's hub. Work claimed for a poll whose runner hung up before the
answer left is handed back (`return_unanswered`). A stopping process
answers its polls at once (`dispatch.hub.stop_waiting`).
"""

import asyncio
import functools
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from core.db_threads import now_at_start, run_db, run_dispatch
from dispatch import identity
from dispatch.claims import Handed, answer, claim, wanted
from dispatch.hub import hub, stopping
from dispatch.identity import Credential
from dispatch.latency import latencies
from dispatch.leases import hand_back
from runners.models import Runner, RunnerToken

log = logging.getLogger(__name__)


async def long_poll(
    credential: Credential,
    runner_id: int,
    session: str,
    wait: float,
    capacity: int | None = None,
    slots: int | None = None,
) -> Handed:
    """Claim work for the runner, waiting up to `wait` seconds for some.

    Returns a `Handed`: its assignments, and when work was claimed ahead of
    its instant, the instant the answer must not leave before. With `slots`
    (the runner's slots in all), the slots its runs free while the poll
    waits are offered too (`claims.runners_with_room`).

    While it waits it holds no database connection and no thread: database
    steps run in the hub's database threads, the wait is an asyncio event.
    """
    if stopping():
        # The process is stopping (SIGTERM): it stops accepting connections
        # in a moment and exits. A poll that still reaches it is answered at
        # once with no work, without a database step (nor the token check in
        # it): claiming here could hand work to an answer the exit cuts, and
        # the runner, told the server is stopping, polls again at once, where
        # a server that stays answers it (behind the balancer, elsewhere).
        return Handed([])
    token, runner, found = await first_step(credential, runner_id, session, capacity)
    if found.assignments or wait <= 0 or stopping():
        return found
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    if runner.is_drained or (wanted(runner, capacity) == 0 and not slots):
        # A drained runner (or a poll with no room, and none that its runs
        # may free) gets nothing, however long it asks (until a stop).
        await hub().idle(wait)
    else:
        handed = await wait_and_claim(token, runner, session, capacity, slots, deadline)
        if handed.assignments:
            return handed
    if stopping():
        # Answered early by the stop: no check-in, a database step per poll
        # for a thousand polls at once; the runner's next poll counts.
        return Handed([])
    await run_db(now_at_start(check_in, token, runner_id, session))
    return Handed([])


async def first_step(
    credential: Credential, runner_id: int, session: str, capacity: int | None
) -> tuple[RunnerToken, Runner, Handed]:
    """`first_poll` in a database thread.

    A cancelled poll (its runner hung up) cannot stop the step's thread: the
    step commits its claim all the same, and what it claimed is handed back.
    """
    step = asyncio.ensure_future(
        run_dispatch(now_at_start(first_poll, credential, runner_id, session, capacity))
    )
    try:
        return await asyncio.shield(step)
    except asyncio.CancelledError:
        step.add_done_callback(functools.partial(hand_back_first_step, runner_id, session))
        raise


def hand_back_first_step(runner_id: int, session: str, step: asyncio.Future) -> None:
    if not step.cancelled() and step.exception() is None:
        _, _, found = step.result()
        if found.assignments:
            hub().spawn(return_unanswered(runner_id, session, found.assignments))


async def wait_and_claim(
    token: RunnerToken,
    runner: Runner,
    session: str,
    capacity: int | None,
    slots: int | None,
    deadline: float,
) -> Handed:
    """Wait in the hub until it claims work for us, or until `deadline`."""
    loop = asyncio.get_running_loop()
    current = hub()
    waiter = current.add(runner.pk, token, session, capacity, slots)
    # Work committed between our claim and joining the hub: look once more.
    current.signal()
    unanswered = functools.partial(return_unanswered, runner.pk, session)
    return await current.wait(waiter, deadline - loop.time(), unanswered)


def first_poll(
    credential: Credential, runner_id: int, session: str, capacity: int | None, now: datetime
) -> tuple[RunnerToken, Runner, Handed]:
    """Authenticate, count the poll as a heartbeat and claim, in one database
    step; returns (token, runner, Handed)."""
    with transaction.atomic():
        token, runner = identity.caller(credential, runner_id, session, now)
        executions = claim(runner, session, wanted(runner, capacity), now)
        # Touched after the claim, as the hub does (`serve_waiters`): a claim
        # may wait on a concurrency group's row, and the two must take the
        # group's row and the runner's in the same order (no deadlock).
        identity.touch(runner, now)
    return token, runner, answer(runner, executions, now)


def check_in(token: RunnerToken, runner_id: int, session: str, now: datetime) -> Runner:
    """The end of a poll that found nothing: still the current session?"""
    runner = identity.current_runner(token, runner_id, session)
    identity.touch(runner, now)
    return runner


def handed_over(handed: Handed, at: datetime) -> None:
    """The poll's answer with `handed` leaves for its runner at `at`: sample
    the dispatch latency of each assignment in it (see `latencies`)."""
    waits = latencies(handed, at)
    if waits:
        hub().observe_latencies(waits)


async def return_unanswered(runner_id: int, session: str, assignments: list) -> None:
    """`hand_back` from the event loop (the poll's caller is gone)."""
    if assignments:
        ids = await run_db(now_at_start(hand_back, runner_id, session, assignments))
        if ids:
            log.info("runner %s hung up before its answer: handed back %s", runner_id, ids)
            hub().signal()  # polls waiting here; other processes get the NOTIFY


# -- when the answer leaves ---------------------------------------------------


class AnswerHold:
    """When a runner call's answer may leave, and what to do if it never does.

    The hub claims an instant's work ahead of it; the poll's answer must not
    reach the runner before the instant (`until`, None: at once). Croniq's
    ASGI handler (`croniq_project.asgi_handler`) gives each runner call a
    hold and sends the answer, already rendered, when it ends, so at the
    instant only the bytes are left to write. If the runner hangs up before
    that, `unanswered()` runs: the work in the answer was never seen and
    goes back. When it leaves, `answered(at)` runs (it samples the dispatch
    latency).
    """

    until = None
    unanswered = None
    answered = None

    def release(self) -> None:
        if self.answered is not None:
            self.answered(timezone.now())


def with_starts_in(handed: Handed, now: datetime) -> list[dict[str, Any]]:
    """`handed`'s assignments for an `early` poll: each with `starts_in`,
    the seconds from `now` to its instant (its run_after), and `starts_at`,
    that instant itself: a runner whose clock agrees with this one's starts
    the run at it, without the answer's way there added."""
    return [
        {
            **assignment,
            "starts_in": max(0.0, (ready_at - now).total_seconds()),
            # Text: the answer's datetimes stop at the millisecond, and an
            # instant cut short would start its run early.
            "starts_at": ready_at.isoformat(),
        }
        for assignment, ready_at in zip(handed.assignments, handed.ready_at, strict=True)
    ]


async def answer_not_before(
    request: HttpRequest,
    instant: datetime | None,
    unanswered: Callable[[], Any],
    answered: Callable[[datetime], Any] | None = None,
) -> None:
    """Make `request`'s answer leave at `instant` (None: at once), not
    earlier; if the caller hangs up before it leaves, run `unanswered()`;
    when it leaves, `answered(at)`."""
    hold = getattr(request, "answer_hold", None)
    if hold is not None:
        hold.until, hold.unanswered, hold.answered = instant, unanswered, answered
        return
    # Another handler (tests' client, Django's, WSGI): hold in the view.
    # Django's handler cancels the view when the caller hangs up.
    hold = AnswerHold()
    hold.answered = answered
    try:
        await sleep_until(instant)
    except asyncio.CancelledError:
        hub().spawn(unanswered())
        raise
    hold.release()


async def sleep_until(instant: datetime | None) -> None:
    """Return once the wall clock has passed `instant` (None: at once).

    One sleep is not enough: uvloop's timers count whole milliseconds on a
    clock read at the start of the loop's iteration, so they can wake a
    fraction of a millisecond early, and an answer held for its instant
    would leave before it. Sleep again for what is left.
    """
    if instant is None:
        return
    while (left := (instant - timezone.now()).total_seconds()) > 0:
        await asyncio.sleep(left)
