"""An operator's replay and discard of dead letters (admin, dashboard,
management API). Each is audited with its actor.

A replay is a new execution of the same job for the same `scheduled_for`,
one attempt above the highest of that instant. Past CRONIQ_REPLAY_MAX_AGE it
is a stale replay, refused unless forced. A dead letter is replayed at most
once: it is locked, and marked replayed by a conditional update in the
transaction that creates the execution (and two replays racing for the same
attempt meet the `execution_once` constraint).
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, QuerySet

import audit
from core import tracing
from scheduler.firing import notifier
from scheduler.models import Execution
from scheduler.runs import overlap
from scheduler.runs.refusals import OperationRefused
from scheduler.triage.dead_letters import DeadLetter, with_status


def replay_max_age() -> timedelta:
    return timedelta(seconds=settings.CRONIQ_REPLAY_MAX_AGE)


def in_words(age: timedelta) -> str:
    """A replay age as people write it: "7 days", "36 hours", "90 seconds"."""
    seconds = int(age.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def is_stale(dead_letter: DeadLetter, now: datetime) -> bool:
    """Whether replaying `dead_letter` at `now` needs force."""
    return now - dead_letter.execution.scheduled_for > replay_max_age()


def replay(dead_letter: DeadLetter, now: datetime, actor: object, force: bool = False) -> Execution:
    """The new execution replaying `dead_letter`; OperationRefused when it
    is not open any more, is stale and not forced, or its job cannot take
    the new attempt (a singleton's live execution)."""
    refuse_unless_open(dead_letter)
    if is_stale(dead_letter, now) and not force:
        instant = dead_letter.execution.scheduled_for
        raise OperationRefused(
            f"stale replay: dead letter {dead_letter.pk} is for {instant:%Y-%m-%d %H:%M:%S} UTC, "
            f"{(now - instant).days} day(s) ago, past CRONIQ_REPLAY_MAX_AGE "
            f"({in_words(replay_max_age())}); replay it with force to run it anyway"
        )
    with transaction.atomic():
        locked = DeadLetter.objects.select_for_update().filter(pk=dead_letter.pk).first()
        if locked is None:
            raise OperationRefused(f"dead letter {dead_letter.pk} is gone")
        refuse_unless_open(locked)
        new = new_attempt(dead_letter.execution, now)
        still_open = DeadLetter.objects.filter(with_status(DeadLetter.OPEN), pk=dead_letter.pk)
        marked = still_open.update(replayed_at=now, replayed_execution=new)
        if not marked:  # replayed or discarded since the lock (SQLite has none)
            raise OperationRefused(f"dead letter {dead_letter.pk} was resolved meanwhile")
        audit.record(
            "deadletter.replay", target=dead_letter, actor=actor, at=now,
            data={
                "execution": new.pk,
                "previous": dead_letter.execution_id,
                "attempt": new.attempt,
                "scheduled_for": new.scheduled_for.isoformat(),
                "forced": bool(force),
            },
        )  # fmt: skip
        transaction.on_commit(notifier.new_work)
    dead_letter.refresh_from_db()
    return new


def refuse_unless_open(dead_letter: DeadLetter) -> None:
    if dead_letter.status != DeadLetter.OPEN:
        raise OperationRefused(f"dead letter {dead_letter.pk} was {dead_letter.status} already")


def new_attempt(execution: Execution, now: datetime) -> Execution:
    """The replay's execution: the same job and instant, one attempt above
    the highest there is; pending at once."""
    job = execution.job
    highest = Execution.objects.filter(job=job, scheduled_for=execution.scheduled_for).aggregate(
        highest=Max("attempt")
    )["highest"]
    try:
        with transaction.atomic():
            new = Execution(
                job=job,
                scheduled_for=execution.scheduled_for,
                attempt=(highest or execution.attempt) + 1,
                trigger=Execution.REPLAY,
                run_after=now,
                created_at=now,
                env=execution.env,  # a triggered run's overrides hold for its replay
                pinned_to=execution.pinned_to,  # run on every runner: replayed on its own
                # Another attempt at the same run: in its trace (docs/design.md §15).
                traceparent=tracing.continued(execution.traceparent),
            )
            return overlap.enter(job, new, now)
    except IntegrityError:
        raise OperationRefused(
            f"{job.name} already has a live execution or a newer attempt of that instant"
        ) from None


def discard(dead_letters: QuerySet, now: datetime, actor: object) -> int:
    """Discard the open ones of `dead_letters` (a queryset); returns how
    many. Their executions stay; only the dead letter is closed."""
    discarded = 0
    for dead_letter in dead_letters.filter(with_status(DeadLetter.OPEN)):
        with transaction.atomic():
            still_open = DeadLetter.objects.filter(with_status(DeadLetter.OPEN), pk=dead_letter.pk)
            done = still_open.update(discarded_at=now)
            if done:
                audit.record(
                    "deadletter.discard", target=dead_letter, actor=actor, at=now,
                    data={"execution": dead_letter.execution_id, "reason": dead_letter.reason},
                )  # fmt: skip
                discarded += 1
    return discarded
