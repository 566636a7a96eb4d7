"""The runners' steps of the scheduler loop (`RunnersConfig.loop_steps`).

Each takes `now` and returns how much it did; tests call them with fixed
instants.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q

import audit
from dispatch import identity, liveness
from dispatch.notify import notify_new_work
from runners.models import Runner
from scheduler.models import Execution
from scheduler.runs import events, lifecycle


def reap_expired_leases(now: datetime) -> int:
    """Running executions whose lease ran out become lost and are retried."""
    expired = Execution.objects.filter(state=Execution.RUNNING, lease_expires_at__lt=now)
    released = lifecycle.release(expired, lifecycle.LEASE_EXPIRED, now)
    if released:
        notify_new_work()
    return len(released)


# The reaper looks at least this often, whatever it knows of the leases.
REAP_AT_LEAST_EVERY = 5.0


def next_lease_expiry(now: datetime) -> datetime:
    """When the reaper may next find an expired lease (`Step.until`): the
    earliest lease of a running execution, and at the latest a lease's
    length from now, since a lease taken later ends no sooner (claims take
    CRONIQ_LEASE_TTL from their instant; renewals only move leases on).
    Capped at REAP_AT_LEAST_EVERY: a web process started with shorter
    leases than the loop's setting is late by no more than that."""
    running = Execution.objects.filter(state=Execution.RUNNING)
    earliest = running.aggregate(at=Min("lease_expires_at"))["at"]  # exec_running_lease
    latest = now + timedelta(seconds=min(settings.CRONIQ_LEASE_TTL, REAP_AT_LEAST_EVERY))
    return latest if earliest is None else min(earliest, latest)


def update_runner_states(now: datetime) -> int:
    """Mark runners silent for the offline threshold offline and forget
    long-offline ones (each change audited). The flapping mark of runners
    that went quiet is cleared by a step of its own
    (`identity.clear_quiet_flapping`)."""
    silent_since = now - liveness.offline_after()
    changed = 0
    silent = Runner.objects.filter(
        state__in=[Runner.ONLINE, Runner.DRAINING], last_seen_at__lt=silent_since
    )
    for runner in silent:
        changed += mark_offline(runner, now)
    forget_before = now - timedelta(seconds=settings.CRONIQ_RUNNER_RETENTION)
    for runner in Runner.objects.filter(state=Runner.OFFLINE, last_seen_at__lt=forget_before):
        identity.forget(runner, now)
        changed += 1
    return changed + drop_orphaned_pins(now)


def next_runner_change(now: datetime) -> datetime:
    """When update_runner_states may next have work (`Step.until`): the
    earliest instant a runner now online or draining is due offline, or one
    offline is forgotten. A runner seen later is due offline no sooner than
    `offline_after` from now. (A pin orphaned otherwise, its runner deleted
    by hand, is dropped by then too.) At rest, the step ran every 5 s, three
    queries a time (bench/idle_cost.py)."""
    live = Q(state__in=[Runner.ONLINE, Runner.DRAINING])
    seen = Runner.objects.aggregate(
        live=Min("last_seen_at", filter=live),
        gone=Min("last_seen_at", filter=Q(state=Runner.OFFLINE)),
    )
    offline_after = liveness.offline_after()
    retention = timedelta(seconds=settings.CRONIQ_RUNNER_RETENTION)
    at = now + offline_after
    if seen["live"] is not None:
        at = min(at, seen["live"] + offline_after)
    if seen["gone"] is not None:
        at = min(at, seen["gone"] + retention)
    return at


def drop_orphaned_pins(now: datetime) -> int:
    """Pending runs pinned to a runner (run_on: all) that is offline or
    forgotten are lost: no other runner may take them, and the runner, when
    back, has moved on to newer occurrences. A drained runner keeps its
    pinned runs until it is resumed or goes offline."""
    present = Runner.objects.exclude(state=Runner.OFFLINE).values("name")
    orphaned = (
        Execution.objects.filter(state=Execution.PENDING)
        .exclude(pinned_to="")
        .exclude(pinned_to__in=present)
        .select_related("job")
    )
    dropped = 0
    for execution in orphaned:
        with transaction.atomic():
            dropped += lifecycle.drop_pinned(execution, now)
    return dropped


@transaction.atomic
def mark_offline(runner: Runner, now: datetime) -> int:
    """One silent runner goes offline; the change, its audit event and the
    `runner.offline` event commit together. 0 when it spoke in the meantime."""
    if not Runner.objects.filter(pk=runner.pk, last_seen_at=runner.last_seen_at).update(
        state=Runner.OFFLINE
    ):
        return 0
    last_seen = runner.last_seen_at.isoformat()
    audit.record("runner.offline", target=runner, at=now, data={"last_seen_at": last_seen})
    events.emit(
        "runner.offline",
        at=now,
        runner=runner,
        data={"last_seen_at": last_seen, "labels": runner.labels},
    )
    return 1
