"""What an item of an apply file may say, and how it reads: checked field
values for Calendar, CalendarPeriod and Job, with errors that name the item
and field ("calendars[0].exclude[2].start: ..."), and the comparable state
of a row that tells whether applying changes it.
"""

import datetime as dt
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from calendars.models import WEEKDAYS, CalendarPeriod
from scheduler.jobs.cron import EVERY_RE
from scheduler.models import Job, validate_parameters

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
        "the job's name).",
        REQUIRED,
    ),
    Field("timezone", "IANA timezone", "The schedule is read in it.", "UTC"),
    Field("command", "text", "Shell command the runner executes (sh -c).", REQUIRED),
    Field("env", "mapping of text", "Extra environment variables of the run.", {}),
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


def field_names(fields):
    return {f.name for f in fields}


def defaults(fields):
    """{name: default} of the optional fields."""
    return {f.name: f.default for f in fields if f.default is not REQUIRED}


def yaml_paths(fields, prefix=""):
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
GROUP_FIELDS = (
    Field("name", "slug", "Unique name; jobs join the group by it.", REQUIRED),
    Field("max_concurrent", "whole number", "At most this many of its runs at once.", REQUIRED),
    Field("description", "text", "Free text.", ""),
)
GROUP_KEYS = field_names(GROUP_FIELDS)
# Job fields that are durations: seconds, or a text like "30m" (see `seconds`).
JOB_DURATIONS = ("max_duration", "min_duration", "jitter", "stagger")
JOB_DEFAULTS = defaults(JOB_FIELDS)
# Model field -> YAML path, for the errors of a calendar, a period, a job.
YAML_PATHS = {**yaml_paths(CALENDAR_FIELDS), **yaml_paths(PERIOD_FIELDS)}


# Values quoted in errors are cut to this many characters, and each error to
# MAX_ERROR_CHARS: an answer stays small whatever the document holds.
QUOTED_CHARS = 80
MAX_ERROR_CHARS = 500


def quoted(value, limit=QUOTED_CHARS):
    """repr(value), cut to `limit` characters with an ellipsis."""
    return shortened(repr(value), limit)


def shortened(text, limit):
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ApplyError(Exception):
    def __init__(self, errors):
        errors = errors if isinstance(errors, list) else [errors]
        self.errors = [shortened(e, MAX_ERROR_CHARS) for e in errors]
        super().__init__("; ".join(self.errors))


def string_mapping(where, value):
    if not isinstance(value, dict):
        raise ApplyError(f"{where}: expected a mapping of names to values")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def string_list(where, value):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ApplyError(f"{where}: expected a list of non-empty strings")
    return value


def parameter_names(where, value):
    """A job's `parameters`: env names a manual trigger may set."""
    try:
        validate_parameters(value)
    except ValidationError as e:
        raise ApplyError(f"{where}: {e.messages[0]}") from None
    return value


def whole_number(where, value, least):
    """A whole number of at least `least`; ApplyError naming `where` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplyError(f"{where}: expected a whole number, got {quoted(value)}")
    if value < least:
        raise ApplyError(f"{where}: must be at least {least}, got {value}")
    return value


def seconds(where, value, least=0):
    """A duration in whole seconds: a number (`900`) or `@every`'s grammar
    (`"30m"`, `"1h30m"`, `"2d"`, `"45s"`); ApplyError unless it is at least `least`."""
    if isinstance(value, str) and value.strip():
        text = value.strip().lower()
        if text.removeprefix("-").isdigit():
            value = int(text)
        else:
            match = EVERY_RE.match(text)
            if not match:
                raise ApplyError(
                    f"{where}: {quoted(value)} is not a duration: seconds (900) or "
                    'a text like "30s", "15m", "1h30m", "2d"'
                )
            days, hours, minutes, secs = (int(g or 0) for g in match.groups())
            value = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplyError(
            f'{where}: expected whole seconds (900) or a duration like "15m", got {quoted(value)}'
        )
    if value < least:
        raise ApplyError(f"{where}: must be at least {least} second(s), got {value}")
    return value


def order_by_base(indexed):
    """Calendars whose base is in the file come after their base."""
    by_name = {item["name"]: (where, item) for where, item in indexed}
    ordered, placed = [], set()

    def place(name, trail=()):
        if name in placed or name not in by_name:
            return
        if name in trail:
            raise ApplyError(f"{by_name[name][0]}.base: cycle through {' -> '.join(trail)}")
        base = by_name[name][1].get("base")
        if base:
            place(base, (*trail, name))
        placed.add(name)
        ordered.append(by_name[name])

    for name in by_name:
        place(name)
    return ordered


def unknown_fields(where, mapping, known):
    unknown = set(mapping) - known
    if unknown:
        raise ApplyError(f"{where}: unknown field(s): {', '.join(sorted(map(str, unknown)))}")


def parse_time(where, value):
    try:
        return dt.time.fromisoformat(str(value))
    except ValueError:
        raise ApplyError(f'{where}: {quoted(value)} is not a time like "06:00"') from None


def calendar_values(where, item, calendar_named):
    holidays = item.get("holidays") or {}
    if not isinstance(holidays, dict):
        raise ApplyError(f"{where}.holidays: expected {{country, subdivision?, categories?}}")
    unknown_fields(f"{where}.holidays", holidays, HOLIDAY_KEYS)
    window = item.get("daily_window") or {}
    if not isinstance(window, dict) or (window and set(window) != {"start", "end"}):
        raise ApplyError(f'{where}.daily_window: expected {{start: "HH:MM", end: "HH:MM"}}')
    weekdays = item.get("weekdays", list(WEEKDAYS))
    if not isinstance(weekdays, list):
        raise ApplyError(f"{where}.weekdays: expected a list like [mon, tue]")
    base = item.get("base")
    base_calendar = None
    if base:
        base_calendar = calendar_named(base)
        if base_calendar is None:
            raise ApplyError(f"{where}.base: no calendar named {quoted(base)}")
    return {
        "description": item.get("description") or "",
        "timezone": item.get("timezone") or "UTC",
        "weekdays": [str(d).lower() for d in weekdays],
        "holiday_country": str(holidays.get("country") or ""),
        "holiday_subdivision": str(holidays.get("subdivision") or ""),
        "holiday_categories": list(holidays.get("categories") or []),
        "window_start": parse_time(f"{where}.daily_window.start", window["start"])
        if window
        else None,
        "window_end": parse_time(f"{where}.daily_window.end", window["end"]) if window else None,
        "base": base_calendar,
    }


def periods_of(where, item):
    for kind in (CalendarPeriod.EXCLUDE, CalendarPeriod.INCLUDE):
        periods = item.get(kind) or []
        if not isinstance(periods, list):
            raise ApplyError(f"{where}.{kind}: expected a list of {{start, end, label?}}")
        for index, period in enumerate(periods):
            yield kind, index, period


def parse_moment(where, value):
    """A date (whole day) or an aware datetime."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        return value
    else:
        text = str(value)
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            pass
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ApplyError(
                f"{where}: {quoted(value)} is not a date or an ISO 8601 datetime"
            ) from None
    if moment.tzinfo is None:
        raise ApplyError(f"{where}: datetime {quoted(value)} needs an offset, e.g. +01:00 or Z")
    return moment


def period_values(where, kind, period):
    if not isinstance(period, dict) or not {"start", "end"} <= set(period):
        raise ApplyError(f"{where}: expected {{start, end, label?}}")
    unknown_fields(where, period, field_names(PERIOD_FIELDS))
    start = parse_moment(f"{where}.start", period["start"])
    end = parse_moment(f"{where}.end", period["end"])
    if isinstance(start, dt.datetime) != isinstance(end, dt.datetime):
        raise ApplyError(f"{where}: start and end must both be dates or both datetimes")
    if start > end or (isinstance(start, dt.datetime) and start == end):
        raise ApplyError(f"{where}: start {period['start']} is after end {period['end']}")
    values = {"kind": kind, "label": str(period.get("label") or "")}
    if isinstance(start, dt.datetime):
        values.update(start_at=start, end_at=end)
    else:
        values.update(start_date=start, end_date=end)
    return values


def calendar_state(calendar, periods=None):
    """A comparable, JSON-friendly picture of a calendar and its periods."""
    if periods is None:
        periods = list(calendar.periods.all()) if calendar.pk else []
    return {
        "description": calendar.description,
        "timezone": calendar.timezone,
        "weekdays": list(calendar.weekdays),
        "holidays": [
            calendar.holiday_country,
            calendar.holiday_subdivision,
            list(calendar.holiday_categories),
        ],
        "daily_window": [
            calendar.window_start.isoformat() if calendar.window_start else None,
            calendar.window_end.isoformat() if calendar.window_end else None,
        ],
        "base": calendar.base.name if calendar.base is not None else None,
        "managed_by": calendar.managed_by,
        "managed_source": calendar.managed_source,
        "periods": sorted(
            [
                p.kind,
                str(p.start_date or p.start_at.isoformat()),
                str(p.end_date or p.end_at.isoformat()),
                p.label,
            ]
            for p in periods
        ),
    }


def job_state(job):
    return {
        "description": job.description,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "command": job.command,
        "env": dict(job.env),
        "calendar": job.calendar.name if job.calendar is not None else None,
        "calendar_policy": job.calendar_policy,
        "labels": list(job.labels),
        "singleton": job.singleton,
        "overlap": job.overlap,
        "max_concurrent": job.max_concurrent,
        "max_queue": job.max_queue,
        "jitter": job.jitter,
        "run_on": job.run_on,
        "stagger": job.stagger,
        "concurrency_group": (
            job.concurrency_group.name if job.concurrency_group is not None else None
        ),
        "timeout": job.timeout,
        "retries": job.retries,
        "retry_backoff": job.retry_backoff,
        "misfire_policy": job.misfire_policy,
        "enabled": job.enabled,
        "owner": job.owner,
        "max_duration": job.max_duration,
        "min_duration": job.min_duration,
        "managed_by": job.managed_by,
        "managed_source": job.managed_source,
        "parameters": list(job.parameters),
        "on_success": list(job.on_success or []),
        "on_failure": list(job.on_failure or []),
        "maintenance": job.maintenance,
        "pause_after_failures": job.pause_after_failures,
    }


def group_state(group):
    return {
        "max_concurrent": group.max_concurrent,
        "description": group.description,
        "managed_by": group.managed_by,
        "managed_source": group.managed_source,
    }


def overlap_of(current, patch):
    """A job's `singleton` and `overlap` after a partial change `patch`: the
    one the patch names wins, the other follows (singleton is overlap skip)."""
    if "overlap" in patch and "singleton" not in patch:
        return {"singleton": patch["overlap"] == Job.SKIP}
    if "singleton" in patch and "overlap" not in patch:
        if patch["singleton"] is True:
            return {"overlap": Job.SKIP}
        if patch["singleton"] is False and current.get("overlap") == Job.SKIP:
            return {"overlap": Job.ALLOW}
    return {}
