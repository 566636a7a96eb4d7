"""The job: what runs, where, when and under which policies, with the rules
that keep a job consistent (`clean`) and the one function that says when it
fires next (`Job.upcoming`)."""

import hashlib
import re
from datetime import UTC, timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from calendars.validators import validate_stored_text, validate_timezone
from core.ownership import Owned
from scheduler.firing import job_edits
from scheduler.runs.models import Execution


def default_labels():
    return []


# The longest `jitter`: a day.
MAX_JITTER = 86400
# Bounds of a job's retry policy. Each retry waits twice as long as the one
# before it, at most MAX_RETRY_DELAY (see `scheduler.runs.lifecycle.retry_delay`):
# a hundred retries already span months, and a first wait over a day is a
# schedule, not a backoff.
MAX_RETRIES = 100
MAX_RETRY_BACKOFF = 86400
MAX_RETRY_DELAY = 86400


def jitter_offset(name, jitter):
    """The fixed delay of a job's instants: below `jitter` seconds, from a
    hash of its name (the same in every process and after a restart)."""
    if not jitter:
        return timedelta(0)
    digest = hashlib.sha256(f"jitter:{name}".encode()).digest()
    return timedelta(microseconds=int.from_bytes(digest[:8], "big") % (jitter * 1_000_000))


# What a trigger may set: an environment variable's name, not one of the
# variables the agent sets itself (CRONIQ_...).
PARAMETER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def validate_parameters(value):
    from django.core.exceptions import ValidationError

    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError("a list of environment variable names")
    for name in value:
        if not PARAMETER_RE.fullmatch(name) or name.upper().startswith("CRONIQ_"):
            raise ValidationError(
                f"{name!r} is not an environment variable name a trigger may set "
                "(letters, digits and _, not starting with CRONIQ_)"
            )
    if len(set(value)) != len(value):
        raise ValidationError("a name appears twice")


class Job(Owned):
    """A command to run on a schedule, gated by an optional calendar."""

    # Written by the scheduler loop only: an operator's save never writes
    # them back (it read them before the loop may have moved them on).
    SCHEDULER_FIELDS = ("next_run_at", "last_scheduled_at", "error", "error_at")
    # Fields whose change moves the next fire time.
    SCHEDULE_FIELDS = frozenset(
        {"schedule", "timezone", "calendar", "calendar_policy", "enabled", "jitter"}
    )

    SKIP = "skip"
    DEFER = "defer"
    CALENDAR_POLICIES = [(SKIP, "skip blocked occurrences"), (DEFER, "defer to next allowed")]

    RUN_ONCE = "run_once"
    RUN_ALL = "run_all"
    MISFIRE_POLICIES = [
        (RUN_ONCE, "run once, then continue from now"),
        (SKIP, "skip missed occurrences"),
        (RUN_ALL, "run every missed occurrence (capped)"),
    ]
    # Overlap policies (docs/design.md §10): what an occurrence due while the
    # job has a run live does. `singleton` is `skip`'s older name.
    ALLOW = "allow"
    QUEUE = "queue"
    REPLACE = "replace"
    OVERLAPS = [
        (ALLOW, "allow: run alongside"),
        (SKIP, "skip: never two at once, skip the newcomer"),
        (QUEUE, "queue: at most max_concurrent at once, the rest wait in order"),
        (REPLACE, "replace: cancel the running one, then start"),
    ]
    # Where an occurrence runs (docs/design.md §10): on one matching runner, or
    # on every matching runner online at its instant.
    ONE = "one"
    ALL = "all"
    RUN_ON = [
        (ONE, "one matching runner"),
        (ALL, "every matching runner online at the instant"),
    ]
    MAINTENANCE_MODES = [
        (SKIP, "skip occurrences inside a maintenance"),
        (DEFER, "run once when the maintenance ends"),
    ]

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    schedule = models.CharField(
        max_length=200,
        help_text='5-field cron ("30 2 * * *"), a macro (@daily) or "@every 5m".',
    )
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="IANA timezone the schedule is read in.",
    )
    command = models.TextField(help_text="Shell command the runner executes (sh -c).")
    env = models.JSONField(default=dict, blank=True, help_text="Extra environment variables.")
    calendar = models.ForeignKey(
        "calendars.Calendar",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
    )
    calendar_policy = models.CharField(max_length=10, choices=CALENDAR_POLICIES, default=SKIP)
    labels = models.JSONField(
        default=default_labels,
        blank=True,
        help_text="A runner must carry all of these labels to run the job.",
    )
    singleton = models.BooleanField(
        default=False,
        help_text="Never run two executions of this job at once (the overlap policy skip).",
    )
    overlap = models.CharField(
        max_length=10,
        choices=OVERLAPS,
        default=ALLOW,
        db_default=ALLOW,
        help_text="An occurrence due while a run of the job is live: run alongside, "
        "skip it, queue it, or replace the live run.",
    )
    max_concurrent = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="With overlap queue: at most this many runs at once (empty: 1).",
    )
    max_queue = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="With overlap queue: at most this many occurrences wait; "
        "later ones are skipped (empty: no limit).",
    )
    concurrency_group = models.ForeignKey(
        "scheduler.ConcurrencyGroup",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
        help_text="A budget of running executions this job shares with others.",
    )
    run_on = models.CharField(
        max_length=3,
        choices=RUN_ON,
        default=ONE,
        db_default=ONE,
        help_text="Run each occurrence on one matching runner, or on every matching "
        "runner online at its instant (one execution each).",
    )
    stagger = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_JITTER)],
        help_text="With run on all: seconds between the runners' starts, in the "
        "order of their names. Empty: all at once.",
    )
    timeout = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds before the run is killed (empty: no limit)."
    )
    retries = models.PositiveIntegerField(
        default=0,
        validators=[
            MaxValueValidator(MAX_RETRIES, f"at most {MAX_RETRIES} retries (got %(show_value)s)")
        ],
        help_text=f"Retries after a failed run (at most {MAX_RETRIES}).",
    )
    retry_backoff = models.PositiveIntegerField(
        default=30,
        validators=[
            MaxValueValidator(
                MAX_RETRY_BACKOFF,
                f"at most {MAX_RETRY_BACKOFF} seconds, a day (got %(show_value)s)",
            )
        ],
        help_text="Seconds before the first retry; doubles each time, "
        f"each wait at most {MAX_RETRY_DELAY} seconds (a day).",
    )
    misfire_policy = models.CharField(max_length=10, choices=MISFIRE_POLICIES, default=RUN_ONCE)
    enabled = models.BooleanField(default=True)
    owner = models.CharField(
        max_length=100,
        blank=True,
        help_text="Team or person the job belongs to; notification rules route on it.",
    )
    jitter = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_JITTER)],
        help_text="Seconds: every instant of the job moves later by a fixed offset "
        "below this, derived from the job's name (spreads jobs due together). Empty: none.",
    )
    max_duration = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds after which a run still going is reported slow (job.slow). "
        "Empty: slow past the job's usual duration (p95 x the slow factor).",
    )
    min_duration = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="A successful run shorter than this many seconds is reported (job.fast).",
    )
    maintenance = models.CharField(
        max_length=10,
        choices=MAINTENANCE_MODES,
        default=SKIP,
        db_default=SKIP,
        help_text="An occurrence inside a maintenance: skipped, or deferred to one run at its end.",
    )
    pause_after_failures = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Pause the job after this many runs in a row failed for good "
        "(after their retries). Empty: never.",
    )
    on_success = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        help_text="Names of jobs to run when a run of this job succeeds.",
    )
    on_failure = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        help_text="Names of jobs to run when a run of this job fails for good (after its retries).",
    )
    parameters = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        validators=[validate_parameters],
        help_text="Names of environment variables a manual trigger may set.",
    )
    paused_at = models.DateTimeField(
        null=True, blank=True, help_text="Set by an operator's pause; apply leaves it alone."
    )
    paused_until = models.DateTimeField(
        null=True, blank=True, help_text="A paused job resumes by itself at this instant."
    )
    pause_reason = models.CharField(max_length=200, blank=True, help_text="Why it is paused.")
    next_run_at = models.DateTimeField(
        null=True, blank=True, help_text="Next scheduled instant (UTC), calendar applied."
    )
    last_scheduled_at = models.DateTimeField(
        null=True, blank=True, help_text="Last instant the schedule fired for."
    )
    error = models.TextField(
        blank=True,
        help_text="Why the scheduler could not fire the job (it stays out of the "
        "schedule until an operator saves or resumes it).",
    )
    error_at = models.DateTimeField(null=True, blank=True, help_text="When the error was set.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        # Operator actions beyond editing; checked through core.permissions.
        permissions = [
            ("run_job", "Can run a job now"),
            ("pause_job", "Can pause and resume a job"),
        ]
        indexes = [
            # The trigger tick: "enabled, unpaused jobs whose next_run_at <= now".
            models.Index(
                fields=["next_run_at"],
                condition=models.Q(enabled=True, paused_at__isnull=True),
                name="job_due",
            ),
            # The pause-end step: "paused jobs whose paused_until <= now".
            models.Index(
                fields=["paused_until"],
                condition=models.Q(paused_until__isnull=False),
                name="job_pause_ends",
            ),
        ]

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        self.sync_overlap()
        super().save(*args, **kwargs)
        job_edits.saved()  # a sleeping loop looks whether it is due sooner

    @property
    def is_active(self):
        return self.enabled and self.paused_at is None and not self.error

    @property
    def one_live(self):
        """Whether the job may have only one live (pending or running)
        execution: the database's singleton index then guards it."""
        if self.overlap == self.QUEUE:
            return self.concurrency_limit == 1
        return self.overlap in (self.SKIP, self.REPLACE)

    @property
    def concurrency_limit(self):
        """How many runs of the job may be live at once (None: no limit)."""
        if self.overlap == self.QUEUE:
            return self.max_concurrent or 1
        return 1 if self.overlap in (self.SKIP, self.REPLACE) else None

    def sync_overlap(self):
        """Keep `singleton` (the older name of overlap skip) and `overlap`
        in step: a job saved with `singleton` set and no other policy skips."""
        if self.singleton and self.overlap == self.ALLOW:
            self.overlap = self.SKIP
        self.singleton = self.overlap == self.SKIP

    def chain_problems(self, graph=None):
        """{field: message} for `on_success` / `on_failure` naming a missing
        job or closing a cycle; `graph`: the other jobs' chains (default:
        as stored, read under the chain graph's lock: call it inside the
        transaction that saves the job). Skipped while `defer_chain_check`
        is set: apply checks a whole file's chains at once, after its jobs."""
        from scheduler.jobs import chain_graph

        if getattr(self, "defer_chain_check", False):
            return {}
        if graph is None:
            if self.on_success or self.on_failure:  # a job chaining to none closes no cycle
                chain_graph.lock()
            others = Job.objects.exclude(pk=self.pk) if self.pk else Job.objects.all()
            graph = {
                n: (s or [], f or []) for n, s, f in others.values_list("name", *chain_graph.FIELDS)
            }
        return chain_graph.problems(self.name, self.on_success or [], self.on_failure or [], graph)

    def overlap_problems(self):
        """{field: message} for an overlap policy that cannot hold."""
        problems = {}
        if self.singleton and self.overlap not in (self.ALLOW, self.SKIP):
            problems["overlap"] = f"{self.overlap} cannot be combined with singleton: true"
        if self.overlap != self.QUEUE:
            for name in ("max_concurrent", "max_queue"):
                if getattr(self, name) is not None:
                    problems[name] = "only with overlap: queue"
        if self.max_concurrent is not None and self.max_concurrent < 1:
            problems["max_concurrent"] = "must be at least 1"
        if self.run_on == self.ALL and (self.singleton or self.overlap != self.ALLOW):
            # One live run per job cannot be one run per runner.
            policy = "singleton: true" if self.singleton else f"overlap: {self.overlap}"
            problems["run_on"] = f"all cannot be combined with {policy} (one run per runner)"
        if self.stagger is not None and self.run_on != self.ALL:
            problems["stagger"] = "only with run_on: all"
        return problems

    def clear_error(self):
        """Lift the quarantine; returns the fields to save when there was one."""
        if not self.error:
            return []
        self.error, self.error_at = "", None
        return ["error", "error_at"]

    @property
    def offset(self):
        """The job's `jitter` delay: each instant is the schedule's plus it."""
        return jitter_offset(self.name, self.jitter)

    def next_fire_after(self, after, blocked=None):
        """The first fire instant strictly after `after`, calendar applied
        (`blocked`: see `scheduler.jobs.cron.next_fire`). With `jitter`, the
        schedule's instant (the one the calendar judges) plus the job's offset."""
        from scheduler.jobs.cron import next_fire

        offset = self.offset
        instant = next_fire(
            self.schedule,
            self.timezone,
            self.calendar_rules(),
            after - offset,
            self.calendar_policy,
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            blocked=blocked,
            key=self.name,
        )
        return instant + offset if instant is not None else None

    def upcoming(self, after, count, blocked=None):
        """Up to `count` instants this job fires strictly after `after`, calendar applied.

        The one answer to "when does this job fire next" for the admin, the
        dashboard and `next_runs`, counted as the loop counts: each instant
        is `next_fire_after` the one before, starting from the job's anchor
        (see `first_fire_after`). ScheduleError or RulesError when the stored
        schedule or calendar cannot be evaluated. `blocked`, a list, receives
        the candidates the calendar turned away before the last one returned.
        """
        fires = []
        resumes = self.paused_until if self.paused_at else None
        if resumes is not None and resumes > after:
            instant = self.fire_after_pause(resumes, blocked)  # what the loop then does
        else:
            instant = self.first_fire_after(after, blocked)
        while instant is not None and len(fires) < count:
            fires.append(instant)
            if len(fires) < count:
                instant = self.next_fire_after(instant, blocked)
        return fires

    def first_fire_after(self, after, blocked=None):
        """The first instant the job fires strictly after `after`.

        Cron instants are fixed points in time. An `@every` job fires on the
        grid of its next_run_at (anchored on its last scheduled instant), so
        counting from `after` would drift to "after + interval": the grid is
        followed forwards or backwards to the last point not after `after`.
        A job without next_run_at (paused, disabled) counts from `after`, as
        resuming it at `after` would.
        """
        from scheduler.jobs.cron import parse_schedule

        every = parse_schedule(self.schedule, key=self.name).every
        if every is None or self.next_run_at is None:
            return self.next_fire_after(after, blocked)
        grid_point = self.next_run_at + ((after - self.next_run_at) // every) * every
        return self.next_fire_after(grid_point, blocked)

    def fire_after_pause(self, until, blocked=None):
        """The first instant the job fires once a pause ends at `until`.

        A cron occurrence at `until` itself fires. An `@every` job counts
        from `until`, as an operator's resume at that instant would (counting
        from just before it would fire a microsecond early).
        """
        from scheduler.jobs.cron import parse_schedule

        if parse_schedule(self.schedule, key=self.name).every is None:
            until -= timedelta(microseconds=1)  # next_fire_after is strictly after
        return self.next_fire_after(until, blocked)

    def no_fires_reason(self, after):
        """Why `upcoming(after, ...)` is empty, in a sentence."""
        from scheduler.jobs.cron import never_fires_reason

        reason = never_fires_reason(
            self.schedule,
            self.timezone,
            self.calendar_rules(),
            after,
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            policy=self.calendar_policy,
            key=self.name,
        )
        return reason or "no fire time within the horizon"

    def wall_time(self, instant):
        """An instant on the clock of the job's timezone, where its schedule is read."""
        from calendars.zones import get_zone

        return instant.astimezone(get_zone(self.timezone))

    def wall_and_utc(self, instant):
        """An instant as the admin and the dashboard show it: (on the job's
        clock, in UTC), e.g. ("Mon 2026-12-07 09:00:00 CET", "08:00:00 UTC").
        The UTC text drops the date on the same day and is None for a job in
        UTC; a timezone that no longer resolves shows UTC alone."""
        utc = instant.astimezone(UTC)
        try:
            wall = self.wall_time(instant)
        except ValueError:
            wall = utc
        if wall.tzname() == "UTC":
            return utc.strftime("%a %Y-%m-%d %H:%M:%S UTC"), None
        same_day = wall.date() == utc.date()
        return (
            wall.strftime("%a %Y-%m-%d %H:%M:%S %Z"),
            utc.strftime("%H:%M:%S UTC" if same_day else "%a %Y-%m-%d %H:%M:%S UTC"),
        )

    def calendar_rules(self, shared=None):
        """The calendar as CalendarRules, built once per instance (it costs
        queries); `shared` is a {calendar id: rules} dict reused across jobs."""
        if not self.calendar_id:
            return None
        cached = getattr(self, "_calendar_rules", None)
        if cached is None or cached[0] != self.calendar_id:
            rules = shared.get(self.calendar_id) if shared is not None else None
            if rules is None:
                rules = self.calendar.rules()
                if shared is not None:
                    shared[self.calendar_id] = rules
            self._calendar_rules = (self.calendar_id, rules)
        return self._calendar_rules[1]

    def due_instant(self, rules):
        """next_run_at checked against the calendar `rules` as they are now.

        next_run_at was computed with the calendar of that moment; a blackout
        added since moves it to the next instant the calendar allows (`skip`)
        or to the end of the blackout (`defer`).
        """
        instant = self.next_run_at
        offset = self.offset  # the calendar judges the schedule's instant
        if instant is None or rules is None or rules.is_allowed(instant - offset):
            return instant
        if self.calendar_policy == self.DEFER:
            allowed = rules.next_allowed(instant - offset)
            return allowed + offset if allowed is not None else None
        return self.next_fire_after(instant)

    def reschedule(self, now):
        """Point next_run_at at the first instant after `now` (after an edit).

        What the loop created ahead of an instant still to come is withdrawn
        first: the edited job decides whether that instant fires.
        """
        self.withdraw_ahead(now)
        self.next_run_at = self.next_fire_after(now) if self.is_active else None

    def withdraw_ahead(self, now):
        """Delete the executions the loop created ahead of their instant
        (`scheduler.firing.ticks.FIRE_LEAD`) that are not yet due; returns how many.
        Only those whose instant is still ahead: a run whose instant passed
        and that waits for a later start (a run_on: all job's stagger, a
        maintenance's end) belongs to an occurrence that has fired."""
        if self.pk is None:
            return 0
        withdrawn, _ = Execution.objects.filter(
            job=self,
            state=Execution.PENDING,
            trigger=Execution.SCHEDULE,
            attempt=1,
            scheduled_for__gt=now,
            run_after__gt=now,
        ).delete()
        return withdrawn

    def locked(self):
        """This job read again with its row locked until the transaction
        ends (calendar loaded); OperationRefused when it was deleted since."""
        from scheduler.runs.refusals import OperationRefused

        rows = Job.objects.select_for_update(of=("self",)).select_related("calendar")
        job = rows.filter(pk=self.pk).first()
        if job is None:
            raise OperationRefused(f"{self.name} was deleted")
        return job

    def clean(self):
        from django.core.exceptions import ValidationError

        from scheduler.jobs.cron import ScheduleError, never_fires_reason, parse_schedule

        # Text first: the checks below look names up and parse the schedule.
        validate_stored_text(self)
        problems = {**self.overlap_problems(), **self.chain_problems()}
        if problems:
            raise ValidationError(problems)
        self.sync_overlap()
        try:
            parse_schedule(self.schedule, key=self.name)
        except ScheduleError as e:
            raise ValidationError({"schedule": str(e)}) from None
        try:
            validate_timezone(self.timezone)
        except ValidationError:
            return  # the field validator reports it
        reason = never_fires_reason(
            self.schedule,
            self.timezone,
            self.calendar_rules(),
            timezone.now(),
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            policy=self.calendar_policy,
            key=self.name,
        )
        if reason:
            raise ValidationError({"schedule": reason})
