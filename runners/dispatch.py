"""Handing executions to runners, and every runner write under a lease.

Claiming is atomic: PostgreSQL locks the chosen pending rows with
`FOR UPDATE SKIP LOCKED` (two web processes never hand out the same row and
never wait for each other); SQLite runs the claim in an IMMEDIATE
transaction, which already holds the database's write lock.

Every later write (heartbeat, logs, finish) is conditional on the execution
id, the runner's session, the lease token and state `running`. Nothing
matching means another claim, a takeover or the reaper got there first: the
call is answered 409, changes nothing, and the rejection is audited and
counted (invariant 3, fencing).
"""

import asyncio
import collections
import functools
import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

import audit
from audit.recording import bucket_of
from runners import identity
from runners.hub import Handed, hub, notify_new_work, run_db, run_dispatch
from runners.identity import Conflict, NotFound, TooLarge
from runners.models import Runner, RunnerToken
from scheduler import lifecycle
from scheduler.models import LOG_TRUNCATED_MARKER, Execution, LogChunk

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 10_000
# Final states a runner's finish call produces (not lost, not skipped).
FINISHED_BY_RUNNER = (
    Execution.SUCCEEDED,
    Execution.FAILED,
    Execution.TIMED_OUT,
    Execution.CANCELLED,
)
CLAIM_ORDER = ("run_after", "scheduled_for", "id")
LATENCY = "croniq_dispatch_latency_seconds"


def lease_deadline(now):
    return now + timedelta(seconds=settings.CRONIQ_LEASE_TTL)


# -- claiming --------------------------------------------------------------


def claim(runner, session, capacity, now):
    """Claim up to `capacity` ready executions the runner's labels allow.

    Returns them (job loaded) oldest first; an empty list when the runner is
    draining or nothing matches.
    """
    if capacity <= 0 or runner.is_drained:
        return []
    # Part of the caller's transaction when there is one (a poll reads its
    # runner, touches it and claims in one).
    with transaction.atomic(savepoint=False):
        executions = claimable(runner.labels, capacity, now)
        if not executions:
            return []
        hand_over([(runner, session, executions)], now)
    return executions


def hand_over(claims, now):
    """Mark executions as claimed, in one UPDATE: `claims` is
    [(runner, session, [execution, ...])], the executions read and locked by
    this transaction.

    The rows are ours alone until the commit (locked on PostgreSQL; on
    SQLite the transaction holds the write lock), so the new values are set
    on the objects read instead of reading them again.
    """
    deadline = lease_deadline(now)
    if len(claims) == 1:
        [(runner, session, _)] = claims
        runner_id, session_of = runner.pk, session
    else:
        runner_id = Case(*(when_among(e, Value(r.pk)) for r, _, e in claims))
        session_of = Case(*(when_among(e, Value(s)) for _, s, e in claims))
    Execution.objects.filter(pk__in=[e.pk for _, _, claimed in claims for e in claimed]).update(
        state=Execution.RUNNING,
        runner_id=runner_id,
        session=session_of,
        lease=F("lease") + 1,
        lease_expires_at=deadline,
        # A claim made ahead of the instant (`runners.hub.CLAIM_AHEAD`) reaches
        # the runner at the instant: that is when it started.
        claimed_at=Greatest(Value(now), F("run_after")),
    )
    for runner, session, executions in claims:
        for execution in executions:
            execution.state = Execution.RUNNING
            execution.runner = runner
            execution.session = session
            execution.lease += 1
            execution.lease_expires_at = deadline
            execution.claimed_at = max(now, execution.run_after)


def when_among(executions, value):
    return When(pk__in=[e.pk for e in executions], then=value)


def handed_over(handed, at):
    """The poll's answer with `handed` leaves for its runner at `at`: sample
    the dispatch latency of each assignment in it (see `latencies`)."""
    waits = latencies(handed, at)
    if waits:
        hub().observe_latencies(waits)


def latencies(handed, at):
    """Dispatch latency, in seconds, of each execution in `handed` whose
    answer leaves at `at`: from the instant it became ready (`run_after`) to
    that moment. Work claimed ahead is held until its instant, so its sample
    is what the hold, the event loop and the answer itself cost after it."""
    return [max(0.0, (at - ready).total_seconds()) for ready in handed.ready_at]


def record_latency(waits):
    """Add dispatch latency samples (seconds) to the histogram's rows.

    The same rows `audit.observe` writes, one increment per bucket rather
    than three per sample (a batch of 10 is 3-4 writes, not 30), in one
    transaction so a scrape never sees a bucket without its sum, and in a
    fixed order so concurrent writers never deadlock on them.
    """
    if not waits:
        return
    buckets = collections.Counter(bucket_of(w) for w in waits)
    with transaction.atomic():
        for le in sorted(buckets):
            audit.increment(f"{LATENCY}__bucket", buckets[le], le=le)
        audit.increment(f"{LATENCY}__count", len(waits))
        audit.increment(f"{LATENCY}__sum_us", round(sum(waits) * 1_000_000))


def ready_executions(now):
    return Execution.objects.filter(
        state=Execution.PENDING, run_after__lte=now, cancel_requested_at__isnull=True
    ).order_by(*CLAIM_ORDER)


def claimable(labels, capacity, now, exclude=()):
    """The oldest ready executions whose job labels are all in `labels` (job
    loaded), leaving out the ids in `exclude` (taken by this transaction)."""
    ready = ready_executions(now).select_related("job")
    if exclude:
        ready = ready.exclude(pk__in=list(exclude))
    if connection.vendor == "postgresql":
        chosen = ready.filter(job__labels__contained_by=list(labels)).select_for_update(
            skip_locked=True, of=("self",)
        )
        return list(chosen[:capacity])
    # SQLite has no JSON containment; the IMMEDIATE transaction holds the
    # write lock, so filtering in Python here cannot race another claim.
    mine = set(labels)
    ids = []
    for pk, job_labels in ready.values_list("id", "job__labels").iterator(chunk_size=500):
        if set(job_labels or ()) <= mine:
            ids.append(pk)
            if len(ids) == capacity:
                break
    return list(ready.filter(pk__in=ids)) if ids else []


def assignment(execution):
    """The contract's Assignment for a claimed execution (DESIGN.md §4)."""
    job = execution.job
    return {
        "id": execution.pk,
        "job": job.name,
        "command": job.command,
        "env": job.env or {},
        "timeout": job.timeout,
        "scheduled_for": execution.scheduled_for,
        "attempt": execution.attempt,
        "lease": execution.lease,
        "lease_expires_at": execution.lease_expires_at,
    }


def wanted(runner, capacity):
    """How many executions a poll asks for: its `capacity`, else the runner's."""
    return runner.capacity if capacity is None else capacity


def answer(runner, executions, now):
    """A poll's `Handed` (after the commit); a flapping mark may clear here."""
    if runner.flapping:
        identity.check_flapping(runner, now)
    return Handed(
        [assignment(e) for e in executions],
        not_before(executions, now) if executions else None,
        tuple(e.run_after for e in executions),
    )


def check_in(token, runner_id, session, now):
    """The end of a poll that found nothing: still the current session?"""
    runner = identity.current_runner(token, runner_id, session)
    identity.touch(runner, now)
    return runner


def first_poll(credential, runner_id, session, capacity, now):
    """Authenticate, count the poll as a heartbeat and claim, in one database
    step; returns (token, runner, Handed)."""
    with transaction.atomic():
        token, runner = identity.caller(credential, runner_id, session, now)
        identity.touch(runner, now)
        executions = claim(runner, session, wanted(runner, capacity), now)
    return token, runner, answer(runner, executions, now)


async def long_poll(credential, runner_id, session, wait, capacity=None):
    """Claim work for the runner, waiting up to `wait` seconds for some.

    Returns a `Handed`: its assignments, and when work was claimed ahead of
    its instant, the instant the answer must not leave before.

    While it waits it holds no database connection and no thread: database
    steps run in the hub's database threads, the wait is an asyncio event.
    """
    token, runner, found = await first_step(credential, runner_id, session, capacity)
    if found.assignments or wait <= 0:
        return found
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    if runner.is_drained or wanted(runner, capacity) == 0:
        # A drained runner (or a poll with no room) gets nothing, however long it asks.
        await asyncio.sleep(wait)
    else:
        handed = await wait_and_claim(token, runner, session, capacity, deadline)
        if handed.assignments:
            return handed
    await run_db(check_in, token, runner_id, session, timezone.now())
    return Handed([])


async def first_step(credential, runner_id, session, capacity):
    """`first_poll` in a database thread.

    A cancelled poll (its runner hung up) cannot stop the step's thread: the
    step commits its claim all the same, and what it claimed is handed back.
    """
    step = asyncio.ensure_future(
        run_dispatch(first_poll, credential, runner_id, session, capacity, timezone.now())
    )
    try:
        return await asyncio.shield(step)
    except asyncio.CancelledError:
        step.add_done_callback(functools.partial(hand_back_first_step, runner_id, session))
        raise


def hand_back_first_step(runner_id, session, step):
    if not step.cancelled() and step.exception() is None:
        _, _, found = step.result()
        if found.assignments:
            hub().spawn(return_unanswered(runner_id, session, found.assignments))


async def wait_and_claim(token, runner, session, capacity, deadline):
    """Wait in the hub until it claims work for us, or until `deadline`."""
    loop = asyncio.get_running_loop()
    current = hub()
    waiter = current.add(runner.pk, token, session, capacity)
    # Work committed between our claim and joining the hub: look once more.
    current.signal()
    unanswered = functools.partial(return_unanswered, runner.pk, session)
    return await current.wait(waiter, deadline - loop.time(), unanswered)


def serve_waiters(waiters, now, until):
    """Claim ready work for waiting polls in one transaction.

    The oldest ready executions are dealt round the polls they fit (their
    runners' labels include the job's), longest-waiting first, each poll up
    to its capacity: a burst is handed out in one step instead of a claim per
    poll. Work ready by `until` (later than `now`) is claimed ahead too: its
    poll answers at the work's instant (`Handed.not_before`), the claim's
    database work already done. Returns [(waiter, Handed or the Refused its
    poll answers)].
    """
    if not ready_executions(until).exists():
        # Most scans (a poll joining the hub, the safety net) find nothing:
        # one read, and no write transaction (on SQLite, no write lock).
        return []
    with transaction.atomic():
        room, refused = runners_with_room(waiters)
        handed = hand_out(room, until) if room else {}
        if handed:
            claims = [(room[w][0], w.session, executions) for w, executions in handed.items()]
            identity.touch_many({runner.pk: runner for runner, _, _ in claims}.values(), now)
            hand_over(claims, now)
    served = [(waiter, answer(room[waiter][0], got, now)) for waiter, got in handed.items()]
    return refused + served


def not_before(executions, now):
    """The instant the last of `executions` becomes ready, if after `now`."""
    latest = max(e.run_after for e in executions)
    return latest if latest > now else None


def runners_with_room(waiters):
    """({waiter: (runner, how many it takes)}, [(waiter, refusal)]): the waiters
    still entitled to work, and the refused ones (superseded, forgotten)."""
    runners = Runner.objects.in_bulk({w.runner_id for w in waiters})
    room, refused = {}, []
    for waiter in waiters:
        try:
            runner = identity.check_caller(
                runners.get(waiter.runner_id), waiter.token, waiter.runner_id, waiter.session
            )
        except identity.Refused as refusal:
            refused.append((waiter, refusal))
            continue
        want = wanted(runner, waiter.capacity)
        if not runner.is_drained and want > 0:
            room[waiter] = (runner, want)
    return room, refused


def hand_out(room, now):
    """{waiter: [execution, ...]}: ready work, oldest first, dealt round the
    waiters it fits in turn, longest-waiting first.

    Dealing spreads an instant's work over the runners instead of filling
    the first poll to its capacity: the load is shared, and every runner
    served polls again at once with its free slots. (Filling the first ones
    left the runners served long ago waiting with the one slot they had free
    then, too few for the next instant.)
    """
    turn = collections.deque(room)
    left = {waiter: want for waiter, (_, want) in room.items()}
    fits = {waiter: frozenset(runner.labels) for waiter, (runner, _) in room.items()}
    handed = {}
    for execution in candidates(fits, left, now):
        job_labels = frozenset(execution.job.labels or ())
        for _ in range(len(turn)):
            waiter = turn.popleft()
            if job_labels <= fits[waiter]:
                handed.setdefault(waiter, []).append(execution)
                left[waiter] -= 1
                if left[waiter]:
                    turn.append(waiter)
                break
            turn.append(waiter)
    return handed


def candidates(fits, left, now):
    """The ready executions the waiters can run, oldest first: for each
    distinct set of runner labels (in the order of its longest-waiting
    poll), the oldest that fit it, as many as those polls have room for.

    Each set claims with its own labels, not with the union of all of them:
    old work that only the union fits (labels no single runner carries)
    would fill the claim and hold back newer work a runner can take.
    """
    room = {}
    for waiter, labels in fits.items():
        room[labels] = room.get(labels, 0) + left[waiter]
    chosen = {}
    for labels, want in room.items():
        for execution in claimable(labels, want, now, exclude=chosen):
            chosen[execution.pk] = execution
    return sorted(chosen.values(), key=claim_order)


def claim_order(execution):
    return tuple(getattr(execution, field) for field in CLAIM_ORDER)


# -- handing back -----------------------------------------------------------


def hand_back(runner_id, session, assignments, now):
    """Put back work claimed for a poll whose runner hung up before the
    answer was sent.

    The runner never saw it, so it is pending again at once, the same
    attempt: not held until the lease runs out and then retried as lost.
    Only rows still held under the leases handed out change. Returns the
    ids handed back.
    """
    leases = {a["id"]: a["lease"] for a in assignments}
    with transaction.atomic():
        held = [
            e
            for e in Execution.objects.filter(
                pk__in=leases, runner_id=runner_id, session=session, state=Execution.RUNNING
            ).select_for_update(of=("self",))
            if e.lease == leases[e.pk]
        ]
        if not held:
            return []
        Execution.objects.filter(pk__in=[e.pk for e in held]).update(
            state=Execution.PENDING, runner=None, session="", lease_expires_at=None, claimed_at=None
        )
        for execution in held:
            audit.record(
                "execution.handed_back",
                target=execution,
                at=now,
                data={"runner_id": runner_id, "session": session, "lease": execution.lease},
                counter=("croniq_executions_handed_back_total", {}),
            )
    notify_new_work()
    return [e.pk for e in held]


def hand_back_unstarted(credential, runner_id, session, held, now):
    """The runner's own hand-back: work it received but will not start (it
    is shutting down). `held` is [(execution id, lease)]; returns the ids
    handed back. Only work the calling session holds under those leases."""
    with transaction.atomic():
        _, runner = identity.caller(credential, runner_id, session, now)
        identity.touch(runner, now)
        assignments = [{"id": pk, "lease": lease} for pk, lease in held]
        return hand_back(runner.pk, session, assignments, now)


async def return_unanswered(runner_id, session, assignments):
    """`hand_back` from the event loop (the poll's caller is gone)."""
    if assignments:
        ids = await run_db(hand_back, runner_id, session, assignments, timezone.now())
        if ids:
            log.info("runner %s hung up before its answer: handed back %s", runner_id, ids)
            hub().signal()  # polls waiting here; other processes get the NOTIFY


# -- heartbeat -------------------------------------------------------------


def heartbeat(credential, runner_id, session, held, now):
    """Renew the leases the runner still holds.

    `held` is a list of (execution id, lease). Returns the contract's answer:
    renewed ids, lost ids (no longer held under that lease), cancel ids
    (held, but an operator asked to cancel them), and the new expiry.
    """
    deadline = lease_deadline(now)
    leases = {}
    for pk, lease in held:
        leases.setdefault(pk, lease)
    with transaction.atomic():
        _, runner = identity.caller(credential, runner_id, session, now)
        identity.touch(runner, now)
        rows = (
            Execution.objects.filter(
                pk__in=[pk for pk in leases if identity.is_db_id(pk)],
                runner=runner,
                session=session,
                state=Execution.RUNNING,
            )
            .select_for_update(of=("self",))
            .values_list("id", "lease", "cancel_requested_at")
        )
        kept = {pk: cancel for pk, lease, cancel in rows if leases[pk] == lease}
        if kept:
            Execution.objects.filter(pk__in=kept).update(lease_expires_at=deadline)
    return {
        "renewed": [pk for pk in leases if pk in kept],
        "lost": [pk for pk in leases if pk not in kept],
        "cancel": [pk for pk in leases if kept.get(pk) is not None],
        "lease_expires_at": deadline,
    }


# -- writes under a lease --------------------------------------------------


class StaleLease(Conflict):
    """A write under a lease the caller no longer holds."""

    def __init__(self, execution, token, session, lease, call, at):
        super().__init__(
            f"execution {execution.pk} is not held under lease {lease} by this session"
        )
        self.execution, self.token, self.session = execution, token, session
        self.lease, self.call, self.at = lease, call, at

    def record(self):
        execution = self.execution
        audit.record(
            "execution.fencing_rejected",
            target=execution,
            actor=("runner", execution.runner.name if execution.runner_id else ""),
            at=self.at,
            data={
                "call": self.call,
                "token": self.token.name,
                "session": self.session,
                "lease": self.lease,
                "current_lease": execution.lease,
                "state": execution.state,
            },
            counter=("croniq_fencing_rejections_total", {}),
        )


def holds(execution, token, session, lease):
    return (
        execution.state == Execution.RUNNING
        and execution.session == session
        and execution.lease == lease
        and execution.runner_id is not None
        and execution.runner.token_id == token.pk
    )


def find_execution(execution_id, lock=False):
    found = Execution.objects.select_related("runner")
    if lock:
        found = found.select_for_update(of=("self",))
    execution = found.filter(pk=execution_id).first() if identity.is_db_id(execution_id) else None
    if execution is None:
        raise NotFound(f"unknown execution {execution_id}")
    return execution


def audited(fn):
    """Record a StaleLease after the transaction that found it rolled back."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except StaleLease as stale:
            stale.record()
            raise

    return run


def clean_text(text):
    """Text the database can store: no NUL, no lone surrogates."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


@audited
def append_log(token, execution_id, session, lease, seq, data, now):
    """Append one chunk; a retried `seq` is accepted without a second row."""
    data = clean_text(data)
    size = len(data.encode("utf-8"))
    if size > settings.CRONIQ_LOG_CHUNK_LIMIT:
        raise TooLarge(
            f"log chunk of {size} bytes is above the {settings.CRONIQ_LOG_CHUNK_LIMIT} byte limit"
        )
    with transaction.atomic():
        execution = find_execution(execution_id, lock=True)
        if not holds(execution, token, session, lease):
            raise StaleLease(execution, token, session, lease, "logs", now)
        if LogChunk.objects.filter(execution=execution, seq=seq).exists():
            return False
        if execution.log_truncated:
            return False
        stored, size, truncated = fit_log(data, size, execution.log_size)
        try:
            with transaction.atomic():
                LogChunk.objects.create(execution=execution, seq=seq, data=stored)
        except IntegrityError:
            return False  # the same seq arrived twice at once
        Execution.objects.filter(pk=execution.pk).update(
            log_size=F("log_size") + size, log_truncated=truncated
        )
    return True


def fit_log(data, size, used):
    """(text to store, bytes counted, truncated) under the per-execution cap."""
    limit = settings.CRONIQ_LOG_LIMIT
    room = max(0, limit - used)
    if size <= room:
        return data, size, False
    kept = data.encode("utf-8")[:room].decode("utf-8", "ignore")
    return kept + LOG_TRUNCATED_MARKER.format(limit=limit), len(kept.encode("utf-8")), True


def outcome(execution, exit_code, timed_out):
    if timed_out:
        return Execution.TIMED_OUT
    if exit_code == 0:
        return Execution.SUCCEEDED
    if execution.cancel_requested_at is not None:
        return Execution.CANCELLED
    return Execution.FAILED


def finish(credential, execution_id, session, lease, exit_code, error, timed_out, now):
    """Settle the execution for the caller; returns its final state.

    A success, by far the most common finish, is one conditional write that
    checks the token, session, lease and state together. Anything else, and a
    success that write did not match, takes the full path, which tells the
    caller exactly why (401, 404, 409) or answers a retried finish.
    """
    error = clean_text(error or "")[:MAX_ERROR_CHARS]
    if (
        exit_code == 0
        and not timed_out
        and finished_ok(credential, execution_id, session, lease, error, now)
    ):
        return Execution.SUCCEEDED
    token = identity.require_token(credential, now)
    return finish_held(token, execution_id, session, lease, exit_code, error, timed_out, now)


# The success finish, hand-written: compiling the equivalent ORM update (a
# filter across the runner to its token) cost more CPU than all the rest of
# the call. Same conditions as `lifecycle.settle` plus the caller's token.
SUCCEED_HELD = f"""
    UPDATE {Execution._meta.db_table}
    SET state = %s, finished_at = %s, exit_code = 0, error = %s
    WHERE id = %s AND lease = %s AND session = %s AND state = %s
      AND runner_id IN (
        SELECT runner.id FROM {Runner._meta.db_table} runner
        JOIN {RunnerToken._meta.db_table} token ON token.id = runner.token_id
        WHERE token.secret_hash = %s AND token.revoked_at IS NULL)
"""


def finished_ok(credential, execution_id, session, lease, error, now):
    """Settle a success in one write, if the caller holds the execution."""
    secret_hash = RunnerToken.hash_of(credential.secret)
    if secret_hash is None or not identity.is_db_id(execution_id):
        return False
    params = [
        Execution.SUCCEEDED,
        connection.ops.adapt_datetimefield_value(now),
        error,
        execution_id,
        lease,
        session,
        Execution.RUNNING,
        secret_hash,
    ]
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(SUCCEED_HELD, params)
            if cursor.rowcount != 1:
                return False
        lifecycle.count_final(Execution.SUCCEEDED)
    return True


@audited
def finish_held(token, execution_id, session, lease, exit_code, error, timed_out, now):
    """The full finish: read the execution, check the lease, settle.

    A retried finish of the same lease that was already accepted answers the
    same state again instead of 409.
    """
    execution = find_execution(execution_id)
    if not holds(execution, token, session, lease):
        if confirms_kill(execution, token, session, lease):
            actor = ("runner", execution.runner.name)
            if lifecycle.confirm_kill(execution, now, actor=actor):
                notify_new_work()
            return execution.state
        if already_finished(execution, token, session, lease, exit_code):
            return execution.state
        raise StaleLease(execution, token, session, lease, "finish", now)
    state = outcome(execution, exit_code, timed_out)
    result = lifecycle.settle(execution, state, now, exit_code=exit_code, error=error)
    if result is False:
        execution.refresh_from_db()
        raise StaleLease(execution, token, session, lease, "finish", now)
    if result is not None:
        notify_new_work()
    return state


def confirms_kill(execution, token, session, lease):
    """The end of a run the server timed out, reported by the runner that
    held it under that lease: its process is gone (see lifecycle.confirm_kill)."""
    return (
        execution.state == Execution.TIMED_OUT
        and execution.session == session
        and execution.lease == lease
        and execution.runner_id is not None
        and execution.runner.token_id == token.pk
    )


def already_finished(execution, token, session, lease, exit_code):
    return (
        execution.state in FINISHED_BY_RUNNER
        and execution.session == session
        and execution.lease == lease
        and execution.exit_code == exit_code
        and execution.runner_id is not None
        and execution.runner.token_id == token.pk
    )
