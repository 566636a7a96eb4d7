"""The timeouts step: running executions past their timeout (plus grace) are
settled timed out on the server side, whether or not their runner is still
there."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

import audit
from scheduler.firing import notifier
from scheduler.firing.faults import job_fault
from scheduler.models import Execution
from scheduler.runs import lifecycle

log = logging.getLogger("croniq.scheduler")


def expire_timeouts(now: datetime) -> int:
    """Time out running executions past their timeout (plus grace) on the
    server side, whether or not their runner is still there."""
    grace = timedelta(seconds=settings.CRONIQ_TIMEOUT_GRACE)
    expired = 0
    running = Execution.objects.filter(
        state=Execution.RUNNING, job__timeout__isnull=False, claimed_at__isnull=False
    ).select_related("job")
    for execution in running:
        deadline = execution.claimed_at + timedelta(seconds=execution.job.timeout) + grace
        if deadline > now:
            continue
        try:
            expired += time_out(execution, now)
        except Exception as e:
            if not job_fault(e):
                raise
            log.exception("execution %s: cannot time it out; the others go on", execution.pk)
    if expired:
        notifier.new_work()  # wake waiting long-polls: a retry may be theirs
    return expired


def next_timeout(now: datetime) -> datetime:
    """When expire_timeouts may next find an overdue execution (`Step.until`):
    the earliest deadline of a running execution with a timeout, and at the
    latest the grace from now (a run that starts later is claimed at its
    start, and its deadline is its timeout and the grace after that)."""
    grace = timedelta(seconds=settings.CRONIQ_TIMEOUT_GRACE)
    running = Execution.objects.filter(
        state=Execution.RUNNING, job__timeout__isnull=False, claimed_at__isnull=False
    ).values_list("claimed_at", "job__timeout")
    return min([now + grace, *(at + timedelta(seconds=t) + grace for at, t in running)])


@transaction.atomic
def time_out(execution: Execution, now: datetime) -> bool:
    """Settle one overdue execution; the change and its audit event commit together."""
    error = f"timed out on the server after {execution.job.timeout}s (runner did not finish)"
    # Its runner may still be running it: a singleton's retry waits until
    # the runner has killed it, at the latest when its lease runs out.
    settled = lifecycle.settle(
        execution, Execution.TIMED_OUT, now, retry_after_lease=execution.singleton, error=error
    )
    if settled is False:
        return False
    audit.record("execution.timed_out", target=execution, at=now, data={"error": error})
    return True
