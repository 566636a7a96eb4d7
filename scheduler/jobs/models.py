"""The job: what runs, where, when and under which policies, with the rules
that keep a job consistent (`clean`) and the one function that says when it
fires next (`Job.upcoming`)."""

import hashlib
import re
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Greatest

from calendars.rules import CalendarRules
from calendars.validators import validate_timezone
from core.ownership import Owned
from croniq_runner.sizes import GIB, KIB, MIB
from runners.models import feature_marks
from scheduler.firing import job_edits
from scheduler.jobs import requires as job_requires
from scheduler.jobs import webhooks
from scheduler.jobs.tags import validate_tags
from scheduler.runs.models import Execution


def default_labels() -> list[str]:
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
# The largest `stdin`, in bytes of UTF-8: it travels in every assignment of
# the job (docs/design.md §4), beside the command; a crontab's `%` input is
# a few lines.
MAX_STDIN = 64 * 1024
# A POSIX user name (the portable filename characters, no leading hyphen),
# at most 32 characters as useradd allows.
RUN_AS_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}")


def jitter_offset(name: str, jitter: int) -> timedelta:
    """The fixed delay of a job's instants: below `jitter` seconds, from a
    hash of its name (the same in every process and after a restart)."""
    if not jitter:
        return timedelta(0)
    digest = hashlib.sha256(f"jitter:{name}".encode()).digest()
    return timedelta(microseconds=int.from_bytes(digest[:8], "big") % (jitter * 1_000_000))


# Bounds of a job's timing beyond `schedule` (docs/design.md §14): each
# schedule and one-shot instant is evaluated on every fire-time question,
# and the loop may count up to MAX_RUNS occurrences one by one after an
# outage (scheduler.firing.misfires).
MAX_SCHEDULES = 20
MAX_AT = 1000
MAX_RUNS = 100_000


# Bounds of a job's limits (docs/design.md §15). The agent keeps up to half
# of `max_output` in memory (the log's tail) while the run goes on; below
# MIN_MAX_MEMORY not even a shell starts.
MIN_MAX_OUTPUT = KIB
MAX_MAX_OUTPUT = GIB
MIN_MAX_MEMORY = MIB
MAX_MAX_MEMORY = 1024 * GIB
MAX_CPU_SECONDS = 2_147_483_647  # the column's largest
# An exit status is a byte.
MAX_EXIT_CODE = 255


def validate_exit_codes(value: Any) -> None:
    """`success_exit_codes`: distinct exit codes 0-255."""
    from django.core.exceptions import ValidationError

    if not isinstance(value, list):
        raise ValidationError("a list of exit codes like [0, 3]")
    for index, code in enumerate(value):
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= MAX_EXIT_CODE:
            raise ValidationError(f"[{index}]: {code!r} is not an exit code (0-{MAX_EXIT_CODE})")
    if len(set(value)) != len(value):
        raise ValidationError("an exit code appears twice")


# What a trigger may set: an environment variable's name, not one of the
# variables the agent sets itself (CRONIQ_...).
PARAMETER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def validate_run_as(value: str) -> None:
    from django.core.exceptions import ValidationError

    if value and (not RUN_AS_RE.fullmatch(value) or value.isdigit()):
        raise ValidationError(
            f"{value!r} is not a user name (letters, digits, '.', '_' and '-', "
            "not starting with '-', not all digits, at most 32 characters)"
        )


def validate_stdin(value: str) -> None:
    from django.core.exceptions import ValidationError

    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_STDIN:
        raise ValidationError(f"at most {MAX_STDIN} bytes (got {size})")


def validate_schedules(value: Any) -> None:
    """The shape of `schedules`; each schedule is read by Job.clean (its H
    forms need the job's name)."""
    from django.core.exceptions import ValidationError

    if not isinstance(value, list):
        raise ValidationError("a list of schedules")
    if len(value) > MAX_SCHEDULES:
        raise ValidationError(f"at most {MAX_SCHEDULES} schedules (got {len(value)})")
    for index, item in enumerate(value):
        text = item.get("cron") if isinstance(item, dict) else item
        if not isinstance(text, str) or (isinstance(item, dict) and not set(item) <= SOURCE_KEYS):
            raise ValidationError(
                f"schedules[{index}]: a schedule, or a mapping {{cron, timezone}}"
            )


SOURCE_KEYS = frozenset({"cron", "timezone"})


def validate_at(value: Any) -> None:
    from django.core.exceptions import ValidationError

    from scheduler.jobs.schedules.errors import ScheduleError
    from scheduler.jobs.schedules.union import parse_instant

    if not isinstance(value, list):
        raise ValidationError("a list of ISO 8601 instants")
    if len(value) > MAX_AT:
        raise ValidationError(f"at most {MAX_AT} instants (got {len(value)})")
    for index, text in enumerate(value):
        try:
            parse_instant(text)
        except ScheduleError as e:
            raise ValidationError(f"at[{index}]: {e}") from None


def validate_requires(value: Any) -> None:
    from django.core.exceptions import ValidationError

    problem = job_requires.shape_problem(value)
    if problem:
        raise ValidationError(problem)


def validate_parameters(value: Any) -> None:
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


def needs_limits(max_memory: Any, max_cpu_seconds: Any, on_max_output: Any) -> bool:
    """Whether a job with these limits needs an agent that announced
    `limits` (`Job.needs_limits`); also read from an apply item's values."""
    return bool(max_memory or max_cpu_seconds or on_max_output == job_requires.FAIL)


class Job(Owned):
    """A command to run on a schedule, gated by an optional calendar."""

    # Written by the scheduler loop only: an operator's save never writes
    # them back (it read them before the loop may have moved them on).
    SCHEDULER_FIELDS = ("next_run_at", "last_scheduled_at", "error", "error_at", "scheduled_runs")
    # Fields whose change moves the next fire time.
    SCHEDULE_FIELDS = frozenset(
        {"schedule", "timezone", "calendar", "calendar_policy", "enabled", "jitter"}
    ) | frozenset({"schedules", "at", "not_before", "not_after", "max_runs"})

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
        blank=True,
        help_text='5-field cron ("30 2 * * *"), a macro (@daily) or "@every 5m". '
        "Empty only with more schedules or one-shot instants, or with run on register: "
        "the job then runs when a runner starts and when triggered.",
    )
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="IANA timezone the schedule is read in.",
    )
    # What a run does (docs/design.md §15): a shell command, an HTTP request
    # the runner's agent makes itself, or a container its machine's engine runs.
    SHELL = "shell"
    HTTP = "http"
    CONTAINER = "container"
    KINDS = [
        (SHELL, "shell: a command under sh -c"),
        (HTTP, "http: a request the runner makes"),
        (CONTAINER, "container: an image the runner's docker or podman runs"),
    ]
    kind = models.CharField(
        max_length=10,
        choices=KINDS,
        default=SHELL,
        db_default=SHELL,
        help_text="What a run does: run the command (shell), make the HTTP request (http) "
        "or run the container (container).",
    )
    command = models.TextField(
        blank=True,
        help_text="Shell command the runner executes (sh -c); required for kind shell, "
        "empty for the other kinds.",
    )
    http = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text="With kind http, the request: {method, url, headers, body, expect_status, "
        "timeout}. Empty for the other kinds.",
    )
    container = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text="With kind container, what the engine runs: {image, args, env, pull, "
        "network}. Empty for the other kinds.",
    )
    env = models.JSONField(default=dict, blank=True, help_text="Extra environment variables.")
    stdin = models.TextField(
        blank=True,
        default="",
        db_default="",
        validators=[validate_stdin],
        help_text=f"Text fed to the command's standard input (at most {MAX_STDIN} bytes). "
        "Empty: no input.",
    )
    run_as = models.CharField(
        max_length=32,
        blank=True,
        default="",
        db_default="",
        validators=[validate_run_as],
        help_text="The user the runner runs the command as (its agent must run as root). "
        "Empty: the agent's --run-as, else the agent's own user.",
    )
    # Limits (docs/design.md §15): what a run may take before it is cut or
    # failed. Sizes in bytes; none: no limit (max_output: the server's
    # CRONIQ_LOG_LIMIT, 1 MiB unless changed).
    TRUNCATE = "truncate"
    OUTPUT_POLICIES = [
        (TRUNCATE, "truncate: keep the head and the tail, say how much was cut"),
        (job_requires.FAIL, "fail: end and fail the run"),
    ]
    max_output = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_MAX_OUTPUT), MaxValueValidator(MAX_MAX_OUTPUT)],
        help_text="Bytes of output a run's log keeps; past it the log keeps its head and "
        "tail (or the run fails, with on_max_output fail). Empty: the server's log limit "
        "(CRONIQ_LOG_LIMIT, 1 MiB unless changed).",
    )
    on_max_output = models.CharField(
        max_length=8,
        choices=OUTPUT_POLICIES,
        default=TRUNCATE,
        db_default=TRUNCATE,
        help_text="Output past max_output: truncate the log (keep its head and tail), "
        "or end the run and fail it.",
    )
    max_memory = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_MAX_MEMORY), MaxValueValidator(MAX_MAX_MEMORY)],
        help_text="Bytes of memory the command's processes may use together (a cgroup where "
        "the runner can make one, else a limit per process); past it the run fails. "
        "Empty: no limit.",
    )
    max_cpu_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_CPU_SECONDS)],
        help_text="Seconds of CPU the command's processes may use together; past them the "
        "run fails. Empty: no limit.",
    )
    success_exit_codes = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        validators=[validate_exit_codes],
        help_text="The exit codes that make a run succeed, e.g. [0, 3]. Empty: 0 alone.",
    )
    run_on_register = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Also run once on each runner carrying the job's labels when it starts "
        "(a new agent process), like cron's @reboot.",
    )
    # Beside `schedule` (docs/design.md §14); all read by `Job.upcoming`.
    schedules = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        validators=[validate_schedules],
        help_text="More schedules, beside or instead of the schedule: each a schedule "
        'as above, or {"cron": ..., "timezone": ...} on a clock of its own. The job '
        "fires at each instant any of them gives, once.",
    )
    at = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        validators=[validate_at],
        help_text="One-shot instants, ISO 8601 with an offset (2026-06-01T09:00:00+02:00).",
    )
    not_before = models.DateTimeField(
        null=True, blank=True, help_text="No occurrence before this instant."
    )
    not_after = models.DateTimeField(
        null=True, blank=True, help_text="No occurrence after this instant."
    )
    max_runs = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_RUNS)],
        help_text="After this many scheduled occurrences the job completes: it disables "
        "itself. Raise it (or empty it) to run the job again. Empty: no limit.",
    )
    scheduled_runs = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Scheduled occurrences counted towards max_runs since it was set.",
    )
    webhook = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Give the job a URL that runs it when POSTed to, with no API key "
        "(the URL is the secret: regenerate it to revoke it).",
    )
    webhook_key = models.CharField(
        max_length=32,
        null=True,
        blank=True,
        unique=True,  # a webhook call's only lookup: one index probe
        editable=False,
        help_text="Random; the webhook URL is it signed with SECRET_KEY "
        "(scheduler.jobs.webhooks), so this alone runs nothing. Empty without a webhook.",
    )
    webhook_secret = models.CharField(
        max_length=500,
        blank=True,
        default="",
        db_default="",
        help_text="Webhook calls must carry a Croniq-Signature made with this secret, "
        "written as a reference: ${CRONIQ_SECRET_NAME} or file:/run/secrets/name. "
        "Empty: the URL alone runs the job.",
    )
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
    # What operators group and find jobs by (scheduler.jobs.tags); never
    # where a job runs, which labels decide.
    tags = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        validators=[validate_tags],
        help_text="Short slugs to find and act on jobs together, e.g. billing, nightly.",
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
    # Requirements (docs/design.md §14; scheduler.jobs.requires): jobs that
    # must have succeeded shortly before an occurrence runs.
    WAIT = job_requires.WAIT
    FAIL = job_requires.FAIL
    REQUIRES_POLICIES = [
        (WAIT, "wait: hold the run until they are met, at most the timeout, then skip it"),
        (SKIP, "skip the occurrence"),
        (FAIL, "fail the run (a dead letter, notifications)"),
    ]
    requires = models.JSONField(
        default=default_labels,
        db_default=[],
        blank=True,
        validators=[validate_requires],
        help_text="Jobs that must each have a run that succeeded within a window before "
        'an occurrence\'s instant: [{"job": name, "succeeded_within": seconds}].',
    )
    requires_policy = models.CharField(
        max_length=4,
        choices=REQUIRES_POLICIES,
        default=WAIT,
        db_default=WAIT,
        help_text="An occurrence whose requirements are unmet at its instant: wait for "
        "them, skip it, or fail it.",
    )
    requires_timeout = models.PositiveIntegerField(
        default=job_requires.DEFAULT_TIMEOUT,
        db_default=job_requires.DEFAULT_TIMEOUT,
        validators=[
            MinValueValidator(1),
            MaxValueValidator(
                job_requires.MAX_TIMEOUT,
                f"at most {job_requires.MAX_TIMEOUT} seconds, a week (got %(show_value)s)",
            ),
        ],
        help_text="With requires_policy wait: seconds a run waits for its requirements "
        "before it is skipped.",
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

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.sync_overlap()
        self.sync_webhook()
        fields = kwargs.get("update_fields")
        if fields is not None and "webhook" in fields:
            kwargs["update_fields"] = [*fields, "webhook_key"]  # its key follows it
        super().save(*args, **kwargs)
        job_edits.saved()  # a sleeping loop looks whether it is due sooner

    @property
    def is_active(self) -> bool:
        return self.enabled and self.paused_at is None and not self.error

    @property
    def features(self) -> frozenset[str]:
        """What its runner's agent must understand to run the job right
        (`runners.models.JOB_FEATURES`; docs/design.md §4)."""
        needs = (
            ("stdin", self.stdin),
            ("run_as", self.run_as),
            ("http", self.kind == self.HTTP),
            ("container", self.kind == self.CONTAINER),
            ("limits", self.needs_limits),
        )
        return frozenset(feature for feature, needed in needs if needed)

    @property
    def needs_limits(self) -> bool:
        """Whether an agent that ignored the job's limits would run it wrong:
        unbounded (max_memory, max_cpu_seconds), or to success past its
        output (on_max_output fail). `max_output` alone needs no agent: the
        server cuts a log at it too; nor `success_exit_codes`, which the
        server reads when the run ends (docs/design.md §15)."""
        return needs_limits(self.max_memory, self.max_cpu_seconds, self.on_max_output)

    @property
    def output_limit(self) -> int:
        """The bytes of output a run's log keeps: `max_output`, else the
        server's log limit."""
        return self.max_output or settings.CRONIQ_LOG_LIMIT

    def succeeds_with(self, exit_code: int | None) -> bool:
        """Whether a run that exited with `exit_code` succeeded."""
        return exit_code is not None and exit_code in (self.success_exit_codes or [0])

    @property
    def requirements(self) -> frozenset[str]:
        """What a runner must carry to take the job's work: its labels and
        the marks of the features it needs (`runners.models.Runner.fits`)."""
        return frozenset(self.labels or ()) | feature_marks(self.features)

    @property
    def one_live(self) -> bool:
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

    def sync_overlap(self) -> None:
        """Keep `singleton` (the older name of overlap skip) and `overlap`
        in step: a job saved with `singleton` set and no other policy skips."""
        if self.singleton and self.overlap == self.ALLOW:
            self.overlap = self.SKIP
        self.singleton = self.overlap == self.SKIP

    def sync_webhook(self) -> None:
        """A job with a webhook has a key, one without has none: turned off
        and on again, it gets a new URL (scheduler.jobs.webhooks)."""
        if self.webhook and not self.webhook_key:
            self.webhook_key = webhooks.new_key()
        elif not self.webhook:
            self.webhook_key = None

    @property
    def webhook_url(self) -> str | None:
        """The absolute URL that runs the job (None without a webhook): only
        for whoever may change the job."""
        return webhooks.url(self.webhook_key) if self.webhook else None

    def chain_problems(
        self, graph: dict[str, tuple[list[str], list[str]]] | None = None
    ) -> dict[str, str]:
        """{field: message} for chains naming a missing job or closing a
        cycle (scheduler.jobs.job_checks.chain_problems)."""
        from scheduler.jobs import job_checks

        return job_checks.chain_problems(self, graph)

    def overlap_problems(self) -> dict[str, str]:
        """{field: message} for an overlap policy that cannot hold."""
        from scheduler.jobs import job_checks

        return job_checks.overlap_problems(self)

    def clear_error(self) -> list[str]:
        """Lift the quarantine; returns the fields to save when there was one."""
        if not self.error:
            return []
        self.error, self.error_at = "", None
        return ["error", "error_at"]

    @property
    def completed(self) -> bool:
        """Whether the job has had its `max_runs` scheduled occurrences."""
        return self.max_runs is not None and self.scheduled_runs >= self.max_runs

    @property
    def runs_left(self) -> int | None:
        """Scheduled occurrences the job may still have (None: no limit)."""
        if self.max_runs is None:
            return None
        return max(self.max_runs - self.scheduled_runs, 0)

    def sync_run_limit(self) -> None:
        """Keep the count and `enabled` in step with `max_runs`: the count
        starts when a limit is set, and a completed job stays disabled
        whatever an edit says of `enabled` until the limit is raised."""
        if self.max_runs is None:
            self.scheduled_runs = 0
        elif self.completed:
            self.enabled = False

    @property
    def timing(self):
        """The job's sources, one-shot instants and bounds as one Timing
        (scheduler.jobs.fire_times.timing), None when it has only its
        `schedule`."""
        from scheduler.jobs import fire_times

        return fire_times.timing(self)

    @property
    def offset(self) -> timedelta:
        """The job's `jitter` delay: each instant is the schedule's plus it."""
        return jitter_offset(self.name, self.jitter)

    def next_fire_after(
        self, after: datetime, blocked: list[datetime] | None = None
    ) -> datetime | None:
        """The first fire instant strictly after `after`, calendar applied,
        jitter added (scheduler.jobs.fire_times.next_fire_after)."""
        from scheduler.jobs import fire_times

        return fire_times.next_fire_after(self, after, blocked)

    def upcoming(
        self, after: datetime, count: int, blocked: list[datetime] | None = None
    ) -> list[datetime]:
        """Up to `count` instants this job fires strictly after `after`, calendar
        applied: the one answer to "when does this job fire next"
        (scheduler.jobs.fire_times.upcoming)."""
        from scheduler.jobs import fire_times

        return fire_times.upcoming(self, after, count, blocked)

    def first_fire_after(
        self, after: datetime, blocked: list[datetime] | None = None
    ) -> datetime | None:
        """The first instant the job fires strictly after `after`, an `@every`
        job on its grid (scheduler.jobs.fire_times.first_fire_after)."""
        from scheduler.jobs import fire_times

        return fire_times.first_fire_after(self, after, blocked)

    def fire_after_pause(
        self, until: datetime, blocked: list[datetime] | None = None
    ) -> datetime | None:
        """The first instant the job fires once a pause ends at `until`
        (scheduler.jobs.fire_times.fire_after_pause)."""
        from scheduler.jobs import fire_times

        return fire_times.fire_after_pause(self, until, blocked)

    def no_fires_reason(self, after: datetime) -> str:
        """Why `upcoming(after, ...)` is empty, in a sentence."""
        from scheduler.jobs import fire_times

        return fire_times.no_fires_reason(self, after)

    def wall_time(self, instant: datetime) -> datetime:
        """An instant on the clock of the job's timezone, where its schedule is read."""
        from scheduler.jobs import fire_times

        return fire_times.wall_time(self, instant)

    def wall_and_utc(self, instant: datetime) -> tuple[str, str | None]:
        """An instant as the admin and the dashboard show it: (on the job's
        clock, in UTC) (scheduler.jobs.fire_times.wall_and_utc)."""
        from scheduler.jobs import fire_times

        return fire_times.wall_and_utc(self, instant)

    def calendar_rules(
        self, shared: dict[int, CalendarRules] | None = None
    ) -> CalendarRules | None:
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

    def due_instant(self, rules: CalendarRules | None) -> datetime | None:
        """next_run_at checked against the calendar `rules` as they are now
        (scheduler.jobs.fire_times.due_instant)."""
        from scheduler.jobs import fire_times

        return fire_times.due_instant(self, rules)

    def reschedule(self, now: datetime) -> None:
        """Point next_run_at at the first instant after `now` (after an edit).

        What the loop created ahead of an instant still to come is withdrawn
        first: the edited job decides whether that instant fires.
        """
        self.withdraw_ahead(now)
        self.next_run_at = self.next_fire_after(now) if self.is_active else None

    def withdraw_ahead(self, now: datetime) -> int:
        """Delete the executions the loop created ahead of their instant
        (`scheduler.firing.ticks.FIRE_LEAD`) that are not yet due; returns how many.
        Only those whose instant is still ahead: a run whose instant passed
        and that waits for a later start (a run_on: all job's stagger, a
        maintenance's end) belongs to an occurrence that has fired. Their
        occurrences did not happen: `max_runs` counts them no more."""
        if self.pk is None:
            return 0
        ahead = Execution.objects.filter(
            job=self,
            state=Execution.PENDING,
            trigger=Execution.SCHEDULE,
            attempt=1,
            scheduled_for__gt=now,
            run_after__gt=now,
        )
        if self.max_runs is not None:
            self.give_back(len(set(ahead.values_list("scheduled_for", flat=True))))
        withdrawn, _ = ahead.delete()
        return withdrawn

    def give_back(self, occurrences: int) -> None:
        """Uncount `occurrences` withdrawn before their instant; a job they
        completed is enabled again (its completion disabled it)."""
        if not occurrences:
            return
        was_completed = self.completed
        self.scheduled_runs = max(self.scheduled_runs - occurrences, 0)
        if was_completed and not self.completed:
            self.enabled = True
        # On the row as stored: the loop may have counted since this was read.
        completed_by_these = models.Q(
            max_runs__isnull=False,
            scheduled_runs__gte=models.F("max_runs"),
            scheduled_runs__lt=models.F("max_runs") + occurrences,
        )
        Job.objects.filter(pk=self.pk).update(
            scheduled_runs=Greatest(models.F("scheduled_runs") - occurrences, 0),
            enabled=models.Case(
                models.When(completed_by_these, then=models.Value(True)),
                default=models.F("enabled"),
            ),
        )

    def locked(self) -> "Job":
        """This job read again with its row locked until the transaction
        ends (calendar loaded); OperationRefused when it was deleted since."""
        from scheduler.runs.refusals import OperationRefused

        rows = Job.objects.select_for_update(of=("self",)).select_related("calendar")
        job = rows.filter(pk=self.pk).first()
        if job is None:
            raise OperationRefused(f"{self.name} was deleted")
        return job

    def clean(self) -> None:
        from scheduler.jobs import job_checks

        job_checks.clean(self)
