"""Which jobs are due, and when the fire step must next wake: the fire lead,
the jobs held back to their instant, the large instants fired earlier still.

Reads only; the firing itself is scheduler/firing/ticks.py.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Min, Q, QuerySet

from scheduler.models import Job

# How long before its instant the loop creates a job's execution. Nothing
# runs early (an execution is claimed only from its run_after on), but the
# row and the runners' wake-up are ready at the instant instead of tens of
# milliseconds after it. A job with an overlap policy other than allow fires
# ahead only when none of its runs is open (pending, running or queued), the
# usual case: nothing can start in between but a manual run, which its row
# lock and the singleton index turn away. With a run open, what it means
# for the newcomer (skip, queue, replace) is decided at the instant: the job
# is held back until then (`Held`).
FIRE_LEAD = timedelta(milliseconds=200)


NO_LEAD = timedelta(0)


# An instant shared by more jobs than LARGE_INSTANT fires earlier still, by
# LEAD_PER_JOB for each job past it and at most MAX_FIRE_LEAD ahead: the web
# processes claim its runs and hand them out ahead in proportion
# (`dispatch.hub.claim_ahead`), and several hundred answers take longer than
# FIRE_LEAD leaves. The margin over the claim's lead leaves the loops time to
# create the rows (bench/top_of_band.py: 2,000 at the top of an hour).
LARGE_INSTANT = 100


LEAD_PER_JOB = timedelta(microseconds=2000)


MAX_FIRE_LEAD = timedelta(seconds=5)


# The loop counts the jobs of the instants this far ahead, and looks again
# this often while its earliest job is that near (a quiet loop otherwise
# trusts its read for EARLIEST_REREAD_EVERY): a large instant's lead never
# begins before the next look.
LARGE_LOOK_EVERY = timedelta(seconds=5)


LOOKAHEAD = MAX_FIRE_LEAD + LARGE_LOOK_EVERY


class Held(set):
    """Ids of the jobs held back to their instant by the last firing (a run
    of theirs was open within the lead): not fired ahead again, and the
    loop wakes for them at the instant, not the lead before it."""


def fire_lead_for(jobs: int, lead: timedelta = FIRE_LEAD) -> timedelta:
    """How long before an instant shared by `jobs` jobs they fire (`lead`
    for most; none for a caller that fires at the instant)."""
    if not lead or jobs <= LARGE_INSTANT:
        return lead
    return max(lead, min(lead + (jobs - LARGE_INSTANT) * LEAD_PER_JOB, MAX_FIRE_LEAD))


def due_jobs(
    now: datetime,
    lead: timedelta = NO_LEAD,
    held: frozenset[str] | str | None = (),
    ahead: frozenset[datetime] | tuple[()] = (),
) -> QuerySet:
    """Active jobs due by `now + lead`, or whose next instant is one of
    `ahead` (large instants fired earlier); those in `held` only by `now`."""
    due = Q(next_run_at__lte=now + lead)
    if ahead:
        due |= Q(next_run_at__in=sorted(ahead))
    if held:
        due &= Q(next_run_at__lte=now) | ~Q(pk__in=list(held))
    return Job.objects.filter(due, enabled=True, paused_at__isnull=True)


def earliest_due(
    now: datetime, lead: timedelta = NO_LEAD, held: frozenset[str] | str | None = ()
) -> datetime | None:
    """When the loop must next wake to fire a job: the earliest next_run_at
    of any active job, `lead` earlier but for the `held` ones."""
    active = Job.objects.filter(enabled=True, paused_at__isnull=True, next_run_at__isnull=False)
    if not held:
        # One MIN that reads the first row of the `job_due` index.
        at = active.aggregate(at=Min("next_run_at"))["at"]
        return at and at - lead
    held = list(held)
    ahead = active.exclude(pk__in=held).aggregate(at=Min("next_run_at"))["at"]
    at_instant = active.filter(pk__in=held).aggregate(at=Min("next_run_at"))["at"]
    return min((at for at in (ahead and ahead - lead, at_instant) if at), default=None)


@dataclass(frozen=True)
class Firing:
    """What the loop read of the coming firings: when it must wake (`at`,
    None: no active job), the large instants within LOOKAHEAD, each with
    its own lead (`fire_lead_for`), and when to read them again
    (`recheck`: a large instant may come within reach before `at`)."""

    at: object = None
    large: tuple = ()  # ((instant, lead), ...)
    recheck: object = None

    def ahead(self, now: datetime) -> frozenset[datetime]:
        """The large instants whose lead has begun at `now`."""
        return frozenset(instant for instant, lead in self.large if instant - lead <= now)


def next_firing(
    now: datetime, lead: timedelta = NO_LEAD, held: frozenset[str] | str | None = ()
) -> Firing:
    """earliest_due, brought forward for a large instant within LOOKAHEAD.
    The instants are counted only when the earliest due job is that near: at
    rest this is the one query it was."""
    at = earliest_due(now, lead, held)
    if at is None or not lead:
        return Firing(at)
    if at > now + LOOKAHEAD:
        return Firing(at, recheck=at - LOOKAHEAD)
    large = tuple(large_instants(now, lead))
    wake = min([at] + [instant - ahead for instant, ahead in large])
    return Firing(wake, large, recheck=now + LARGE_LOOK_EVERY)


# Hand-written: compiling the ORM's grouped count cost three times its
# round trip, on every read of the coming firings (a busy loop's: each
# second). The held jobs count too: they fire at the instant, but an
# instant's size only sets how early the rest fire.
SHARED_INSTANTS = f"""
    SELECT next_run_at, COUNT(*) FROM {Job._meta.db_table}
    WHERE enabled = %s AND paused_at IS NULL AND next_run_at > %s AND next_run_at <= %s
    GROUP BY next_run_at HAVING COUNT(*) > %s
""".strip()


def large_instants(now: datetime, lead: timedelta) -> list[tuple[datetime, timedelta]]:
    """[(instant, its lead)] of the instants within LOOKAHEAD shared by
    more than LARGE_INSTANT active jobs."""
    adapt = connection.ops.adapt_datetimefield_value
    params = [True, adapt(now), adapt(now + LOOKAHEAD), LARGE_INSTANT]
    with connection.cursor() as cursor:
        cursor.execute(SHARED_INSTANTS, params)
        rows = cursor.fetchall()
    return [(as_instant(instant), fire_lead_for(count, lead)) for instant, count in rows]


def as_instant(value: datetime) -> datetime:
    """A datetime column as a raw cursor reads it (SQLite's is text, in UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
