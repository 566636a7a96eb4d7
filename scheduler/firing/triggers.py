"""Manual triggers from outside (the management API's `trigger`, docs/design.md §8,
and a job's webhook URL, §14):
idempotency keys, a bound on the pending queue, env overrides limited to the
job's declared `parameters`.

A trigger locks its job row, so triggers of one job are taken one at a time
(the queue bound holds under concurrency); the unique (job, key) of
TriggerKey is what makes a key answer one execution, whichever web process
asks first.
"""

import typing
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from scheduler.models import Execution, Job, TriggerKey
from scheduler.runs import operations
from scheduler.runs.refusals import OperationRefused

IDEMPOTENCY_WINDOW = timedelta(hours=24)
# How far ahead a trigger's logical instant may lie.
SCHEDULED_FOR_HORIZON = timedelta(days=1)
# The Retry-After of a trigger refused because the job's queue is full: long
# enough for runners to take some of it, short enough to keep a caller going.
QUEUE_FULL_RETRY_AFTER = 5


class TriggerRefused(OperationRefused):
    """Refused as the caller asked it (422): `field` names what was wrong."""

    def __init__(self, field, message) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class QueueFull(OperationRefused):
    def __init__(self, job, limit) -> None:
        super().__init__(f"{job.name} already has {limit} pending executions; try again later")
        self.retry_after = QUEUE_FULL_RETRY_AFTER


class Triggered(typing.NamedTuple):
    execution: Execution
    deduplicated: bool


def check_request(
    job: Job, env: dict[str, str] | None, scheduled_for: datetime | None, now: datetime
) -> None:
    """TriggerRefused for an env key the job does not declare, or a logical
    instant too far ahead."""
    declared = set(job.parameters or ())
    for name in env:
        if name not in declared:
            allowed = ", ".join(sorted(declared)) or "none"
            raise TriggerRefused(
                f"env.{name}", f"not a parameter of {job.name} (it declares: {allowed})"
            )
    if scheduled_for is not None and scheduled_for > now + SCHEDULED_FOR_HORIZON:
        raise TriggerRefused("scheduled_for", "more than 1 day ahead")


def trigger(
    job: Job,
    now: datetime,
    actor: object,
    key: str | None = None,
    env: dict[str, str] | None = None,
    scheduled_for: datetime | None = None,
) -> Triggered:
    """Run `job` now for the logical instant `scheduled_for` (default `now`).

    With `key`, a second trigger within IDEMPOTENCY_WINDOW answers the first
    one's execution (`deduplicated`) and creates nothing. Refusals:
    TriggerRefused (bad input), QueueFull (CRONIQ_TRIGGER_QUEUE_LIMIT
    pending), OperationRefused (a singleton with a live run, or the instant
    taken). A refused trigger changes nothing.
    """
    with transaction.atomic():
        return trigger_locked(job.locked(), now, actor, key, env, scheduled_for)


def trigger_locked(
    job: Job,
    now: datetime,
    actor: object,
    key: str | None = None,
    env: dict[str, str] | None = None,
    scheduled_for: datetime | None = None,
    kind: str = Execution.MANUAL,
) -> Triggered:
    """`trigger` inside the caller's transaction, which holds `job`'s row
    lock. `kind` is the run's trigger: `manual` (the API's call) or
    `webhook` (the job's webhook URL, control.webhooks_api)."""
    env = env or {}
    check_request(job, env, scheduled_for, now)
    if key is not None:
        first = claim_key(job, key, now)
        if first is not None:
            return Triggered(first, deduplicated=True)
    check_queue(job)
    by = "webhook" if kind == Execution.WEBHOOK else "api"
    note = {"env": sorted(env), "idempotency_key": key, "by": by}
    execution = operations.run_now(job, now, actor, scheduled_for, env, note, trigger=kind)
    if key is not None:
        TriggerKey.objects.filter(job=job, key=key).update(execution=execution)
    return Triggered(execution, deduplicated=False)


def claim_key(job: Job, key: str, now: datetime) -> Execution | None:
    """None when `key` is ours now (its row is pointed at the new execution
    before the commit, so no other transaction sees it empty); otherwise the
    execution the key already names. An expired key is deleted first."""
    TriggerKey.objects.filter(job=job, key=key, created_at__lte=now - IDEMPOTENCY_WINDOW).delete()
    try:
        with transaction.atomic():
            TriggerKey.objects.create(job=job, key=key, created_at=now)
    except IntegrityError:
        return TriggerKey.objects.select_related("execution__job").get(job=job, key=key).execution
    return None


def check_queue(job: Job) -> None:
    limit = settings.CRONIQ_TRIGGER_QUEUE_LIMIT
    if Execution.objects.filter(job=job, state=Execution.PENDING)[:limit].count() >= limit:
        raise QueueFull(job, limit)
