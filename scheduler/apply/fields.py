"""The fields an item of each built-in section of an apply file may carry
(calendars, their periods, concurrency groups, jobs): what apply accepts,
its defaults, and what docs/apply.md says of each (`manage.py
apply_reference`)."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from calendars.models import WEEKDAYS
from scheduler.jobs.models import MAX_MAX_MEMORY, MAX_MAX_OUTPUT, MIN_MAX_MEMORY, MIN_MAX_OUTPUT
from scheduler.models import Job

REQUIRED = "required"  # a Field's default when the item must give it


@dataclass(frozen=True)
class Field:
    """One field an apply file's item may carry: what apply accepts (its
    unknown-field checks and defaults read these lists) and what
    docs/apply.md says about it (`manage.py apply_reference` writes it)."""

    name: str
    kind: str  # the value's shape, as the reference shows it
    meaning: str
    default: object = None
    fields: tuple = ()  # of a mapping, or of each item of a list
    model_field: str = ""  # the model's name for it, when not `name`


PERIOD_FIELDS = (
    Field(
        "start",
        "date or datetime",
        "First day (a date) or instant (a datetime with an offset).",
        REQUIRED,
        model_field="start_date start_at",
    ),
    Field(
        "end",
        "date or datetime",
        "Last day, inclusive (a date), or end instant, exclusive "
        "(a datetime); both ends are dates or both are datetimes.",
        REQUIRED,
        model_field="end_date end_at",
    ),
    Field("label", "text", "Shown in the admin and the dashboard.", ""),
)
CALENDAR_FIELDS = (
    Field("name", "slug", "Unique name; jobs and rules refer to the calendar by it.", REQUIRED),
    Field("description", "text", "Free text.", ""),
    Field(
        "timezone",
        "IANA timezone",
        "Weekdays, holidays, the window and dates are read in it.",
        "UTC",
    ),
    Field("weekdays", "list of mon..sun", "Allowed days of the week.", list(WEEKDAYS)),
    Field(
        "holidays",
        "mapping",
        "Public holidays (the `holidays` package) block the whole day.",
        None,
        fields=(
            Field(
                "country", "ISO country code", "E.g. DE.", REQUIRED, model_field="holiday_country"
            ),
            Field(
                "subdivision", "text", "E.g. BY for Bavaria.", "", model_field="holiday_subdivision"
            ),
            Field(
                "categories",
                "list of text",
                "Holiday categories (the package's default: public).",
                [],
                model_field="holiday_categories",
            ),
        ),
    ),
    Field(
        "daily_window",
        "mapping",
        "The allowed time of day; none: the whole day.",
        None,
        fields=(
            Field(
                "start",
                '"HH:MM"',
                "Start of the window, local time.",
                REQUIRED,
                model_field="window_start",
            ),
            Field(
                "end",
                '"HH:MM"',
                "End of the window, exclusive; before start: it spans midnight.",
                REQUIRED,
                model_field="window_end",
            ),
        ),
    ),
    Field(
        "exclude",
        "list of periods",
        "Blackouts: never allowed, whatever else says so.",
        [],
        fields=PERIOD_FIELDS,
    ),
    Field(
        "include",
        "list of periods",
        "When given, only these periods are allowed.",
        [],
        fields=PERIOD_FIELDS,
    ),
    Field(
        "base",
        "calendar name",
        "A calendar this one narrows: an instant must be allowed by both.",
        None,
    ),
)
JOB_FIELDS = (
    Field("name", "slug", "Unique name.", REQUIRED),
    Field("description", "text", "Free text.", ""),
    Field(
        "schedule",
        "cron",
        '5-field cron ("30 2 * * *"), a macro (@daily), "@every 5m" or "@business_day 3 09:00" '
        "(the 3rd day of the month the calendar allows, Monday to Friday without one; "
        "-1 is the last). Cron also takes "
        "the Quartz day forms L, LW, 15W (day of month), 5L, 1#2 (day of week) and "
        '"H", "H(0-29)", "H/15" in the minute and hour fields (a value hashed from '
        "the job's name). A job with `schedules` or `at`, or with `run_on_register: "
        'true`, may have none (`""`, or left out): with `schedules` or `at` and no '
        "`schedule`, it has none; with `run_on_register` alone, it then runs when a "
        "runner starts, or when triggered, and a later apply that leaves it out keeps "
        "the stored schedule.",
        REQUIRED,
    ),
    Field("timezone", "IANA timezone", "The schedule is read in it.", "UTC"),
    Field(
        "schedules",
        "list of schedules",
        "More schedules, beside or instead of `schedule` (at most 20): each a schedule as "
        "`schedule` takes it, read in the job's timezone, or a mapping `{cron, timezone}` "
        "on a clock of its own. The job fires at every instant any of its schedules and "
        "`at` gives, once per instant. An `@every` schedule counts from the job's last "
        "instant when it is the job's only source; among others it runs on a fixed grid "
        "through `not_before` (else the Unix epoch: `@every 15m` at :00, :15, :30, :45).",
        [],
        fields=(
            Field("cron", "schedule", "Any form `schedule` takes.", REQUIRED),
            Field("timezone", "IANA timezone", "Its clock; none: the job's timezone.", None),
        ),
    ),
    Field(
        "at",
        "list of ISO 8601 instants",
        "One-shot instants with their offset (`2026-06-01T09:00:00+02:00`, at most "
        "1,000), with or without schedules; the calendar gates them as it gates a "
        "schedule's. An instant not yet stored must be in the future: one already past "
        "is refused, naming it (`jobs[0].at[1]`); one the job already has stays valid "
        "once past, so the same file applies again.",
        [],
    ),
    Field(
        "not_before",
        "ISO 8601 instant",
        "No occurrence before it (an occurrence at it fires).",
        None,
    ),
    Field(
        "not_after",
        "ISO 8601 instant",
        "No occurrence after it (an occurrence at it fires); after `not_before`, and "
        "some occurrence must fall between the two.",
        None,
    ),
    Field(
        "max_runs",
        "whole number",
        "After this many scheduled occurrences (at most 100,000) the job completes: it "
        'disables itself (`"completed": true` in the API, audited `job.completed`). '
        "Every occurrence that comes due counts, whether it ran, was skipped (overlap, "
        "maintenance) or was missed while the scheduler was down; manual, chained and "
        "retried runs do not. Counted from when it is set; a completed job runs again "
        "once max_runs is raised or removed and it is enabled.",
        None,
    ),
    Field(
        "kind",
        "shell | http | container",
        "What a run does: `shell` runs `command`; `http` makes the request `http` "
        "describes, from the runner itself (no shell, no process); `container` runs "
        "the image `container` names with the runner machine's docker or podman. Only "
        "runners whose agent announces `http` take an http job (agents of 0.2.0 and "
        "before do not: the job waits), and only those whose agent found a container "
        "engine announce `container` (and carry the label `container`).",
        Job.SHELL,
    ),
    Field(
        "command",
        "text",
        "Shell command the runner executes (sh -c): required for kind shell, none for the "
        "other kinds.",
        "",
    ),
    Field(
        "http",
        "mapping",
        "The request of kind http (and only of it). The run succeeds on an expected "
        'status and fails on another (`error: "HTTP 503"`) or when no answer comes '
        "(the error says why: `connection refused: host:port`, ...); redirects are not "
        "followed (a 3xx is the answer: expect it to accept it). The log holds the "
        "status line, the response's headers and its body, within `max_output` as a "
        "command's output is (its head and tail, the cut said). The url, the header "
        "values and the body may hold `${secret:NAME}`; a "
        "header named like a secret (`Authorization`, `Cookie`, `X-Api-Key`, "
        "`*-Token`) is shown masked by the API unless it is such a reference, alone or "
        "after a scheme (`Bearer ${secret:api-token}`).",
        None,
        fields=(
            Field(
                "method",
                "GET | HEAD | POST | PUT | PATCH | DELETE | OPTIONS",
                "The request's method.",
                "GET",
            ),
            Field("url", "URL", "`http://` or `https://`, with a host.", REQUIRED),
            Field(
                "headers",
                "mapping of text",
                "Request headers, one line each; a name once, whatever its case.",
                {},
            ),
            Field("body", "text", "Sent as UTF-8 (at most 64 KiB); none: no body.", ""),
            Field(
                "expect_status",
                "list of status codes",
                "The statuses that make the run succeed (100-599); none: any 2xx.",
                [],
            ),
            Field(
                "timeout",
                "duration",
                "The request's own limit, at most the job's `timeout`: past it the run is "
                "timed out, as past the job's. None: the job's timeout.",
                None,
            ),
        ),
    ),
    Field(
        "container",
        "mapping",
        "What kind container runs (and only it): `docker run --rm` (or podman's) of "
        "`image` with `args`, on the runner's machine. The container's output is the "
        "run's log and its exit code the run's; it is removed after the run, and killed "
        "with it (timeout, cancel, a lost lease, the agent's death). The job's `timeout` "
        "counts from the start of the engine's command, a pull included.",
        None,
        fields=(
            Field(
                "image",
                "image reference",
                "The image, as the engine names it (`alpine:3.20`, "
                "`registry.example.com/team/report@sha256:...`).",
                REQUIRED,
            ),
            Field(
                "args",
                "list of text",
                "The arguments after the image (the command and its arguments, passed to "
                "the image's entrypoint); none: the image's default command. No "
                "`${secret:NAME}`: they show in the machine's process list.",
                [],
            ),
            Field(
                "env",
                "mapping of text",
                "The container's environment (names like `DB_HOST`, values one line each; "
                "`${secret:NAME}` may stand in a value), with `CRONIQ_JOB`, "
                "`CRONIQ_EXECUTION_ID`, `CRONIQ_SCHEDULED_FOR`, `CRONIQ_ATTEMPT` and "
                "`CRONIQ_TRIGGER` set over it. Values named like secrets are shown masked.",
                {},
            ),
            Field(
                "pull",
                "missing | always | never",
                "When the engine pulls the image: when it is not on the machine, before "
                "every run, or never (a missing image fails the run).",
                "missing",
            ),
            Field(
                "network",
                "none | bridge | host",
                "The container's network; none: the engine's default.",
                None,
            ),
        ),
    ),
    Field(
        "max_output",
        "size",
        "Bytes of output a run's log keeps: `64MiB`, `16KiB`, `1GiB` or a number of bytes "
        "(1 KiB to 1 GiB). Past it the log keeps its head and its tail, with a line saying "
        "how many bytes were cut between them (an http job's answer and a container's "
        "output too). None: the server's `CRONIQ_LOG_LIMIT` (1 MiB unless changed), which "
        "also bounds what the server stores whatever this says.",
        None,
    ),
    Field(
        "on_max_output",
        "truncate | fail",
        "Output past `max_output`: `truncate` the log (the run goes on), or `fail`: the "
        'run is ended and fails (`error: "output limit 1 MiB exceeded"`). With `fail` '
        "only runners whose agent announces `limits` take the job (older agents do not: "
        "the job waits).",
        Job.TRUNCATE,
    ),
    Field(
        "max_memory",
        "size",
        "Memory the command's processes may use together (at least 1 MiB): in a cgroup "
        "where the runner can make one, else a limit on each process's data (setrlimit). "
        'Past it the run fails: `error: "memory limit 64 MiB exceeded"`. Shell jobs only '
        "(an http job has no memory of its own, a container job's is its engine's to "
        "limit); only runners whose agent announces `limits` take the job (older agents "
        "do not: the job waits).",
        None,
    ),
    Field(
        "max_cpu_seconds",
        "seconds",
        "CPU time the command's processes may use together (a cgroup's count, else the "
        "process tree's, and a limit on each process). Past it the run fails: `error: \"CPU "
        'limit 2 s exceeded"`. Shell jobs only (as `max_memory`); only runners whose agent '
        "announces `limits` take the job (older agents do not: the job waits).",
        None,
    ),
    Field(
        "success_exit_codes",
        "list of exit codes",
        "The exit codes that make a run succeed (0-255), e.g. `[0, 3]`; a code not listed "
        "fails it, 0 included. None: 0 alone. Read by the server when the run ends, so "
        "every agent honours it. Shell and container jobs (the container's exit code); an "
        "http job has `http.expect_status`.",
        [],
    ),
    Field("env", "mapping of text", "Extra environment variables of the run.", {}),
    Field(
        "stdin",
        "text",
        "Fed to the command's standard input (at most 64 KiB); none: no input. Only "
        "runners whose agent announces it take the job (agents of 0.2.0 and before do "
        "not: the job waits).",
        "",
    ),
    Field(
        "run_as",
        "user name",
        "The user the runner runs the command as, over the agent's `--run-as` (the agent "
        "must run as root, or be that user; else the run fails saying so). Only runners "
        "whose agent announces it take the job (agents of 0.2.0 and before do not: the "
        "job waits).",
        "",
    ),
    Field(
        "run_on_register",
        "true | false",
        "Like cron's @reboot: one run on each runner carrying the job's labels each time "
        "its agent starts (a new agent process, a restart included; not a reconnection), "
        "pinned to it, trigger `register`. A paused, disabled or quarantined job gets "
        "none; with a schedule it fires on that too.",
        False,
    ),
    Field(
        "webhook",
        "true | false",
        "Give the job a URL that runs it when POSTed to, with no API key (trigger "
        '`webhook`; the body may set its `parameters`: `{"env": {...}}`). The URL holds '
        "an unguessable token: the admin and the API show it to whoever may change the "
        "job (`webhook_url`), never in this file. A job with a webhook may have no "
        "schedule.",
        False,
    ),
    Field(
        "webhook_secret",
        "secret reference",
        "With it, a webhook call must carry a `Croniq-Signature` header made with this "
        "secret, as Croniq signs its own webhooks: `${CRONIQ_SECRET_NAME}` or "
        "`file:/run/secrets/name`, never the secret itself.",
        "",
    ),
    Field("calendar", "calendar name", "When the job may fire.", None),
    Field(
        "calendar_policy",
        "skip | defer",
        "An occurrence the calendar blocks: skip it (next "
        "cron instant inside allowed time) or defer it (runs once at the first allowed "
        "instant; several blocked occurrences coalesce).",
        Job.SKIP,
    ),
    Field("labels", "list of text", "A runner must carry all of them to run the job.", []),
    Field(
        "tags",
        "list of tags",
        "What operators group and find jobs by (the dashboard's `?tag=`, the API's job "
        "list, the admin's filter), never where a job runs: at most 20, each 1 to 50 "
        "lower-case letters, digits, `.`, `_` and `-`, starting with a letter or digit.",
        [],
    ),
    Field(
        "singleton",
        "true | false",
        "Never two executions at once; an occurrence due while one runs is "
        "skipped. The older name of `overlap: skip`.",
        False,
    ),
    Field(
        "overlap",
        "allow | skip | queue | replace",
        "An occurrence due while a run of the job is live: run alongside, skip it, "
        "queue it (max_concurrent at once, the rest wait in order), or replace the "
        "live run (cancelled; the new one starts once it has ended).",
        Job.ALLOW,
    ),
    Field(
        "max_concurrent",
        "whole number",
        "With overlap queue: at most this many runs at once; none: 1.",
        None,
    ),
    Field(
        "max_queue",
        "whole number",
        "With overlap queue: at most this many occurrences wait, later ones are "
        "skipped; none: no limit.",
        None,
    ),
    Field(
        "concurrency_group",
        "group name",
        "A budget of running executions shared with other jobs (`concurrency_groups`).",
        None,
    ),
    Field(
        "jitter",
        "duration",
        "Every instant of the job moves later by a fixed offset below it, derived "
        "from the job's name (the same in every process): jobs due together spread "
        "out. The calendar judges the schedule's instant; at most a day.",
        None,
    ),
    Field(
        "run_on",
        "one | all",
        "Run each occurrence on one matching runner, or on every runner online at "
        "its instant that carries the job's labels (one execution each, with its own "
        "lease, logs and result; a runner that comes online later does not get it). "
        "`all` needs overlap allow.",
        Job.ONE,
    ),
    Field(
        "stagger",
        "duration",
        "With run_on all: the runners start this far apart, in the order of their "
        "names; none: all at once.",
        None,
    ),
    Field("timeout", "seconds", "The run is killed after it; none: no limit.", None),
    Field("retries", "whole number", "Retries after a failed run (at most 100).", 0),
    Field(
        "retry_backoff",
        "seconds",
        "Before the first retry; doubles each time (at most 86400; no retry waits over a day).",
        30,
    ),
    Field(
        "misfire_policy",
        "run_once | skip | run_all",
        "Occurrences missed while the "
        "scheduler was down: one catch-up run, none, or each (capped).",
        Job.RUN_ONCE,
    ),
    Field("enabled", "true | false", "A disabled job never fires.", True),
    Field("owner", "text", "Team or person; notification rules route on it.", ""),
    Field(
        "max_duration",
        "duration",
        "A run still going after it is reported slow "
        "(job.slow); none: the job's p95 x the rule's slow factor.",
        None,
    ),
    Field(
        "min_duration", "duration", "A successful run shorter than it is reported (job.fast).", None
    ),
    Field("parameters", "list of env names", "The env names a manual trigger may set.", []),
    Field(
        "on_success",
        "list of job names",
        "Jobs to run when a run of this one succeeds (trigger chain, same logical "
        "time, CRONIQ_UPSTREAM_EXECUTION_ID in their env). No cycles.",
        [],
    ),
    Field(
        "on_failure",
        "list of job names",
        "Jobs to run when a run of this one fails for good (after its retries).",
        [],
    ),
    Field(
        "requires",
        "list of {job, succeeded_within}",
        "An occurrence of the schedule runs only when each job named has a run that "
        "succeeded within `succeeded_within` (a duration) before the occurrence's "
        "instant, or since; decided at the instant. Manual, chained, retried and other "
        "triggered runs are not held. At most 20 jobs; no cycles with chains.",
        [],
        fields=(
            Field("job", "job name", "A job that must have succeeded.", REQUIRED),
            Field(
                "succeeded_within",
                "duration",
                "How long before the instant its success may be (at most 366 days).",
                REQUIRED,
            ),
        ),
    ),
    Field(
        "requires_policy",
        "wait | skip | fail",
        "An occurrence whose requirements are unmet: `wait` holds it (queued) until they "
        "are met, at most `requires_timeout`, then skips it (at most 100 runs of a job wait: "
        "beyond, skipped); `skip` skips it; `fail` fails "
        'it (`error: "requirements unmet"`, no retry, a dead letter, its notifications). '
        "Each is audited and notified as `execution.requirements_unmet`.",
        Job.WAIT,
    ),
    Field(
        "requires_timeout",
        "duration",
        "With `requires_policy: wait`: how long a run waits (at most a week).",
        3600,
    ),
    Field(
        "maintenance",
        "skip | defer",
        "An occurrence inside a maintenance (the switch or a window): skip it "
        "(recorded as skipped) or defer it (one run when the maintenance ends; "
        "several occurrences coalesce).",
        Job.SKIP,
    ),
    Field(
        "pause_after_failures",
        "whole number",
        "Pause the job after this many runs in a row failed for good (after "
        "their retries); none: never.",
        None,
    ),
)


def field_names(fields: Iterable[Field]) -> set[str]:
    return {f.name for f in fields}


def defaults(fields: Iterable[Field]) -> dict[str, Any]:
    """{name: default} of the optional fields."""
    return {f.name: f.default for f in fields if f.default is not REQUIRED}


def yaml_paths(fields: Iterable[Field], prefix: str = "") -> dict[str, str]:
    """{model field: YAML path} ("holiday_country": "holidays.country") of
    the fields the model names differently, so errors name what the file says."""
    paths = {}
    for f in fields:
        path = f"{prefix}{f.name}"
        paths.update(dict.fromkeys(f.model_field.split(), path))
        if f.fields and "list" not in f.kind:  # a list's items are checked one by one
            paths.update(yaml_paths(f.fields, f"{path}."))
    return paths


CALENDAR_KEYS = field_names(CALENDAR_FIELDS)
HOLIDAY_KEYS = field_names(next(f for f in CALENDAR_FIELDS if f.name == "holidays").fields)
JOB_KEYS = field_names(JOB_FIELDS)
HTTP_FIELDS = next(f for f in JOB_FIELDS if f.name == "http").fields
HTTP_KEYS = field_names(HTTP_FIELDS)
CONTAINER_FIELDS = next(f for f in JOB_FIELDS if f.name == "container").fields
CONTAINER_KEYS = field_names(CONTAINER_FIELDS)
GROUP_FIELDS = (
    Field("name", "slug", "Unique name; jobs join the group by it.", REQUIRED),
    Field("max_concurrent", "whole number", "At most this many of its runs at once.", REQUIRED),
    Field("description", "text", "Free text.", ""),
)
GROUP_KEYS = field_names(GROUP_FIELDS)
PROJECT_FIELDS = (
    Field("name", "slug", "Unique name; items and API keys name their project by it.", REQUIRED),
    Field("description", "text", "Free text.", ""),
)
PROJECT_KEYS = field_names(PROJECT_FIELDS)
# Job fields that are durations: seconds, or a text like "30m" (see `seconds`).
JOB_DURATIONS = ("max_duration", "min_duration", "jitter", "stagger", "requires_timeout")
# Job fields that are sizes: bytes, or a text like "64MiB"
# (`scheduler.apply.items.size`), with their bounds.
JOB_SIZE_BOUNDS = {
    "max_output": (MIN_MAX_OUTPUT, MAX_MAX_OUTPUT),
    "max_memory": (MIN_MAX_MEMORY, MAX_MAX_MEMORY),
}
JOB_SIZES = tuple(JOB_SIZE_BOUNDS)
JOB_DEFAULTS = defaults(JOB_FIELDS)
# Model field -> YAML path, for the errors of a calendar, a period, a job.
YAML_PATHS = {**yaml_paths(CALENDAR_FIELDS), **yaml_paths(PERIOD_FIELDS)}
